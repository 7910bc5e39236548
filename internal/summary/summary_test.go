package summary

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

func obs(cluster string, labels map[string]string, values map[string]any) Observation {
	return Observation{Cluster: cluster, Labels: labels, Values: values}
}

func ready(n string) map[string]any { return map[string]any{"ready": json.Number(n)} }

func spec(op placementv1alpha1.SummaryOperation, value string) placementv1alpha1.StatusSummary {
	return placementv1alpha1.StatusSummary{Name: "s", Operation: op, Value: value, Resource: placementv1alpha1.SummaryResource{Group: "apps", Kind: "Deployment"}}
}

func TestReduceOverNoClusters(t *testing.T) {
	for op, want := range map[placementv1alpha1.SummaryOperation]string{
		placementv1alpha1.SummarySum: "0", placementv1alpha1.SummaryCount: "0",
		placementv1alpha1.SummaryMin: "", placementv1alpha1.SummaryMax: "", placementv1alpha1.SummaryAvg: "",
	} {
		t.Run(string(op), func(t *testing.T) {
			got := Reduce(spec(op, "ready"), Input{Stale: 2})
			g := NewWithT(t)
			g.Expect(got.Value).To(Equal(want), "never Inf or NaN: absent")
			g.Expect(got.Count).To(HaveValue(BeZero()))
			g.Expect(got.Stale).To(HaveValue(BeEquivalentTo(2)))
		})
	}
}

func TestReduceOperations(t *testing.T) {
	in := Input{Observations: []Observation{
		obs("a", nil, ready("3")), obs("b", nil, ready("1")), obs("c", nil, ready("2")),
		obs("d", nil, map[string]any{}),                    // missing
		obs("e", nil, map[string]any{"ready": "many"}),     // not a number
		obs("f", nil, map[string]any{"ready": []any{1.0}}), // not a number
	}}
	for op, want := range map[placementv1alpha1.SummaryOperation]string{
		placementv1alpha1.SummarySum: "6", placementv1alpha1.SummaryMin: "1", placementv1alpha1.SummaryMax: "3", placementv1alpha1.SummaryAvg: "2",
	} {
		t.Run(string(op), func(t *testing.T) {
			g := NewWithT(t)
			got := Reduce(spec(op, "ready"), in)
			g.Expect(got.Value).To(Equal(want))
			g.Expect(got.Count).To(HaveValue(BeEquivalentTo(3)))
			g.Expect(got.Missing).To(HaveValue(BeEquivalentTo(1)))
			g.Expect(got.Invalid).To(HaveValue(BeEquivalentTo(2)))
			g.Expect(got.Message).To(ContainSubstring("2 objects report a ready that is not a number"))
		})
	}
	t.Run("Count counts the objects that report the value", func(t *testing.T) {
		got := Reduce(spec(placementv1alpha1.SummaryCount, "ready"), in)
		NewWithT(t).Expect(got.Value).To(Equal("5"))
	})
	t.Run("Count without a value counts every reporting object", func(t *testing.T) {
		got := Reduce(spec(placementv1alpha1.SummaryCount, ""), in)
		NewWithT(t).Expect(got.Value).To(Equal("6"))
	})
}

func TestReduceNumbers(t *testing.T) {
	g := NewWithT(t)
	big := Input{Observations: []Observation{obs("a", nil, ready("9007199254740993")), obs("b", nil, ready("1"))}}
	g.Expect(Reduce(spec(placementv1alpha1.SummarySum, "ready"), big).Value).To(Equal("9007199254740994"), "integers stay exact")
	mixed := Input{Observations: []Observation{obs("a", nil, ready("1")), obs("b", nil, ready("0.5")), obs("c", nil, map[string]any{"ready": "2"})}}
	g.Expect(Reduce(spec(placementv1alpha1.SummarySum, "ready"), mixed).Value).To(Equal("3.5"))
	g.Expect(Reduce(spec(placementv1alpha1.SummaryMin, "ready"), mixed).Value).To(Equal("0.5"))
	g.Expect(Reduce(spec(placementv1alpha1.SummaryAvg, "ready"), Input{Observations: []Observation{obs("a", nil, ready("1")), obs("b", nil, ready("2")), obs("c", nil, ready("2"))}}).Value).To(Equal("1.666667"))
}

func TestReduceGroups(t *testing.T) {
	g := NewWithT(t)
	in := Input{Observations: []Observation{
		obs("a", map[string]string{"region": "eu"}, map[string]any{"ready": json.Number("2"), "image": "web:1"}),
		obs("b", map[string]string{"region": "eu"}, map[string]any{"ready": json.Number("3"), "image": "web:2"}),
		obs("c", map[string]string{"region": "us"}, map[string]any{"ready": json.Number("1"), "image": "web:2"}),
		obs("d", nil, map[string]any{"ready": json.Number("4")}),
	}}
	byRegion := spec(placementv1alpha1.SummarySum, "ready")
	byRegion.GroupBy = &placementv1alpha1.SummaryGroupBy{ClusterLabel: "region"}
	got := Reduce(byRegion, in)
	g.Expect(got.Value).To(Equal("10"))
	g.Expect(got.Groups).To(Equal([]placementv1alpha1.SummaryGroup{
		{Key: "eu", Value: "5", Count: 2}, {Key: NoGroup, Value: "4", Count: 1}, {Key: "us", Value: "1", Count: 1},
	}))

	perImage := spec(placementv1alpha1.SummaryCount, "")
	perImage.GroupBy = &placementv1alpha1.SummaryGroupBy{Value: "image"}
	perImage.MaxGroups = ptr.To[int32](1)
	got = Reduce(perImage, in)
	g.Expect(got.Groups).To(Equal([]placementv1alpha1.SummaryGroup{{Key: "web:2", Value: "2", Count: 2}}))
	g.Expect(got.OmittedGroups).To(HaveValue(BeEquivalentTo(2)))
	g.Expect(got.Message).To(Equal("2 groups beyond maxGroups (1) are left out"))
}

func TestReduceCapsAtTheDefault(t *testing.T) {
	in := Input{}
	for i := range 50 {
		in.Observations = append(in.Observations, obs(fmt.Sprint(i), nil, map[string]any{"v": json.Number(fmt.Sprint(i))}))
	}
	s := spec(placementv1alpha1.SummaryCount, "")
	s.GroupBy = &placementv1alpha1.SummaryGroupBy{Value: "v"}
	got := Reduce(s, in)
	NewWithT(t).Expect(got.Groups).To(HaveLen(DefaultMaxGroups))
	NewWithT(t).Expect(got.OmittedGroups).To(HaveValue(BeEquivalentTo(50 - DefaultMaxGroups)))
}

func TestReduceSaysWhyItCannot(t *testing.T) {
	got := Reduce(spec(placementv1alpha1.SummarySum, "ready"), Input{Err: errors.New("no spec.reporting.feedback rule of apps Deployment reports ready")})
	NewWithT(t).Expect(got.Message).To(Equal("cannot be computed: no spec.reporting.feedback rule of apps Deployment reports ready"))
	NewWithT(t).Expect(got.Value).To(BeEmpty())
}
