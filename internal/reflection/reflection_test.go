package reflection

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime/schema"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
)

var deployment = schema.GroupKind{Group: "apps", Kind: "Deployment"}

// report is what an agent reports for a Deployment copy: its status (observed
// at the member's generation gen) rendered from hub generation hub.
func report(status string, gen, hub int) map[string]any {
	var st map[string]any
	dec := json.NewDecoder(strings.NewReader(status))
	dec.UseNumber()
	if err := dec.Decode(&st); err != nil {
		panic(err)
	}
	return map[string]any{StatusValue: st, GenerationValue: json.Number(strconv.Itoa(gen)), HubGenerationValue: strconv.Itoa(hub)}
}

func TestDividedDeploymentIsTheSumWithTheWorstConditions(t *testing.T) {
	g := NewWithT(t)
	a := NewCopy("a", report(`{"observedGeneration":2,"replicas":3,"readyReplicas":3,"availableReplicas":3,"updatedReplicas":3,"conditions":[{"type":"Available","status":"True"}]}`, 2, 5), true, 5, 0)
	b := NewCopy("b", report(`{"observedGeneration":1,"replicas":3,"readyReplicas":1,"availableReplicas":1,"updatedReplicas":3,"conditions":[{"type":"Available","status":"False"}]}`, 1, 5), true, 5, 2)
	st, ok := Status(deployment, []Copy{a, b}, Hub{Selected: 2, Generation: 5, ObservedGeneration: 4, Replicas: 6, Divided: true})
	g.Expect(ok).To(BeTrue())
	g.Expect(st).To(HaveKeyWithValue("replicas", int64(6)))
	g.Expect(st).To(HaveKeyWithValue("readyReplicas", int64(4)))
	g.Expect(st).To(HaveKeyWithValue("availableReplicas", int64(4)))
	g.Expect(st).To(HaveKeyWithValue("updatedReplicas", int64(6)))
	g.Expect(st["conditions"]).To(ConsistOf(HaveKeyWithValue("status", "False")), "the worst cluster's conditions")
	g.Expect(st).To(HaveKeyWithValue("observedGeneration", int64(5)), "every copy runs hub generation 5 and was observed")
}

// given is a copy whose member object was given replicas (its spec.replicas).
func given(c Copy, replicas int64) Copy {
	c.Replicas = replicas
	return c
}

// A Deployment each cluster runs in full reads as the hub's own spec, so that
// kstatus, helm and kubectl rollout status compare it with the spec: the hub's
// replicas less the worst cluster's shortfall against what it was given (an
// override's 1 on staging is no shortfall), plus a surge's extra pods.
func TestDeploymentIsWhatEveryClusterHas(t *testing.T) {
	full := `{"observedGeneration":1,"replicas":%d,"readyReplicas":%d,"availableReplicas":%d,"updatedReplicas":%d,"unavailableReplicas":%d}`
	copyOf := func(cluster string, replicas, ready, updated, unavailable int) Copy {
		return NewCopy(cluster, report(fmt.Sprintf(full, replicas, ready, ready, updated, unavailable), 1, 1), true, 1, 0)
	}
	for _, tc := range []struct {
		name   string
		copies []Copy
		want   map[string]int64
	}{
		{"every cluster full", []Copy{given(copyOf("a", 2, 2, 2, 0), 2), given(copyOf("b", 2, 2, 2, 0), 2)},
			map[string]int64{"replicas": 2, "readyReplicas": 2, "availableReplicas": 2, "updatedReplicas": 2, "unavailableReplicas": 0}},
		{"an override gives staging 1, which it runs", []Copy{given(copyOf("prod", 2, 2, 2, 0), 2), given(copyOf("staging", 1, 1, 1, 0), 1)},
			map[string]int64{"replicas": 2, "readyReplicas": 2, "availableReplicas": 2, "updatedReplicas": 2}},
		{"one cluster one ready short", []Copy{given(copyOf("a", 2, 2, 2, 0), 2), given(copyOf("b", 2, 1, 2, 1), 2)},
			map[string]int64{"replicas": 2, "readyReplicas": 1, "availableReplicas": 1, "updatedReplicas": 2, "unavailableReplicas": 1}},
		{"a surge: an old pod still runs", []Copy{given(copyOf("a", 3, 2, 1, 1), 2), given(copyOf("b", 2, 2, 2, 0), 2)},
			map[string]int64{"replicas": 3, "readyReplicas": 2, "updatedReplicas": 1}},
		{"scaling up", []Copy{given(copyOf("a", 1, 1, 1, 0), 2), given(copyOf("b", 2, 2, 2, 0), 2)},
			map[string]int64{"replicas": 1, "readyReplicas": 1}},
		{"the member's spec not reported: the hub's", []Copy{copyOf("a", 2, 2, 2, 0)},
			map[string]int64{"replicas": 2, "readyReplicas": 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, ok := Status(deployment, tc.copies, Hub{Selected: len(tc.copies), Generation: 1, Replicas: 2})
			NewWithT(t).Expect(ok).To(BeTrue())
			for k, v := range tc.want {
				NewWithT(t).Expect(st).To(HaveKeyWithValue(k, v), k)
			}
		})
	}
	t.Run("a selected cluster without a copy has nothing", func(t *testing.T) {
		st, _ := Status(deployment, []Copy{given(copyOf("a", 2, 2, 2, 0), 2)}, Hub{Selected: 2, Generation: 1, Replicas: 2})
		NewWithT(t).Expect(st).To(HaveKeyWithValue("readyReplicas", int64(0)))
	})
}

func TestObservedGenerationWaitsForEveryCluster(t *testing.T) {
	current := NewCopy("a", report(`{"observedGeneration":2,"replicas":1}`, 2, 5), true, 5, 0)
	for name, other := range map[string]Copy{
		"rendered from an older hub generation":   NewCopy("b", report(`{"observedGeneration":2,"replicas":1}`, 2, 4), true, 5, 0),
		"not observed by the member's controller": NewCopy("b", report(`{"observedGeneration":1,"replicas":1}`, 2, 5), true, 5, 0),
		"not reported at the Work's generation":   NewCopy("b", report(`{"observedGeneration":2,"replicas":1}`, 2, 5), false, 5, 0),
	} {
		t.Run(name, func(t *testing.T) {
			st, _ := Status(deployment, []Copy{current, other}, Hub{Selected: 2, Generation: 5, ObservedGeneration: 4, Replicas: 1})
			NewWithT(t).Expect(st).To(HaveKeyWithValue("observedGeneration", int64(4)), "the previous one is kept")
		})
	}
	t.Run("a selected cluster without a copy", func(t *testing.T) {
		st, _ := Status(deployment, []Copy{current}, Hub{Selected: 2, Generation: 5, Replicas: 1})
		NewWithT(t).Expect(st).NotTo(HaveKey("observedGeneration"), "none before the first time all are current")
	})
}

func TestOtherKindsAreReflectedFromASingleCluster(t *testing.T) {
	g := NewWithT(t)
	pvc := schema.GroupKind{Kind: "PersistentVolumeClaim"}
	one := NewCopy("a", map[string]any{StatusValue: map[string]any{"phase": "Bound"}, GenerationValue: json.Number("1"), HubGenerationValue: "1"}, true, 1, 0)
	st, ok := Status(pvc, []Copy{one}, Hub{Selected: 1, Generation: 1})
	g.Expect(ok).To(BeTrue())
	g.Expect(st).To(HaveKeyWithValue("phase", "Bound"))
	g.Expect(st).NotTo(HaveKey("observedGeneration"), "a PVC's status has none: the hub's schema would refuse it")
	_, ok = Status(pvc, []Copy{one, one}, Hub{Selected: 2, Generation: 1})
	g.Expect(ok).To(BeFalse(), "placed on two clusters: nothing to show")

	// A kind whose status has observedGeneration gets the hub's.
	hpa := NewCopy("a", map[string]any{StatusValue: map[string]any{"observedGeneration": json.Number("3"), "currentReplicas": json.Number("2")},
		GenerationValue: json.Number("3"), HubGenerationValue: "7"}, true, 7, 0)
	st, ok = Status(schema.GroupKind{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}, []Copy{hpa}, Hub{Selected: 1, Generation: 7})
	g.Expect(ok).To(BeTrue())
	g.Expect(st).To(HaveKeyWithValue("observedGeneration", int64(7)))
}

func TestJobTimes(t *testing.T) {
	g := NewWithT(t)
	job := schema.GroupKind{Group: "batch", Kind: "Job"}
	a := NewCopy("a", report(`{"succeeded":1,"startTime":"2026-01-01T00:00:02Z","completionTime":"2026-01-01T00:01:00Z"}`, 1, 1), true, 1, 0)
	b := NewCopy("b", report(`{"active":1,"startTime":"2026-01-01T00:00:01Z"}`, 1, 1), true, 1, 2)
	st, _ := Status(job, []Copy{a, b}, Hub{Selected: 2, Generation: 1})
	g.Expect(st).To(HaveKeyWithValue("startTime", "2026-01-01T00:00:01Z"))
	g.Expect(st).NotTo(HaveKey("completionTime"), "not every copy completed")
	g.Expect(st).To(HaveKeyWithValue("succeeded", int64(1)))
	g.Expect(st).To(HaveKeyWithValue("active", int64(1)))
}

func TestRules(t *testing.T) {
	g := NewWithT(t)
	user := []lodestarworkv1alpha1.FeedbackRule{
		{Group: "apps", Kind: "Deployment", Fields: []lodestarworkv1alpha1.FeedbackField{{Name: "ready", JSONPath: ".status.readyReplicas"}}},
		{Kind: "Service", WholeStatus: true},
	}
	got := Rules(user, []schema.GroupKind{deployment, {Kind: "Service"}, {Kind: "ConfigMap"}, {Group: "batch", Kind: "Job"}})
	g.Expect(got).To(HaveLen(3), "ConfigMaps have no status")
	g.Expect(got[0].Fields).To(HaveLen(5), "the Placement's, the status, two generations, spec.replicas")
	g.Expect(got[0].Fields[0].Name).To(Equal("ready"), "the Placement's own values stay")
	g.Expect(got[1].WholeStatus).To(BeFalse())
	g.Expect(got[1].Fields[0]).To(Equal(lodestarworkv1alpha1.FeedbackField{Name: "status", JSONPath: ".status"}), "whole status stays under its name")
	g.Expect(got[2].Kind).To(Equal("Job"))
	g.Expect(user[1].WholeStatus).To(BeTrue(), "the Placement's rules are not changed")
}
