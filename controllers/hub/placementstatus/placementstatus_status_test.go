package placementstatus

import (
	"fmt"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// work returns a Work of cluster at generation gen whose agent reported Applied
// (status) for generation reported; status "" means no report yet.
func work(cluster string, gen, reported int64, status metav1.ConditionStatus) workv1alpha1.Work {
	w := workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: "ns.p", Namespace: names.ClusterNamespace(cluster), Generation: gen}}
	w.Spec.Workload.Manifests = []workv1alpha1.Manifest{{RawExtension: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"ns"}}`)}}}
	if status != "" {
		w.Status.Conditions = []metav1.Condition{{Type: lodestarworkv1alpha1.ConditionApplied, Status: status, Reason: "R", Message: "m", ObservedGeneration: reported}}
	}
	return w
}

// part is part i of two of cluster's Works, as work makes one.
func part(cluster string, i int, status metav1.ConditionStatus) workv1alpha1.Work {
	const n = 2
	w := work(cluster, 1, 1, status)
	w.Name = names.WorkPart("ns", "p", i)
	w.Labels = map[string]string{placementv1alpha1.WorkPartLabel: strconv.Itoa(i)}
	w.Annotations = map[string]string{placementv1alpha1.WorkPartsAnnotation: strconv.Itoa(n)}
	return w
}

// aggregateCases are the Applied condition and per-cluster state that Works
// come to.
var aggregateCases = []struct {
	name        string
	decided     []string
	works       []workv1alpha1.Work
	wantStatus  metav1.ConditionStatus
	wantReason  string
	wantApplied int32
	wantMessage string
	wantCluster map[string]metav1.ConditionStatus
}{
	{
		name: "no cluster", wantStatus: metav1.ConditionFalse, wantReason: placementv1alpha1.ReasonNoClusters,
	},
	{
		name: "all applied", decided: []string{"a", "b"},
		works:      []workv1alpha1.Work{work("a", 2, 2, metav1.ConditionTrue), work("b", 1, 1, metav1.ConditionTrue)},
		wantStatus: metav1.ConditionTrue, wantReason: placementv1alpha1.ReasonApplied, wantApplied: 2,
		wantCluster: map[string]metav1.ConditionStatus{"a": metav1.ConditionTrue, "b": metav1.ConditionTrue},
	},
	{
		name: "a stale report is pending", decided: []string{"a"},
		works:      []workv1alpha1.Work{work("a", 3, 2, metav1.ConditionTrue)},
		wantStatus: metav1.ConditionFalse, wantReason: placementv1alpha1.ReasonApplyPending, wantMessage: "0 of 1 cluster applied; waiting for a",
		wantCluster: map[string]metav1.ConditionStatus{"a": metav1.ConditionUnknown},
	},
	{
		name: "no Work yet is pending", decided: []string{"a", "b"},
		works:      []workv1alpha1.Work{work("a", 1, 1, metav1.ConditionTrue)},
		wantStatus: metav1.ConditionFalse, wantReason: placementv1alpha1.ReasonApplyPending, wantApplied: 1,
		wantMessage: "1 of 2 clusters applied; waiting for b",
		wantCluster: map[string]metav1.ConditionStatus{"a": metav1.ConditionTrue},
	},
	{
		name: "a failure wins over pending", decided: []string{"a", "b", "c"},
		works: []workv1alpha1.Work{
			work("a", 1, 1, metav1.ConditionFalse), work("b", 1, 0, ""), work("c", 1, 1, metav1.ConditionTrue),
		},
		wantStatus: metav1.ConditionFalse, wantReason: placementv1alpha1.ReasonApplyFailed, wantApplied: 1,
		wantMessage: "1 of 3 clusters failed to apply: a",
		wantCluster: map[string]metav1.ConditionStatus{"a": metav1.ConditionFalse, "b": metav1.ConditionUnknown, "c": metav1.ConditionTrue},
	},
	{
		name: "a Work of an unselected cluster is listed but not counted", decided: []string{"a"},
		works:      []workv1alpha1.Work{work("a", 1, 1, metav1.ConditionTrue), work("old", 1, 1, metav1.ConditionTrue)},
		wantStatus: metav1.ConditionTrue, wantReason: placementv1alpha1.ReasonApplied, wantApplied: 1,
		wantCluster: map[string]metav1.ConditionStatus{"a": metav1.ConditionTrue, "old": metav1.ConditionTrue},
	},
	{
		name: "many failures are capped in the message", decided: []string{"a", "b", "c", "d", "e", "f", "g"},
		works: []workv1alpha1.Work{
			work("a", 1, 1, metav1.ConditionFalse), work("b", 1, 1, metav1.ConditionFalse), work("c", 1, 1, metav1.ConditionFalse),
			work("d", 1, 1, metav1.ConditionFalse), work("e", 1, 1, metav1.ConditionFalse), work("f", 1, 1, metav1.ConditionFalse),
			work("g", 1, 1, metav1.ConditionFalse),
		},
		wantStatus: metav1.ConditionFalse, wantReason: placementv1alpha1.ReasonApplyFailed,
		wantMessage: "7 of 7 clusters failed to apply: a, b, c, d, e and 2 more",
		wantCluster: map[string]metav1.ConditionStatus{
			"a": metav1.ConditionFalse, "b": metav1.ConditionFalse, "c": metav1.ConditionFalse, "d": metav1.ConditionFalse,
			"e": metav1.ConditionFalse, "f": metav1.ConditionFalse, "g": metav1.ConditionFalse,
		},
	},
	{
		name: "a cluster in several Works is applied when every part is", decided: []string{"a", "b"},
		works:      []workv1alpha1.Work{part("a", 0, metav1.ConditionTrue), part("a", 1, metav1.ConditionTrue), part("b", 0, metav1.ConditionTrue)},
		wantStatus: metav1.ConditionFalse, wantReason: placementv1alpha1.ReasonApplyPending, wantApplied: 1,
		wantMessage: "1 of 2 clusters applied; waiting for b",
		wantCluster: map[string]metav1.ConditionStatus{"a": metav1.ConditionTrue, "b": metav1.ConditionUnknown},
	},
	{
		name: "a part that failed fails its cluster", decided: []string{"a"},
		works:      []workv1alpha1.Work{part("a", 0, metav1.ConditionTrue), part("a", 1, metav1.ConditionFalse)},
		wantStatus: metav1.ConditionFalse, wantReason: placementv1alpha1.ReasonApplyFailed,
		wantMessage: "1 of 1 cluster failed to apply: a",
		wantCluster: map[string]metav1.ConditionStatus{"a": metav1.ConditionFalse},
	},
}

func TestAggregate(t *testing.T) {
	for _, tt := range aggregateCases {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			agg := Aggregate(tt.decided, tt.works, false, nil)
			g.Expect(agg.Condition.Type).To(Equal(placementv1alpha1.AppliedCondition))
			g.Expect(agg.Condition.Status).To(Equal(tt.wantStatus))
			g.Expect(agg.Condition.Reason).To(Equal(tt.wantReason))
			g.Expect(agg.Condition.Message).To(ContainSubstring(tt.wantMessage))
			g.Expect(agg.Applied).To(Equal(tt.wantApplied))
			got := map[string]metav1.ConditionStatus{}
			for i, cs := range agg.Clusters {
				got[cs.Name] = cs.Applied
				if i > 0 {
					g.Expect(agg.Clusters[i-1].Name < cs.Name).To(BeTrue(), "clusters are sorted")
				}
			}
			if tt.wantCluster == nil {
				tt.wantCluster = map[string]metav1.ConditionStatus{}
			}
			g.Expect(got).To(Equal(tt.wantCluster))
		})
	}
}

// A cluster whose overrides fail is listed with why and counts as not applied,
// whether it has no Work yet (a new Placement) or keeps an older one.
func TestAggregateNamesClustersWhoseOverridesFail(t *testing.T) {
	g := NewWithT(t)
	failed := RenderFailures(&placementv1alpha1.Placement{Status: placementv1alpha1.PlacementStatus{Rollout: &placementv1alpha1.RolloutStatus{
		Clusters: []placementv1alpha1.ClusterRollout{
			{Name: "b", State: placementv1alpha1.ClusterFailed, Reason: "OverrideFailed: rule greeting: no such key"},
			{Name: "c", State: placementv1alpha1.ClusterFailed, Reason: "OverrideFailed: rule greeting: no such key"},
			{Name: "a", State: placementv1alpha1.ClusterFailed, Reason: "not applied: denied"},
		}}}})
	g.Expect(failed).To(Equal(map[string]string{"b": "rule greeting: no such key", "c": "rule greeting: no such key"}))

	agg := Aggregate([]string{"a", "b", "c"}, []workv1alpha1.Work{work("a", 1, 1, metav1.ConditionTrue), work("c", 1, 1, metav1.ConditionTrue)}, false, failed)
	g.Expect(agg.Applied).To(BeEquivalentTo(1))
	g.Expect(agg.Condition.Reason).To(Equal(placementv1alpha1.ReasonOverrideFailed))
	g.Expect(agg.Condition.Message).To(Equal("2 of 3 clusters cannot apply the revision: b (OverrideFailed), c (OverrideFailed)"))
	g.Expect(agg.Clusters).To(HaveLen(3))
	for _, name := range []string{"b", "c"} {
		g.Expect(agg.Clusters).To(ContainElement(And(HaveField("Name", name), HaveField("Applied", metav1.ConditionFalse),
			HaveField("Reason", placementv1alpha1.ReasonOverrideFailed), HaveField("Message", ContainSubstring("rule greeting: no such key")))))
	}
	g.Expect(agg.Clusters).To(ContainElement(And(HaveField("Name", "b"), HaveField("Available", metav1.ConditionFalse), HaveField("Work", ""))))
	g.Expect(agg.Clusters).To(ContainElement(And(HaveField("Name", "c"), HaveField("Work", "ns.p"))))
}

// Works that carry no object read as nothing selected, not as applied.
func TestAggregateNothingSelected(t *testing.T) {
	g := NewWithT(t)
	empty := work("a", 1, 1, metav1.ConditionTrue)
	empty.Spec.Workload.Manifests = nil
	empty.Status.Conditions = append(empty.Status.Conditions, metav1.Condition{Type: lodestarworkv1alpha1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: "R", ObservedGeneration: 1})
	agg := Aggregate([]string{"a"}, []workv1alpha1.Work{empty}, false, nil)
	g.Expect(agg.Condition.Reason).To(Equal(placementv1alpha1.ReasonNothingSelected))
	g.Expect(agg.AvailableCondition.Reason).To(Equal(placementv1alpha1.ReasonNothingSelected))
	g.Expect(Aggregate([]string{"a"}, []workv1alpha1.Work{work("a", 1, 1, metav1.ConditionTrue)}, false, nil).Condition.Reason).To(Equal(placementv1alpha1.ReasonApplied))
}

func TestAggregateListsProblemsFirstWhenCapped(t *testing.T) {
	g := NewWithT(t)
	var decided []string
	var works []workv1alpha1.Work
	for i := range MaxListedClusters + 50 {
		c := fmt.Sprintf("c-%03d", i)
		decided = append(decided, c)
		w := work(c, 1, 1, metav1.ConditionTrue)
		w.Status.Conditions = append(w.Status.Conditions, metav1.Condition{Type: lodestarworkv1alpha1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: "R", ObservedGeneration: 1})
		works = append(works, w)
	}
	// The last clusters by name have problems: one failed, one not available yet.
	works[len(works)-1] = work(decided[len(decided)-1], 1, 1, metav1.ConditionFalse)
	works[len(works)-2] = work(decided[len(decided)-2], 1, 1, metav1.ConditionTrue)

	agg := Aggregate(decided, works, false, nil)
	g.Expect(agg.Clusters).To(HaveLen(MaxListedClusters))
	g.Expect(agg.Unlisted).To(BeEquivalentTo(50))
	g.Expect(agg.Clusters).To(ContainElements(HaveField("Name", "c-149"), HaveField("Name", "c-148")))
	g.Expect(agg.Clusters[0].Name).To(Equal("c-000"), "the healthy clusters listed are the first by name")
	g.Expect(agg.Clusters[MaxListedClusters-1].Name).To(Equal("c-149"), "the list is sorted by name")
	g.Expect(agg.Applied).To(BeEquivalentTo(149))
	g.Expect(agg.Available).To(BeEquivalentTo(148))

	// Below the cap every cluster is listed.
	agg = Aggregate(decided[:10], works[:10], false, nil)
	g.Expect(agg.Clusters).To(HaveLen(10))
	g.Expect(agg.Unlisted).To(BeZero())
}

// Drift reported by agents is counted and named on the Placement, with the Drifted
// condition only when the Placement reports drift; a deleted Work held on the
// member shows why.
func TestAggregateDriftAndBlockedCleanup(t *testing.T) {
	g := NewWithT(t)
	a := work("a", 1, 1, metav1.ConditionTrue)
	a.Status.Conditions = append(a.Status.Conditions, metav1.Condition{Type: lodestarworkv1alpha1.ConditionDrifted, Status: metav1.ConditionTrue, Reason: "DriftDetected", Message: "1 of 1 manifests changed: ConfigMap x at data.k", ObservedGeneration: 1})
	b := work("b", 2, 2, metav1.ConditionTrue)
	b.Status.Conditions = append(b.Status.Conditions, metav1.Condition{Type: lodestarworkv1alpha1.ConditionDrifted, Status: metav1.ConditionFalse, Reason: "NoDrift", ObservedGeneration: 2})
	c := work("c", 1, 1, metav1.ConditionTrue)
	now := metav1.Now()
	c.DeletionTimestamp = &now
	c.Status.Conditions = append(c.Status.Conditions, metav1.Condition{Type: lodestarworkv1alpha1.ConditionCleanupBlocked, Status: metav1.ConditionTrue, Reason: "WaitingForMemberDeletion", Message: "held: ConfigMap x (finalizers example.com/hold)"})

	agg := Aggregate([]string{"a", "b"}, []workv1alpha1.Work{a, b, c}, true, nil)
	g.Expect(agg.Drifted).To(BeEquivalentTo(1))
	g.Expect(agg.DriftCondition).NotTo(BeNil())
	g.Expect(agg.DriftCondition.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(agg.DriftCondition.Message).To(Equal("1 of 2 clusters report placed objects changed on the member and left so: a"))
	byName := map[string]placementv1alpha1.ClusterStatus{}
	for _, cs := range agg.Clusters {
		byName[cs.Name] = cs
	}
	g.Expect(byName["a"].Drift).To(ContainSubstring("data.k"))
	g.Expect(byName["b"].Drift).To(BeEmpty())
	g.Expect(byName["c"].Reason).To(Equal("WaitingForMemberDeletion"))
	g.Expect(byName["c"].Message).To(ContainSubstring("example.com/hold"))

	b.Status.Conditions[1].Status = metav1.ConditionTrue
	b.Generation = 3 // A report for an older generation does not count.
	agg = Aggregate([]string{"b"}, []workv1alpha1.Work{b}, true, nil)
	g.Expect(agg.Drifted).To(BeZero())
	g.Expect(agg.DriftCondition.Status).To(Equal(metav1.ConditionFalse))

	g.Expect(Aggregate([]string{"a"}, []workv1alpha1.Work{a}, false, nil).DriftCondition).To(BeNil(), "no Drifted condition without whenDrifted: Report")
}
