package division

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

var deployment = schema.GroupKind{Group: "apps", Kind: "Deployment"}

func targets(a *Assignment, key string) map[string]int64 {
	out := map[string]int64{}
	for name, shares := range a.Shares {
		out[name] = shares[key].Target
	}
	return out
}

func free(cpu string) map[string]resource.Quantity {
	return map[string]resource.Quantity{"cpu": resource.MustParse(cpu), "memory": resource.MustParse("1Ti")}
}

func placed(kv ...any) *Shares {
	s := &Shares{Workloads: map[string]Share{}}
	for i := 0; i+1 < len(kv); i += 2 {
		n := int64(kv[i+1].(int))
		s.Workloads[kv[i].(string)] = Share{Replicas: n, Target: n}
	}
	return s
}

func TestAssignWeights(t *testing.T) {
	g := NewWithT(t)
	spec := &placementv1alpha1.ReplicaDivision{Method: placementv1alpha1.DivisionWeighted, Weights: []placementv1alpha1.ReplicaWeight{
		{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "big"}}, Weight: ptr.To[int32](2)},
		{ClusterNames: []string{"a"}, Weight: ptr.To[int32](1)},
		{ClusterNames: []string{"b"}, Weight: ptr.To[int32](1), Max: ptr.To[int32](3)}, // b is big too: the higher weight rule wins
	}}
	w := Workload{Key: "Deployment/web", Kind: deployment, Total: 9}
	cands := []Candidate{{Name: "a"}, {Name: "b", Labels: map[string]string{"tier": "big"}}, {Name: "c"}}
	a := Assign(spec, []Workload{w}, cands, "uid", nil)
	g.Expect(a.Problems).To(BeEmpty())
	g.Expect(targets(a, w.Key)).To(Equal(map[string]int64{"a": 3, "b": 6, "c": 0}))
	g.Expect(a.Shares["b"][w.Key].Reason).To(Equal("weight 2 of 3"))

	// No chosen cluster has a weight: all weigh the same.
	a = Assign(spec, []Workload{w}, []Candidate{{Name: "x"}, {Name: "y"}, {Name: "z"}}, "uid", nil)
	g.Expect(targets(a, w.Key)).To(Equal(map[string]int64{"x": 3, "y": 3, "z": 3}))

	// Even, with a maximum that leaves replicas nowhere to go.
	even := &placementv1alpha1.ReplicaDivision{Method: placementv1alpha1.DivisionEven, Weights: []placementv1alpha1.ReplicaWeight{{Max: ptr.To[int32](2)}}}
	a = Assign(even, []Workload{w}, cands, "uid", nil)
	g.Expect(a.Problems).To(HaveLen(1))
	g.Expect(a.Problems[0].Reason).To(Equal(placementv1alpha1.ReasonNotEnoughCapacity))
	g.Expect(a.Problems[0].Message).To(ContainSubstring("a 2, b 2, c 2"))
}

func TestAssignCapacity(t *testing.T) {
	g := NewWithT(t)
	spec := &placementv1alpha1.ReplicaDivision{Method: placementv1alpha1.DivisionCapacity}
	w := Workload{Key: "Deployment/web", Kind: deployment, Total: 12, Requests: map[string]resource.Quantity{"cpu": resource.MustParse("500m")}}
	cands := []Candidate{{Name: "a", Free: free("3")}, {Name: "b", Free: free("6")}, {Name: "c", Free: free("9")}}
	a := Assign(spec, []Workload{w}, cands, "uid", nil)
	g.Expect(a.Problems).To(BeEmpty())
	g.Expect(targets(a, w.Key)).To(Equal(map[string]int64{"a": 2, "b": 4, "c": 6}))
	g.Expect(a.Shares["a"][w.Key].Reason).To(Equal("room for 6 more pods"))

	// Not enough room: a Problem naming each cluster's room, and the shares
	// placed stay.
	big := w
	big.Total = 40
	cands = []Candidate{{Name: "a", Free: free("3"), Prev: placed(w.Key, 2)}, {Name: "b", Free: free("6"), Prev: placed(w.Key, 4)}, {Name: "c", Free: free("1")}}
	a = Assign(spec, []Workload{big}, cands, "uid", nil)
	g.Expect(a.Problems).To(ConsistOf(HaveField("Reason", placementv1alpha1.ReasonNotEnoughCapacity)))
	g.Expect(a.Problems[0].Message).To(ContainSubstring("a 6, b 12, c 2"))
	g.Expect(targets(a, w.Key)).To(Equal(map[string]int64{"a": 2, "b": 4, "c": 0}))
}

// The research's case 7: steady scale-down by the shares placed, steady
// scale-up by the room of each cluster, and a rebalance only when asked.
func TestAssignSteady(t *testing.T) {
	g := NewWithT(t)
	spec := &placementv1alpha1.ReplicaDivision{Method: placementv1alpha1.DivisionCapacity}
	w := Workload{Key: "Deployment/web", Kind: deployment, Total: 6, Requests: map[string]resource.Quantity{"cpu": resource.MustParse("1")}}
	cands := []Candidate{{Name: "a", Free: free("100"), Prev: placed(w.Key, 6)}, {Name: "b", Free: free("1"), Prev: placed(w.Key, 3)}}
	a := Assign(spec, []Workload{w}, cands, "uid", nil)
	g.Expect(targets(a, w.Key)).To(Equal(map[string]int64{"a": 4, "b": 2}))

	w.Total = 12
	cands = []Candidate{{Name: "a", Free: free("3"), Prev: placed(w.Key, 3)}, {Name: "b", Free: free("10"), Prev: placed(w.Key, 6)}}
	a = Assign(spec, []Workload{w}, cands, "uid", nil)
	g.Expect(targets(a, w.Key)).To(Equal(map[string]int64{"a": 4, "b": 8}))

	// A cluster added gets nothing until a rebalance; its reason says what a
	// rebalance would do.
	w.Total = 9
	cands = []Candidate{{Name: "a", Free: free("0"), Prev: placed(w.Key, 3)}, {Name: "b", Free: free("0"), Prev: placed(w.Key, 6)}, {Name: "c", Free: free("9")}}
	a = Assign(spec, []Workload{w}, cands, "uid", nil)
	g.Expect(targets(a, w.Key)).To(Equal(map[string]int64{"a": 3, "b": 6, "c": 0}))
	g.Expect(a.Shares["c"][w.Key].Reason).To(ContainSubstring("a rebalance would make it"))
	spec.Rebalance = "2026-11-26"
	a = Assign(spec, []Workload{w}, cands, "uid", nil)
	g.Expect(targets(a, w.Key)).To(Equal(map[string]int64{"a": 2, "b": 3, "c": 4}))
	g.Expect(a.Of("c").Rebalance).To(Equal("2026-11-26"))
}

func TestAssignJobs(t *testing.T) {
	g := NewWithT(t)
	spec := &placementv1alpha1.ReplicaDivision{Method: placementv1alpha1.DivisionWeighted, Weights: []placementv1alpha1.ReplicaWeight{
		{ClusterNames: []string{"west"}, Weight: ptr.To[int32](6)}, {ClusterNames: []string{"east"}, Weight: ptr.To[int32](4)},
	}}
	job, ok := WorkloadOf([]byte(`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"crunch"},"spec":{"completions":10,"parallelism":4}}`), nil)
	g.Expect(ok).To(BeTrue())
	queue, _ := WorkloadOf([]byte(`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"queue"},"spec":{"parallelism":4}}`), nil)
	g.Expect(queue.Invalid).To(ContainSubstring("without spec.completions"))
	cands := []Candidate{{Name: "west"}, {Name: "east"}}
	a := Assign(spec, []Workload{job, queue}, cands, "uid", nil)
	g.Expect(a.Shares["west"]["Job/crunch"]).To(And(HaveField("Replicas", int64(6)), HaveField("Parallelism", int64(2))))
	g.Expect(a.Shares["east"]["Job/crunch"]).To(And(HaveField("Replicas", int64(4)), HaveField("Parallelism", int64(2))))
	g.Expect(a.Problems).To(ConsistOf(And(HaveField("Key", "Job/queue"), HaveField("Reason", placementv1alpha1.ReasonNotDivisible))))
	g.Expect(targets(a, "Job/queue")).To(Equal(map[string]int64{"west": 0, "east": 0}))

	raw, err := Write([]byte(`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"crunch"},"spec":{"completions":10,"parallelism":4}}`), a.Shares["west"]["Job/crunch"])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(raw)).To(ContainSubstring(`"completions":6`))
	g.Expect(string(raw)).To(ContainSubstring(`"parallelism":2`))

	// Placed, a Job keeps its shares whatever the weights say now.
	spec.Weights[0].Weight = ptr.To[int32](1)
	cands = []Candidate{{Name: "west", Prev: placed("Job/crunch", 6)}, {Name: "east", Prev: placed("Job/crunch", 4)}}
	a = Assign(spec, []Workload{job}, cands, "uid", nil)
	g.Expect(targets(a, "Job/crunch")).To(Equal(map[string]int64{"west": 6, "east": 4}))
}

// Surge first: a lowered share waits at what the cluster carries until the
// caller says the increases are in, and StatefulSets are numbered across the
// clusters from what each carries.
func TestSurge(t *testing.T) {
	g := NewWithT(t)
	spec := &placementv1alpha1.ReplicaDivision{Method: placementv1alpha1.DivisionEven}
	sts := Workload{Key: "StatefulSet/web", Kind: schema.GroupKind{Group: "apps", Kind: "StatefulSet"}, Total: 6}
	cands := []Candidate{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	carried := map[string]map[string]int64{"a": {sts.Key: 3}, "b": {sts.Key: 3}}

	a := Assign(spec, []Workload{sts}, cands, "uid", nil)
	g.Expect(a.Reached("c", carried["c"])).To(BeFalse())
	a.Surge(carried, false, nil)
	g.Expect(a.Shares["a"][sts.Key]).To(And(HaveField("Replicas", int64(3)), HaveField("Target", int64(2)), HaveField("Start", int64(0))))
	g.Expect(a.Shares["b"][sts.Key]).To(And(HaveField("Replicas", int64(3)), HaveField("Start", int64(3))))
	g.Expect(a.Shares["c"][sts.Key]).To(And(HaveField("Replicas", int64(2)), HaveField("Start", int64(6))))
	g.Expect(a.Shares["a"][sts.Key].Reason).To(ContainSubstring("keeps 3 until the increases elsewhere are Available"))

	a = Assign(spec, []Workload{sts}, cands, "uid", nil)
	a.Surge(carried, true, nil)
	g.Expect(a.Shares["a"][sts.Key]).To(And(HaveField("Replicas", int64(2)), HaveField("Start", int64(0))))
	g.Expect(a.Shares["b"][sts.Key]).To(And(HaveField("Replicas", int64(2)), HaveField("Start", int64(2))))
	g.Expect(a.Shares["c"][sts.Key]).To(And(HaveField("Replicas", int64(2)), HaveField("Start", int64(4))))

	raw, err := Write([]byte(`{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"web"},"spec":{"replicas":6}}`), a.Shares["c"][sts.Key])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(raw)).To(ContainSubstring(`"ordinals":{"start":4}`))
	g.Expect(string(raw)).To(ContainSubstring(`"replicas":2`))

	enc := a.Of("c").Encode()
	back, ok := ParseShares(enc)
	g.Expect(ok).To(BeTrue())
	g.Expect(back.Workloads[sts.Key].Replicas).To(Equal(int64(2)))
}

func TestValidateAndHash(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Validate(nil)).To(Succeed())
	bad := &placementv1alpha1.ReplicaDivision{Weights: []placementv1alpha1.ReplicaWeight{{ClusterSelector: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Near"}}}}}}
	g.Expect(Validate(bad)).To(MatchError(ContainSubstring("weights[0].clusterSelector")))

	g.Expect(Hash("base", nil)).To(Equal("base"), "a Placement that does not divide keeps its revisions' hashes")
	even := &placementv1alpha1.ReplicaDivision{Method: placementv1alpha1.DivisionEven}
	capacity := &placementv1alpha1.ReplicaDivision{Method: placementv1alpha1.DivisionCapacity, Rebalance: "1"}
	g.Expect(Hash("base", even)).NotTo(Equal(Hash("base", capacity)))
	again := capacity.DeepCopy()
	again.Rebalance = "2"
	g.Expect(Hash("base", capacity)).NotTo(Equal(Hash("base", again)), "a rebalance is a new revision")
}

// A StatefulSet's clusters keep the ordinals they run while their ranges do
// not run into each other's; a cluster new to it starts after the highest;
// a share held by its claims is never lowered.
func TestOrdinalsStayAndClaimsHold(t *testing.T) {
	g := NewWithT(t)
	sts := Workload{Key: "StatefulSet/db", Kind: schema.GroupKind{Group: "apps", Kind: "StatefulSet"}, Total: 6}
	prev := func(replicas, start int64) *Shares {
		return &Shares{Workloads: map[string]Share{sts.Key: {Replicas: replicas, Target: replicas, Start: start}}}
	}
	weights := func(a, b, c int32) *placementv1alpha1.ReplicaDivision {
		return &placementv1alpha1.ReplicaDivision{Method: placementv1alpha1.DivisionWeighted, Weights: []placementv1alpha1.ReplicaWeight{
			{ClusterNames: []string{"a"}, Weight: ptr.To(a)}, {ClusterNames: []string{"b"}, Weight: ptr.To(b)}, {ClusterNames: []string{"c"}, Weight: ptr.To(c)}}}
	}
	// 3/3 on a (0..2) and b (3..5) become 2/4: a keeps 0, b keeps 3 (3..6).
	cands := []Candidate{{Name: "a", Prev: prev(3, 0)}, {Name: "b", Prev: prev(3, 3)}, {Name: "c"}}
	carried := map[string]map[string]int64{"a": {sts.Key: 3}, "b": {sts.Key: 3}}
	a := Assign(weights(1, 2, 0), []Workload{sts}, cands, "uid", nil)
	a.Surge(carried, true, nil)
	g.Expect(a.Shares["a"][sts.Key]).To(And(HaveField("Replicas", int64(2)), HaveField("Start", int64(0))))
	g.Expect(a.Shares["b"][sts.Key]).To(And(HaveField("Replicas", int64(4)), HaveField("Start", int64(3))))

	// c joins: it starts after the highest range. Then a grows into b's
	// range: the cluster that keeps fewer pods starts anew.
	a = Assign(weights(2, 1, 1), []Workload{sts}, cands, "uid", nil)
	a.Surge(carried, true, nil)
	g.Expect(a.Shares["a"][sts.Key]).To(And(HaveField("Replicas", int64(3)), HaveField("Start", int64(0))))
	g.Expect(a.Shares["b"][sts.Key]).To(And(HaveField("Replicas", int64(2)), HaveField("Start", int64(3))))
	g.Expect(a.Shares["c"][sts.Key]).To(And(HaveField("Replicas", int64(1)), HaveField("Start", int64(5))))
	a = Assign(weights(5, 1, 0), []Workload{sts}, cands, "uid", nil)
	a.Surge(carried, true, nil)
	// a keeps its 3 pods' names (0..4); b, keeping 1, starts after it.
	g.Expect(a.Shares["a"][sts.Key]).To(And(HaveField("Replicas", int64(5)), HaveField("Start", int64(0))))
	g.Expect(a.Shares["b"][sts.Key]).To(And(HaveField("Replicas", int64(1)), HaveField("Start", int64(5))))

	// Held by its claims, b's share is not lowered, settled or not.
	a = Assign(weights(5, 1, 0), []Workload{sts}, cands, "uid", nil)
	a.Surge(carried, true, func(cluster, key string) string {
		if cluster == "b" {
			return "StatefulSet shop/db on b has 3 bound ReadWriteOnce claims"
		}
		return ""
	})
	g.Expect(a.Shares["b"][sts.Key]).To(And(HaveField("Replicas", int64(3)), HaveField("Target", int64(1))))
	g.Expect(a.Shares["b"][sts.Key].Reason).To(ContainSubstring("keeps 3: StatefulSet shop/db on b has 3 bound ReadWriteOnce claims (spec.strategy.stateful: Hold)"))
}
