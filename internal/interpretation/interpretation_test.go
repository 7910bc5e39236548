package interpretation

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/division"
)

func widgets(name string, spec placementv1alpha1.ResourceInterpretationSpec) *placementv1alpha1.ResourceInterpretation {
	spec.Target = placementv1alpha1.InterpretedKind{Group: "example.com", Kind: "Widget"}
	return &placementv1alpha1.ResourceInterpretation{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "uid-" + "name", Generation: 1}, Spec: spec}
}

func TestInvalidExpressionsNameTheirFieldAndPosition(t *testing.T) {
	g := NewWithT(t)
	in := Compile(widgets("widgets", placementv1alpha1.ResourceInterpretationSpec{
		Health:    &placementv1alpha1.HealthInterpretation{Expression: "self.status.size >"},
		Replicas:  &placementv1alpha1.ReplicasInterpretation{Path: "spec/size", Requests: "{'cpu': '1'}"},
		Aggregate: &placementv1alpha1.AggregateInterpretation{Expression: "clusters.map(c, c.status)"},
	}))
	g.Expect(in.Err).To(HaveOccurred())
	msg := in.Err.Error()
	g.Expect(msg).To(ContainSubstring("spec.health.expression: ERROR: <input>:1:19"), "the CEL error with its position")
	g.Expect(msg).To(ContainSubstring("spec.replicas.path"))
	g.Expect(msg).NotTo(ContainSubstring("spec.aggregate"), "a valid expression is not named")
	var ee *ExpressionError
	g.Expect(errors.As(in.Err, &ee)).To(BeTrue())

	_, _, err := in.Replicas(map[string]any{})
	g.Expect(err).To(MatchError(ContainSubstring("spec.replicas.path")), "an invalid interpretation divides nothing")
	rule, ok := in.HealthRule()
	g.Expect(ok).To(BeTrue(), "an invalid health rule still travels: the agents report the kind's objects Degraded")
	g.Expect(rule.Source).To(Equal("ResourceInterpretation widgets"))
	h := in.Health(&unstructured.Unstructured{Object: map[string]any{}})
	g.Expect(h.Degraded).To(BeTrue())
	g.Expect(h.Reason).To(Equal(lodestarworkv1alpha1.ReasonInterpretationFailed))
}

func TestReplicasReadAndWrittenAtThePath(t *testing.T) {
	g := NewWithT(t)
	in := Compile(widgets("widgets", placementv1alpha1.ResourceInterpretationSpec{
		Replicas: &placementv1alpha1.ReplicasInterpretation{Path: "/spec/size",
			Requests: "[{'cpu': '250m'}, {'count': self.spec.gpus, 'requests': {'nvidia.com/gpu': 1, 'memory': '1Gi'}}]"},
	}))
	g.Expect(in.Err).NotTo(HaveOccurred())
	obj := map[string]any{"spec": map[string]any{"size": int64(9), "gpus": int64(2)}}
	total, requests, err := in.Replicas(obj)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(total).To(Equal(int64(9)))
	g.Expect(requests).To(HaveKey("nvidia.com/gpu"))
	gpu, mem, cpu := requests["nvidia.com/gpu"], requests["memory"], requests["cpu"]
	g.Expect(gpu.Value()).To(Equal(int64(2)))
	g.Expect(mem.String()).To(Equal("2Gi"))
	g.Expect(cpu.MilliValue()).To(Equal(int64(250)))

	in.WriteReplicas(obj, 6)
	g.Expect(obj["spec"].(map[string]any)["size"]).To(Equal(int64(6)))

	total, _, err = in.Replicas(map[string]any{"spec": map[string]any{"gpus": int64(0)}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(total).To(Equal(int64(1)), "an object without the field has one replica")

	_, _, err = in.Replicas(map[string]any{"spec": map[string]any{"size": "nine", "gpus": int64(0)}})
	g.Expect(err).To(MatchError(ContainSubstring("/spec/size is nine, not a whole number")))
	_, _, err = in.Replicas(map[string]any{"spec": map[string]any{"size": int64(1), "gpus": int64(1) << 40}})
	g.Expect(err).To(MatchError(ContainSubstring("count")), "a count beyond bounds is refused")

	// 9e18 cores has no int64 of milli-units: counted, it is refused, not
	// wrapped into a small request; alone, the division refuses it as for a
	// Deployment (TestInterpretedKindDividedByCapacity).
	absurd := Compile(widgets("widgets", placementv1alpha1.ResourceInterpretationSpec{
		Replicas: &placementv1alpha1.ReplicasInterpretation{Path: "/spec/size", Requests: "[{'count': 3, 'requests': {'cpu': '9e18'}}]"},
	}))
	_, _, err = absurd.Replicas(map[string]any{})
	g.Expect(err).To(MatchError(ContainSubstring("cpu: 9e18 is more than a division takes")))

	// A tenant's list of thousands of requests: refused past 256 entries.
	many := Compile(widgets("widgets", placementv1alpha1.ResourceInterpretationSpec{
		Replicas: &placementv1alpha1.ReplicasInterpretation{Path: "/spec/size", Requests: "self.spec.parts.map(p, {'cpu': p})"},
	}))
	parts := make([]any, MaxRequestEntries+1)
	for i := range parts {
		parts[i] = "1m"
	}
	_, _, err = many.Replicas(map[string]any{"spec": map[string]any{"parts": parts}})
	g.Expect(err).To(MatchError(ContainSubstring("257 entries, more than 256")))
}

// A tenant's object drives the expressions: an object that makes one run
// long fails that object's interpretation within the cost limit, at once.
func TestExpressionsAreBoundedByCost(t *testing.T) {
	g := NewWithT(t)
	in := Compile(widgets("widgets", placementv1alpha1.ResourceInterpretationSpec{
		Dependencies: &placementv1alpha1.DependenciesInterpretation{
			Expression: "self.spec.items.map(a, self.spec.items.map(b, self.spec.items.map(c, {'kind': 'ConfigMap', 'name': 'x'}))).flatten().flatten()"},
	}))
	g.Expect(in.Err).NotTo(HaveOccurred())
	items := make([]any, 2000)
	for i := range items {
		items[i] = int64(i)
	}
	started := time.Now()
	_, err := in.Dependencies(map[string]any{"spec": map[string]any{"items": items}})
	g.Expect(err).To(MatchError(ContainSubstring("cost limit")))
	g.Expect(err).To(MatchError(ContainSubstring("spec.dependencies.expression")))
	t.Logf("refused after %v", time.Since(started))
}

func TestDependenciesSortedWithoutRepeats(t *testing.T) {
	g := NewWithT(t)
	in := Compile(widgets("widgets", placementv1alpha1.ResourceInterpretationSpec{
		Dependencies: &placementv1alpha1.DependenciesInterpretation{
			Expression: "self.spec.configs.map(n, {'kind': 'ConfigMap', 'name': n}) + [{'group': 'example.com', 'kind': 'Gadget', 'name': self.spec.gadget}]"},
	}))
	deps, err := in.Dependencies(map[string]any{"spec": map[string]any{"configs": []any{"b", "a", "b"}, "gadget": "g"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(deps).To(Equal([]Dependency{{Kind: "ConfigMap", Name: "a"}, {Kind: "ConfigMap", Name: "b"}, {Group: "example.com", Kind: "Gadget", Name: "g"}}))

	bad := Compile(widgets("widgets", placementv1alpha1.ResourceInterpretationSpec{
		Dependencies: &placementv1alpha1.DependenciesInterpretation{Expression: "[{'kind': 'ConfigMap'}]"},
	}))
	_, err = bad.Dependencies(map[string]any{})
	g.Expect(err).To(MatchError(ContainSubstring("no kind or no name")))
}

func TestAggregateYieldsAStatus(t *testing.T) {
	g := NewWithT(t)
	in := Compile(widgets("widgets", placementv1alpha1.ResourceInterpretationSpec{
		Aggregate: &placementv1alpha1.AggregateInterpretation{Expression: "{'size': clusters.map(c, c.status.size).sum(), 'clusters': size(clusters)}"},
	}))
	st, err := in.Aggregate(map[string]any{}, []ClusterStatus{{Name: "a", Status: map[string]any{"size": int64(6)}}, {Name: "b", Status: map[string]any{"size": int64(3)}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st).To(Equal(map[string]any{"size": int64(9), "clusters": int64(2)}))

	list := Compile(widgets("widgets", placementv1alpha1.ResourceInterpretationSpec{
		Aggregate: &placementv1alpha1.AggregateInterpretation{Expression: "clusters.map(c, c.name)"},
	}))
	_, err = list.Aggregate(map[string]any{}, nil)
	g.Expect(err).To(MatchError(ContainSubstring("not a map (a status)")))

	huge := Compile(widgets("widgets", placementv1alpha1.ResourceInterpretationSpec{
		Aggregate: &placementv1alpha1.AggregateInterpretation{Expression: "{'notes': clusters.map(c, c.status.note)}"},
	}))
	var copies []ClusterStatus
	for range 10 {
		copies = append(copies, ClusterStatus{Name: "c", Status: map[string]any{"note": strings.Repeat("x", 10<<10)}})
	}
	_, err = huge.Aggregate(map[string]any{}, copies)
	g.Expect(err).To(MatchError(ContainSubstring("larger than 64 KiB")), "a status is bounded in size")
}

func TestSetUsesTheOlderOfTwoInterpretationsOfAKind(t *testing.T) {
	g := NewWithT(t)
	spec := placementv1alpha1.ResourceInterpretationSpec{Replicas: &placementv1alpha1.ReplicasInterpretation{Path: "/spec/size"}}
	older, newer := widgets("b-older", spec), widgets("a-newer", spec)
	older.UID, newer.UID = "1", "2"
	older.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	newer.CreationTimestamp = metav1.NewTime(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
	cache := &Cache{}
	set := cache.Set([]placementv1alpha1.ResourceInterpretation{*newer, *older})
	gk := schema.GroupKind{Group: "example.com", Kind: "Widget"}
	g.Expect(set.For(gk).Name).To(Equal("b-older"))
	g.Expect(set.Conflict("a-newer")).To(Equal("b-older"))
	g.Expect(set.Conflict("b-older")).To(BeEmpty())
	g.Expect(set.Replicas(gk)).NotTo(BeNil())
	g.Expect(set.Replicas(schema.GroupKind{Kind: "ConfigMap"})).To(BeNil())
	var kinds division.Kinds = set
	g.Expect(division.Divisible(gk, kinds)).To(BeTrue())
	g.Expect((*Set)(nil).For(gk)).To(BeNil())

	first := set.For(gk)
	again := cache.Set([]placementv1alpha1.ResourceInterpretation{*older})
	g.Expect(again.For(gk)).To(BeIdenticalTo(first), "compiled once per generation")
	older.Generation = 2
	g.Expect(cache.Set([]placementv1alpha1.ResourceInterpretation{*older}).For(gk)).NotTo(BeIdenticalTo(first))
}

func TestHealthRulesOfTheKindsPlaced(t *testing.T) {
	g := NewWithT(t)
	in := widgets("widgets", placementv1alpha1.ResourceInterpretationSpec{Health: &placementv1alpha1.HealthInterpretation{Expression: "'Healthy'"}})
	set := (&Cache{}).Set([]placementv1alpha1.ResourceInterpretation{*in})
	rules := set.HealthRules([]schema.GroupKind{{Kind: "ConfigMap"}, {Group: "example.com", Kind: "Widget"}})
	g.Expect(rules).To(Equal([]lodestarworkv1alpha1.HealthRule{{Group: "example.com", Kind: "Widget", Expression: "'Healthy'", Source: "ResourceInterpretation widgets"}}))
	g.Expect(set.HealthRules([]schema.GroupKind{{Kind: "ConfigMap"}})).To(BeEmpty())
	g.Expect(strings.Count(rules[0].Expression, "Healthy")).To(Equal(1))
}

// An interpreted kind is divided by capacity as a Deployment is: by the room
// each cluster has for a replica's requests, each share written at the path.
func TestInterpretedKindDividedByCapacity(t *testing.T) {
	g := NewWithT(t)
	ri := widgets("widgets", placementv1alpha1.ResourceInterpretationSpec{
		Replicas: &placementv1alpha1.ReplicasInterpretation{Path: "/spec/size", Requests: "{'cpu': self.spec.cpuPerReplica}"},
	})
	set := (&Cache{}).Set([]placementv1alpha1.ResourceInterpretation{*ri})
	raw := []byte(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"blue"},"spec":{"size":12,"cpuPerReplica":"500m"}}`)
	manifests := []runtime.RawExtension{{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`)}, {Raw: raw}}
	workloads := division.Workloads(manifests, set)
	g.Expect(workloads).To(HaveLen(1))
	g.Expect(workloads[0].Key).To(Equal("Widget/blue"))
	g.Expect(division.Workloads(manifests, nil)).To(BeEmpty(), "without the interpretation a Widget is not divided")

	free := func(cpu string) map[string]resource.Quantity {
		return map[string]resource.Quantity{"cpu": resource.MustParse(cpu)}
	}
	spec := &placementv1alpha1.ReplicaDivision{Method: placementv1alpha1.DivisionCapacity}
	a := division.Assign(spec, workloads, []division.Candidate{{Name: "a", Free: free("3")}, {Name: "b", Free: free("6")}, {Name: "c", Free: free("9")}}, "uid", nil)
	g.Expect(a.Problems).To(BeEmpty())
	for cluster, want := range map[string]int64{"a": 2, "b": 4, "c": 6} {
		out, err := division.Apply(manifests, workloads, a.Of(cluster), nil, "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(HaveLen(2))
		g.Expect(string(out[1].Raw)).To(ContainSubstring(fmt.Sprintf(`"size":%d`, want)), cluster)
		g.Expect(string(out[0].Raw)).To(Equal(string(manifests[0].Raw)), "the ConfigMap goes whole")
	}

	absurd := []runtime.RawExtension{{Raw: []byte(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"x"},"spec":{"size":3,"cpuPerReplica":"9e18"}}`)}}
	a = division.Assign(spec, division.Workloads(absurd, set), []division.Candidate{{Name: "a", Free: free("3")}}, "uid", nil)
	g.Expect(a.Problems).To(ConsistOf(HaveField("Reason", placementv1alpha1.ReasonNotDivisible)), "an extreme request is not divided, as a Deployment's")
}
