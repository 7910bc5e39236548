package scheduling

import (
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

var now = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// cluster is a cluster whose health the hub has judged good.
func cluster(name string, labels map[string]string, props map[string]string) Cluster {
	return Cluster{Name: name, Namespace: "set", Labels: labels, Properties: props, Version: "v1.36.3",
		Conditions: map[string]string{placementv1alpha1.ControlPlaneHealthyCondition: "True"}}
}

func names(cs []Cluster) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func mustPolicy(t *testing.T, spec placementv1alpha1.PlacementSpec) Policy {
	t.Helper()
	p, err := PolicyFor(spec.Scheduling, "ns/p")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func everything() *metav1.LabelSelector { return &metav1.LabelSelector{} }

func TestFilters(t *testing.T) {
	tainted := cluster("tainted", map[string]string{"env": "prod"}, nil)
	tainted.Taints = []placementv1alpha1.Taint{{Key: "maintenance", Effect: placementv1alpha1.TaintNoSchedule}}
	broken := cluster("broken-taints", map[string]string{"env": "prod"}, nil)
	broken.TaintsErr = fmt.Errorf("bad")
	sick := cluster("sick", map[string]string{"env": "prod"}, nil)
	sick.Conditions["ControlPlaneHealthy"] = "False"
	unreachable := cluster("unreachable", map[string]string{"env": "prod"}, nil)
	unreachable.Conditions["AgentReachable"] = "False"
	clusters := []Cluster{
		cluster("a", map[string]string{"env": "prod"}, map[string]string{placementv1alpha1.PropertyCPUFree: "8", placementv1alpha1.PropertyMemoryFree: "32Gi", placementv1alpha1.PropertyNodeCount: "5"}),
		cluster("b", map[string]string{"env": "prod"}, map[string]string{placementv1alpha1.PropertyCPUFree: "2", placementv1alpha1.PropertyMemoryFree: "64Gi", placementv1alpha1.PropertyNodeCount: "2"}),
		cluster("c", map[string]string{"env": "dev"}, nil),
		tainted, broken, sick, unreachable,
	}
	tests := []struct {
		name     string
		spec     placementv1alpha1.PlacementSpec
		want     []string
		excluded map[string][]string
	}{
		{"nothing selected without selector or names", placementv1alpha1.PlacementSpec{}, []string{},
			map[string][]string{placementv1alpha1.ExclusionLabelsMismatch: {"a", "b", "broken-taints", "c", "sick", "tainted", "unreachable"}}},
		{"labels, health and taints", placementv1alpha1.PlacementSpec{Scheduling: placementv1alpha1.Scheduling{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}},
			[]string{"a", "b"},
			map[string][]string{placementv1alpha1.ExclusionLabelsMismatch: {"c"}, placementv1alpha1.ExclusionTainted: {"broken-taints", "tainted"}, placementv1alpha1.ExclusionUnhealthy: {"sick", "unreachable"}}},
		{"names", placementv1alpha1.PlacementSpec{Scheduling: placementv1alpha1.Scheduling{ClusterNames: []string{"a", "c", "missing"}}}, []string{"a", "c"}, nil},
		{"names and labels", placementv1alpha1.PlacementSpec{Scheduling: placementv1alpha1.Scheduling{ClusterNames: []string{"a", "c"}, ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}},
			[]string{"a"}, nil},
		{"expression over properties", placementv1alpha1.PlacementSpec{
			Scheduling: placementv1alpha1.Scheduling{ClusterSelector: everything(), ClusterExpression: "'nodes.lodestar.dev' in cluster.properties && int(cluster.properties['nodes.lodestar.dev']) >= 3"},
		},
			[]string{"a"}, nil},
		{"expression with quantities", placementv1alpha1.PlacementSpec{
			Scheduling: placementv1alpha1.Scheduling{ClusterSelector: everything(), ClusterExpression: "has(cluster.properties.x) || quantity(cluster.properties['memory.free.lodestar.dev']).isGreaterThan(quantity('40Gi'))"},
		},
			[]string{"b"}, map[string][]string{placementv1alpha1.ExclusionExpressionError: {"c"}}},
		{"expression over labels, name and version", placementv1alpha1.PlacementSpec{
			Scheduling: placementv1alpha1.Scheduling{ClusterSelector: everything(), ClusterExpression: "cluster.labels.env == 'dev' && cluster.name.startsWith('c') && cluster.version.startsWith('v1.36')"},
		},
			[]string{"c"}, nil},
		{"capacity", placementv1alpha1.PlacementSpec{Scheduling: placementv1alpha1.Scheduling{ClusterSelector: everything(), RequiredCapacity: &placementv1alpha1.Capacity{CPU: "4", Memory: "16Gi"}}},
			[]string{"a"}, map[string][]string{placementv1alpha1.ExclusionInsufficientCapacity: {"b", "c"}}},
		{"tolerations", placementv1alpha1.PlacementSpec{
			Scheduling: placementv1alpha1.Scheduling{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}, Tolerations: []placementv1alpha1.Toleration{{Key: "maintenance", Operator: placementv1alpha1.TolerationExists}}},
		},
			[]string{"a", "b", "tainted"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			res := Schedule(clusters, nil, mustPolicy(t, tt.spec), now)
			g.Expect(names(res.Selected)).To(Equal(tt.want))
			g.Expect(res.Eligible).To(Equal(len(tt.want)))
			for reason, want := range tt.excluded {
				g.Expect(res.Excluded[reason]).To(Equal(want), reason)
			}
		})
	}
}

func TestStickinessWhenUnhealthyOrCordoned(t *testing.T) {
	g := NewWithT(t)
	a := cluster("a", nil, nil)
	a.Conditions["ControlPlaneHealthy"] = "False"
	b := cluster("b", nil, nil)
	b.Taints = []placementv1alpha1.Taint{{Key: "cordon", Effect: placementv1alpha1.TaintNoSchedule}}
	c := cluster("c", nil, nil)
	c.Taints = []placementv1alpha1.Taint{{Key: "drain", Effect: placementv1alpha1.TaintNoExecute}}
	res := Schedule([]Cluster{a, b, c}, map[string]bool{"a": true, "b": true, "c": true}, mustPolicy(t, placementv1alpha1.PlacementSpec{Scheduling: placementv1alpha1.Scheduling{ClusterSelector: everything()}}), now)
	g.Expect(names(res.Selected)).To(Equal([]string{"a", "b"}), "NoSchedule and lost health keep what is there; NoExecute does not")
	g.Expect(res.Excluded[placementv1alpha1.KeptWhileUnhealthy]).To(Equal([]string{"a"}))
	g.Expect(res.Excluded[placementv1alpha1.ExclusionTainted]).To(Equal([]string{"c"}))
}

// A cluster whose health the hub has not judged yet is not chosen anew; once it
// has been chosen, a missing report does not remove it.
func TestHealthNotReported(t *testing.T) {
	g := NewWithT(t)
	fresh := cluster("fresh", nil, nil)
	fresh.Conditions = map[string]string{}
	connecting := cluster("connecting", nil, nil)
	connecting.Conditions = map[string]string{placementv1alpha1.ControlPlaneHealthyCondition: "Unknown", placementv1alpha1.AgentReachableCondition: "Unknown"}
	spec := placementv1alpha1.PlacementSpec{Scheduling: placementv1alpha1.Scheduling{ClusterSelector: everything()}}

	res := Schedule([]Cluster{fresh, connecting}, nil, mustPolicy(t, spec), now)
	g.Expect(names(res.Selected)).To(Equal([]string{"connecting"}), "judged Unknown (agent not connected yet): may be chosen, its Works wait")
	g.Expect(res.Excluded[placementv1alpha1.ExclusionHealthNotReported]).To(Equal([]string{"fresh"}))

	res = Schedule([]Cluster{fresh}, map[string]bool{"fresh": true}, mustPolicy(t, spec), now)
	g.Expect(names(res.Selected)).To(Equal([]string{"fresh"}), "already chosen: kept")
}

func TestNoExecuteTolerationSeconds(t *testing.T) {
	g := NewWithT(t)
	c := cluster("c", nil, nil)
	c.Taints = []placementv1alpha1.Taint{{Key: "drain", Effect: placementv1alpha1.TaintNoExecute, TimeAdded: now.Add(-30 * time.Second).Format(time.RFC3339)}}
	spec := placementv1alpha1.PlacementSpec{
		Scheduling: placementv1alpha1.Scheduling{ClusterSelector: everything(), Tolerations: []placementv1alpha1.Toleration{
			{Key: "drain", Operator: placementv1alpha1.TolerationExists, Effect: placementv1alpha1.TaintNoExecute, TolerationSeconds: ptr.To[int64](60)},
		}},
	}
	res := Schedule([]Cluster{c}, map[string]bool{"c": true}, mustPolicy(t, spec), now)
	g.Expect(names(res.Selected)).To(Equal([]string{"c"}))
	g.Expect(res.RecheckAfter).To(Equal(30 * time.Second))

	res = Schedule([]Cluster{c}, nil, mustPolicy(t, spec), now)
	g.Expect(res.Selected).To(BeEmpty(), "not chosen anew only to be evicted")

	res = Schedule([]Cluster{c}, map[string]bool{"c": true}, mustPolicy(t, spec), now.Add(31*time.Second))
	g.Expect(res.Selected).To(BeEmpty())
	g.Expect(res.Excluded[placementv1alpha1.ExclusionTolerationExpired]).To(Equal([]string{"c"}))
}

func TestPickN(t *testing.T) {
	var clusters []Cluster
	for i := range 10 {
		clusters = append(clusters, cluster(fmt.Sprintf("c%d", i), map[string]string{"zone": []string{"a", "b"}[i%2]},
			map[string]string{placementv1alpha1.PropertyCPUFree: fmt.Sprint(i), "latency": fmt.Sprint(100 - i)}))
	}
	n := func(k int32) *int32 { return &k }

	t.Run("by property", func(t *testing.T) {
		g := NewWithT(t)
		spec := placementv1alpha1.PlacementSpec{
			Scheduling: placementv1alpha1.Scheduling{ClusterSelector: everything(), NumberOfClusters: n(3), Preferences: []placementv1alpha1.Preference{{Weight: 1, PropertySort: &placementv1alpha1.PropertySort{Name: placementv1alpha1.PropertyCPUFree}}}},
		}
		res := Schedule(clusters, nil, mustPolicy(t, spec), now)
		g.Expect(names(res.Selected)).To(Equal([]string{"c7", "c8", "c9"}))
		g.Expect(res.Excluded[placementv1alpha1.ExclusionNotPicked]).To(HaveLen(7))
		g.Expect(res.Unsatisfied).To(BeFalse())
	})
	t.Run("ascending and by expression", func(t *testing.T) {
		g := NewWithT(t)
		spec := placementv1alpha1.PlacementSpec{
			Scheduling: placementv1alpha1.Scheduling{ClusterSelector: everything(), NumberOfClusters: n(2), Preferences: []placementv1alpha1.Preference{
				{Weight: 10, PropertySort: &placementv1alpha1.PropertySort{Name: "latency", Order: placementv1alpha1.Descending}},
				{Weight: 100, Expression: "cluster.labels.zone == 'b'"},
			}},
		}
		res := Schedule(clusters, nil, mustPolicy(t, spec), now)
		g.Expect(names(res.Selected)).To(Equal([]string{"c1", "c3"}), "zone b first, then the highest latency")
	})
	t.Run("capacity preference", func(t *testing.T) {
		g := NewWithT(t)
		spec := placementv1alpha1.PlacementSpec{Scheduling: placementv1alpha1.Scheduling{ClusterSelector: everything(), NumberOfClusters: n(2), RequiredCapacity: &placementv1alpha1.Capacity{CPU: "1"}}}
		res := Schedule(clusters, nil, mustPolicy(t, spec), now)
		g.Expect(names(res.Selected)).To(Equal([]string{"c8", "c9"}), "more free capacity is preferred")
	})
	t.Run("deterministic tiebreak", func(t *testing.T) {
		g := NewWithT(t)
		spec := placementv1alpha1.PlacementSpec{Scheduling: placementv1alpha1.Scheduling{ClusterSelector: everything(), NumberOfClusters: n(4)}}
		first := Schedule(clusters, nil, mustPolicy(t, spec), now)
		for range 5 {
			g.Expect(Schedule(clusters, nil, mustPolicy(t, spec), now).Selected).To(Equal(first.Selected))
		}
		other, err := PolicyFor(spec.Scheduling, "ns/other")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(names(Schedule(clusters, nil, other, now).Selected)).NotTo(Equal(names(first.Selected)), "another Placement spreads elsewhere")
	})
	t.Run("sticky", func(t *testing.T) {
		g := NewWithT(t)
		spec := placementv1alpha1.PlacementSpec{
			Scheduling: placementv1alpha1.Scheduling{ClusterSelector: everything(), NumberOfClusters: n(3), Preferences: []placementv1alpha1.Preference{{Weight: 1, PropertySort: &placementv1alpha1.PropertySort{Name: placementv1alpha1.PropertyCPUFree}}}},
		}
		res := Schedule(clusters, map[string]bool{"c0": true, "c1": true}, mustPolicy(t, spec), now)
		g.Expect(names(res.Selected)).To(Equal([]string{"c0", "c1", "c9"}), "chosen clusters stay while eligible")
	})
	t.Run("unsatisfiable", func(t *testing.T) {
		g := NewWithT(t)
		spec := placementv1alpha1.PlacementSpec{Scheduling: placementv1alpha1.Scheduling{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "a"}}, NumberOfClusters: n(8)}}
		res := Schedule(clusters, nil, mustPolicy(t, spec), now)
		g.Expect(res.Selected).To(HaveLen(5))
		g.Expect(res.Unsatisfied).To(BeTrue())
	})
	t.Run("prefer no schedule", func(t *testing.T) {
		g := NewWithT(t)
		avoid := append([]Cluster(nil), clusters...)
		for i := range avoid {
			if i != 4 {
				avoid[i].Taints = []placementv1alpha1.Taint{{Key: "spot", Effect: placementv1alpha1.TaintPreferNoSchedule}}
			}
		}
		spec := placementv1alpha1.PlacementSpec{Scheduling: placementv1alpha1.Scheduling{ClusterSelector: everything(), NumberOfClusters: n(1)}}
		g.Expect(names(Schedule(avoid, nil, mustPolicy(t, spec), now).Selected)).To(Equal([]string{"c4"}))
	})
}

func TestTopologySpread(t *testing.T) {
	g := NewWithT(t)
	var clusters []Cluster
	zones := []string{"a", "a", "a", "a", "a", "a", "b", "b", "c"}
	for i, z := range zones {
		clusters = append(clusters, cluster(fmt.Sprintf("c%d", i), map[string]string{"zone": z}, map[string]string{"region": z + "-r"}))
	}
	clusters = append(clusters, cluster("nozone", nil, nil))
	count := func(cs []Cluster, key string) map[string]int {
		out := map[string]int{}
		for _, c := range cs {
			d, _ := domain(c, key)
			out[d]++
		}
		return out
	}
	spec := placementv1alpha1.PlacementSpec{
		Scheduling: placementv1alpha1.Scheduling{ClusterSelector: everything(), NumberOfClusters: ptr.To[int32](6), TopologySpread: &placementv1alpha1.TopologySpread{TopologyKey: "zone", MaxSkew: 1}},
	}
	res := Schedule(clusters, nil, mustPolicy(t, spec), now)
	g.Expect(count(res.Selected, "zone")).To(Equal(map[string]int{"a": 2, "b": 2, "c": 1}), "zone c has one cluster only, which bounds the others")
	g.Expect(res.Unsatisfied).To(BeTrue())
	g.Expect(res.Excluded[placementv1alpha1.ExclusionMissingTopologyKey]).To(Equal([]string{"nozone"}))
	g.Expect(res.Excluded[placementv1alpha1.ExclusionTopologySkew]).To(HaveLen(4))

	spec.Scheduling.TopologySpread.MaxSkew = 3
	spec.Scheduling.TopologySpread.TopologyKey = "property:region"
	res = Schedule(clusters, nil, mustPolicy(t, spec), now)
	g.Expect(res.Selected).To(HaveLen(6))
	g.Expect(count(res.Selected, "property:region")).To(Equal(map[string]int{"a-r": 3, "b-r": 2, "c-r": 1}))
}

func TestPolicyErrors(t *testing.T) {
	for name, spec := range map[string]placementv1alpha1.Scheduling{
		placementv1alpha1.ReasonInvalidClusterSelector:   {ClusterSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}},
		placementv1alpha1.ReasonInvalidClusterExpression: {ClusterExpression: "cluster.("},
		placementv1alpha1.ReasonInvalidPreference:        {Preferences: []placementv1alpha1.Preference{{Weight: 1, Expression: "))"}}},
		placementv1alpha1.ReasonInvalidCapacity:          {RequiredCapacity: &placementv1alpha1.Capacity{CPU: "lots"}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := PolicyFor(spec, "s")
			var invalid *InvalidPolicyError
			g.Expect(errors.As(err, &invalid)).To(BeTrue(), "%v", err)
			g.Expect(invalid.Reason).To(Equal(name))
		})
	}
}

func TestParseTaints(t *testing.T) {
	g := NewWithT(t)
	taints, err := ParseTaints(`[{"key":"lodestar.dev/cordon","effect":"NoSchedule"},{"key":"drain","value":"yes","effect":"NoExecute","timeAdded":"2026-11-01T12:00:00Z"}]`)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(taints).To(HaveLen(2))
	none, err := ParseTaints("")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(none).To(BeEmpty())
	for _, bad := range []string{`{`, `[{"key":"a b","effect":"NoSchedule"}]`, `[{"key":"a","effect":"Sometimes"}]`,
		`[{"key":"a","value":"-x-","effect":"NoSchedule"}]`, `[{"key":"a","effect":"NoExecute","timeAdded":"yesterday"}]`} {
		_, err := ParseTaints(bad)
		g.Expect(err).To(HaveOccurred(), bad)
	}
}

func TestSlices(t *testing.T) {
	mk := func(n int) []Cluster { return make([]Cluster, n) }
	tests := []struct {
		n, size int
		want    []int
	}{
		{0, 100, nil},
		{1, 100, []int{1}},
		{100, 100, []int{100}},
		{101, 100, []int{100, 1}},
		{250, 100, []int{100, 100, 50}},
	}
	for _, tt := range tests {
		g := NewWithT(t)
		var got []int
		for _, s := range Slices(mk(tt.n), tt.size) {
			got = append(got, len(s))
		}
		g.Expect(got).To(Equal(tt.want), "n=%d", tt.n)
	}
}

// A filter change does not drop a chosen cluster at once: an expression that
// cannot be evaluated (a property vanished) keeps it, and free capacity is checked
// only when a cluster is chosen, so a workload never evicts itself.
func TestChosenClustersSurviveFilterFlaps(t *testing.T) {
	g := NewWithT(t)
	expr := mustPolicy(t, placementv1alpha1.PlacementSpec{
		Scheduling: placementv1alpha1.Scheduling{ClusterSelector: everything(), ClusterExpression: "int(cluster.properties['nodes.lodestar.dev']) > 1"},
	})
	a := cluster("a", nil, nil) // nodes property gone
	b := cluster("b", nil, nil)
	res := Schedule([]Cluster{a, b}, map[string]bool{"a": true}, expr, now)
	g.Expect(names(res.Selected)).To(Equal([]string{"a"}), "a chosen cluster stays while its expression errs")
	g.Expect(res.Excluded[placementv1alpha1.KeptWhileExpressionFails]).To(Equal([]string{"a"}))
	g.Expect(res.Excluded[placementv1alpha1.ExclusionExpressionError]).To(Equal([]string{"b"}), "a cluster not chosen is not chosen on an error")
	a.Properties = map[string]string{"nodes.lodestar.dev": "1"}
	res = Schedule([]Cluster{a}, map[string]bool{"a": true}, expr, now)
	g.Expect(res.Selected).To(BeEmpty(), "a false result deselects it (its Work leaves make-before-break, in the work generator)")
	g.Expect(res.Excluded[placementv1alpha1.ExclusionExpressionFalse]).To(Equal([]string{"a"}))

	// 4 CPUs were free, 2 are required, a 3-CPU workload was placed: 1 is free now.
	capacity := mustPolicy(t, placementv1alpha1.PlacementSpec{
		Scheduling: placementv1alpha1.Scheduling{ClusterSelector: everything(), RequiredCapacity: &placementv1alpha1.Capacity{CPU: "2"}},
	})
	busy := cluster("busy", nil, map[string]string{placementv1alpha1.PropertyCPUFree: "1"})
	res = Schedule([]Cluster{busy}, map[string]bool{"busy": true}, capacity, now)
	g.Expect(names(res.Selected)).To(Equal([]string{"busy"}), "the workload does not evict itself")
	res = Schedule([]Cluster{busy}, nil, capacity, now)
	g.Expect(res.Excluded[placementv1alpha1.ExclusionInsufficientCapacity]).To(Equal([]string{"busy"}), "not chosen anew without the capacity")
}

// A wildcard toleration tolerates any taint but Lodestar's own: a tenant cannot
// keep its workload on a cluster the platform drains or cordons.
func TestWildcardTolerationSparesLodestarTaints(t *testing.T) {
	g := NewWithT(t)
	drained := cluster("drained", nil, nil)
	drained.Taints = []placementv1alpha1.Taint{{Key: placementv1alpha1.DrainTaintKey, Effect: placementv1alpha1.TaintNoExecute}}
	gpu := cluster("gpu", nil, nil)
	gpu.Taints = []placementv1alpha1.Taint{{Key: "gpu", Effect: placementv1alpha1.TaintNoExecute}}
	current := map[string]bool{"drained": true, "gpu": true}
	wildcard := mustPolicy(t, placementv1alpha1.PlacementSpec{
		Scheduling: placementv1alpha1.Scheduling{ClusterSelector: everything(), Tolerations: []placementv1alpha1.Toleration{{Operator: placementv1alpha1.TolerationExists}}},
	})
	res := Schedule([]Cluster{drained, gpu}, current, wildcard, now)
	g.Expect(names(res.Selected)).To(Equal([]string{"gpu"}))
	g.Expect(res.Excluded[placementv1alpha1.ExclusionTainted]).To(Equal([]string{"drained"}))

	named := mustPolicy(t, placementv1alpha1.PlacementSpec{
		Scheduling: placementv1alpha1.Scheduling{ClusterSelector: everything(), Tolerations: []placementv1alpha1.Toleration{{Key: placementv1alpha1.DrainTaintKey, Operator: placementv1alpha1.TolerationExists}}},
	})
	res = Schedule([]Cluster{drained}, current, named, now)
	g.Expect(names(res.Selected)).To(Equal([]string{"drained"}), "a toleration that names the key is the platform's choice")
}
