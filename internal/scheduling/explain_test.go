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

// TestExplainAgreesWithTheScheduler checks every filter's verdict on clusters
// that fail in different ways, and that the first failing verdict is always
// the reason the scheduler itself gives.
func TestExplainAgreesWithTheScheduler(t *testing.T) {
	g := NewWithT(t)
	small := cluster("small", map[string]string{"env": "prod"}, map[string]string{placementv1alpha1.PropertyCPUFree: "500m", placementv1alpha1.PropertyMemoryFree: "64Gi"})
	big := cluster("big", map[string]string{"env": "prod", "tier": "gold"}, map[string]string{placementv1alpha1.PropertyCPUFree: "8", placementv1alpha1.PropertyMemoryFree: "64Gi"})
	dev := cluster("dev", map[string]string{"env": "dev"}, map[string]string{placementv1alpha1.PropertyCPUFree: "8"})
	tainted := cluster("tainted", map[string]string{"env": "prod", "tier": "gold"}, map[string]string{placementv1alpha1.PropertyCPUFree: "8", placementv1alpha1.PropertyMemoryFree: "1Gi"})
	tainted.Taints = []placementv1alpha1.Taint{
		{Key: "gpu", Value: "true", Effect: placementv1alpha1.TaintNoSchedule},
		{Key: "maintenance", Effect: placementv1alpha1.TaintNoSchedule},
	}
	sick := cluster("sick", map[string]string{"env": "prod"}, nil)
	sick.Conditions[placementv1alpha1.ControlPlaneHealthyCondition] = "False"
	unreported := cluster("unreported", map[string]string{"env": "prod"}, nil)
	unreported.Conditions = map[string]string{}
	broken := cluster("broken", map[string]string{"env": "prod"}, nil)
	broken.TaintsErr = errors.New("not JSON")
	noTier := cluster("no-tier", map[string]string{"env": "prod"}, map[string]string{placementv1alpha1.PropertyCPUFree: "8", placementv1alpha1.PropertyMemoryFree: "64Gi"})

	p := mustPolicy(t, placementv1alpha1.PlacementSpec{
		Scheduling: placementv1alpha1.Scheduling{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}, ClusterExpression: "cluster.labels['tier'] == 'gold'", RequiredCapacity: &placementv1alpha1.Capacity{CPU: "2", Memory: "2Gi"}, Tolerations: []placementv1alpha1.Toleration{{Key: "gpu", Operator: placementv1alpha1.TolerationEqual, Value: "true"}}},
	})
	for _, c := range []Cluster{small, big, dev, tainted, sick, unreported, broken, noTier} {
		for _, current := range []bool{false, true} {
			e := Explain(c, current, p, now)
			_, reason, _ := filter(c, current, p, now)
			g.Expect(e.Reason).To(Equal(reason), c.Name)
			first, failed := e.FirstFailure()
			g.Expect(failed).To(Equal(reason != ""), "%s current=%v: %+v", c.Name, current, e)
			g.Expect(first.Reason).To(Equal(reason), "%s current=%v", c.Name, current)
		}
	}

	detail := func(e Explanation, filter string) []string {
		var out []string
		for _, v := range e.Verdicts {
			if v.Filter == filter {
				out = append(out, v.Detail)
			}
		}
		return out
	}
	e := Explain(small, false, p, now)
	g.Expect(e.Reason).To(Equal(placementv1alpha1.ExclusionExpressionError))
	g.Expect(detail(e, FilterCPU)).To(ConsistOf("cpu free 500m < 2 asked"))
	g.Expect(detail(e, FilterMemory)).To(ConsistOf("memory free 64Gi >= 2Gi asked"))
	g.Expect(detail(e, FilterExpression)[0]).To(ContainSubstring("no such key: tier"))

	e = Explain(tainted, false, p, now)
	g.Expect(e.Reason).To(Equal(placementv1alpha1.ExclusionTainted))
	g.Expect(detail(e, FilterTaint)).To(Equal([]string{"gpu=true:NoSchedule tolerated", "maintenance:NoSchedule not tolerated"}))
	g.Expect(detail(e, FilterExpression)).To(ConsistOf("cluster.labels['tier'] == 'gold' = true"))
	g.Expect(detail(e, FilterMemory)).To(ConsistOf("memory free 1Gi < 2Gi asked"), "every filter is judged, not only up to the first failure")
	// Chosen before: a NoSchedule taint keeps it.
	g.Expect(Explain(tainted, true, p, now).Reason).To(BeEmpty())

	e = Explain(dev, false, p, now)
	g.Expect(e.Reason).To(Equal(placementv1alpha1.ExclusionLabelsMismatch))
	g.Expect(detail(e, FilterLabels)).To(ConsistOf(`selector "env=prod" against labels "env=dev"`))
	g.Expect(detail(e, FilterMemory)).To(ConsistOf("memory free unknown (property memory.free.lodestar.dev), 2Gi asked"))

	g.Expect(Explain(big, false, p, now).Reason).To(BeEmpty())
	g.Expect(Explain(sick, false, p, now).Reason).To(Equal(placementv1alpha1.ExclusionUnhealthy))
	g.Expect(detail(Explain(sick, false, p, now), FilterHealth)).To(ConsistOf("ControlPlaneHealthy=False, AgentReachable=<none>"))
	g.Expect(Explain(unreported, false, p, now).Reason).To(Equal(placementv1alpha1.ExclusionHealthNotReported))
	g.Expect(detail(Explain(broken, false, p, now), FilterTaint)[0]).To(ContainSubstring("cannot be read: not JSON"))

	named := mustPolicy(t, placementv1alpha1.PlacementSpec{Scheduling: placementv1alpha1.Scheduling{ClusterNames: []string{"big", "dev"}}})
	g.Expect(Explain(small, false, named, now).Reason).To(Equal(placementv1alpha1.ExclusionNotInClusterNames))
	g.Expect(Explain(small, false, named, now).Verdicts[0].Detail).To(Equal("clusterNames: big, dev"))
	nothing := mustPolicy(t, placementv1alpha1.PlacementSpec{})
	g.Expect(detail(Explain(big, false, nothing, now), FilterLabels)[0]).To(HavePrefix(`selector "<nothing>"`))
	p.Exclude = map[string]bool{"big": true}
	g.Expect(Explain(big, true, p, now).Reason).To(Equal(placementv1alpha1.ExclusionFailedOver))
}

// The Placement's status explains the first excluded clusters by name, each with
// only the filters that excluded it; clusters clusterNames leaves out are no
// candidates and are not explained.
func TestExplainExcluded(t *testing.T) {
	g := NewWithT(t)
	var clusters []Cluster
	for i := range 30 {
		env := "dev"
		if i%3 == 0 {
			env = "prod"
		}
		clusters = append(clusters, cluster(fmt.Sprintf("c-%02d", i), map[string]string{"env": env}, nil))
	}
	never := cluster("a-new", map[string]string{"env": "prod"}, nil)
	never.NeverConnected = true
	clusters = append(clusters, never)
	p := mustPolicy(t, placementv1alpha1.PlacementSpec{
		Scheduling: placementv1alpha1.Scheduling{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}},
	})
	res := Schedule(clusters, nil, p, now)
	got := ExplainExcluded(clusters, nil, p, res, now, 5)
	g.Expect(got).To(HaveLen(5))
	g.Expect(got[0].Name).To(Equal("a-new"))
	g.Expect(got[0].Reason).To(Equal(placementv1alpha1.ExclusionHealthNotReported))
	g.Expect(got[0].Verdicts).To(ConsistOf(HaveField("Filter", FilterHealth)))
	g.Expect(got[1].Name).To(Equal("c-01"))
	g.Expect(got[1].Verdicts).To(ConsistOf(And(HaveField("Filter", FilterLabels), HaveField("Reason", placementv1alpha1.ExclusionLabelsMismatch),
		HaveField("Detail", `selector "env=prod" against labels "env=dev"`))))
	g.Expect(got[4].Name).To(Equal("c-05"))

	named := mustPolicy(t, placementv1alpha1.PlacementSpec{Scheduling: placementv1alpha1.Scheduling{ClusterNames: []string{"c-00"}}})
	g.Expect(ExplainExcluded(clusters, nil, named, Schedule(clusters, nil, named, now), now, 5)).To(BeEmpty())
}

// requiredStorageClasses keeps out, with the classes named, a cluster that
// lacks one or does not report its classes; a cluster chosen before stays.
func TestExplainStorageClasses(t *testing.T) {
	g := NewWithT(t)
	fast := cluster("fast", nil, map[string]string{placementv1alpha1.PropertyStorageClasses: "fast,standard"})
	slow := cluster("slow", nil, map[string]string{placementv1alpha1.PropertyStorageClasses: "standard"})
	silent := cluster("silent", nil, nil)
	p := mustPolicy(t, placementv1alpha1.PlacementSpec{Scheduling: placementv1alpha1.Scheduling{
		ClusterSelector: &metav1.LabelSelector{}, RequiredStorageClasses: []string{"fast"}}})
	verdict := func(c Cluster, current bool) Verdict {
		e := Explain(c, current, p, now)
		_, reason, _ := filter(c, current, p, now)
		g.Expect(e.Reason).To(Equal(reason), c.Name)
		for _, v := range e.Verdicts {
			if v.Filter == FilterStorage {
				return v
			}
		}
		t.Fatalf("no storage verdict for %s", c.Name)
		return Verdict{}
	}
	g.Expect(verdict(fast, false)).To(And(HaveField("Passed", true), HaveField("Detail", "storage classes fast required, the cluster has fast,standard")))
	g.Expect(verdict(slow, false)).To(And(HaveField("Passed", false), HaveField("Reason", placementv1alpha1.ExclusionMissingStorageClass),
		HaveField("Detail", "the cluster lacks storage class fast (it has standard)")))
	g.Expect(verdict(silent, false)).To(And(HaveField("Passed", false), HaveField("Detail", ContainSubstring("the cluster reports none"))))
	g.Expect(verdict(slow, true)).To(And(HaveField("Passed", true), HaveField("Detail", ContainSubstring("not checked for a cluster chosen before"))))
}

// Each filter is written once, in the chain both Schedule and Explain run:
// its name appears once, and whenever its check keeps a cluster out, its own
// verdicts say so with the same reason.
func TestEachFilterIsOneStepOfOneChain(t *testing.T) {
	g := NewWithT(t)
	seen := map[string]bool{}
	for _, f := range chain {
		g.Expect(seen[f.name]).To(BeFalse(), "filter %s twice", f.name)
		seen[f.name] = true
	}
	g.Expect(seen).To(HaveLen(10))
	poor := cluster("poor", map[string]string{"env": "prod"}, map[string]string{placementv1alpha1.PropertyCPUFree: "1", placementv1alpha1.PropertyMemoryFree: "1Gi",
		placementv1alpha1.PropertyStorageClasses: "standard"})
	poor.Taints = []placementv1alpha1.Taint{{Key: "maintenance", Effect: placementv1alpha1.TaintNoSchedule}}
	sick := cluster("sick", map[string]string{"env": "dev"}, nil)
	sick.Conditions[placementv1alpha1.AgentReachableCondition] = "False"
	p := mustPolicy(t, placementv1alpha1.PlacementSpec{Scheduling: placementv1alpha1.Scheduling{
		ClusterNames: []string{"poor", "other"}, ClusterExpression: "cluster.labels['tier'] == 'gold'",
		RequiredCapacity:       &placementv1alpha1.Capacity{CPU: "2", Memory: "2Gi", Resources: []placementv1alpha1.ResourceAmount{{Name: "nvidia.com/gpu", Quantity: "4", OnOneNode: true}}},
		RequiredStorageClasses: []string{"replicated"},
		ClusterSelector:        &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
	}})
	p.Exclude = map[string]bool{"sick": true}
	kept := 0
	for _, c := range []Cluster{poor, sick} {
		j := &judged{c: c, p: p, now: now}
		for _, f := range chain {
			o := f.check(j)
			if o.reason == "" {
				continue
			}
			kept++
			g.Expect(f.explain(j, o)).To(ContainElement(And(HaveField("Filter", f.name), HaveField("Passed", false), HaveField("Reason", o.reason))), "%s on %s", f.name, c.Name)
		}
	}
	g.Expect(kept).To(BeNumerically(">=", 10), "every filter keeps one of them out")
}

// Extended resources: over the cluster, or on one node; a cluster that
// reports none has none.
func TestExtendedResources(t *testing.T) {
	g := NewWithT(t)
	now := metav1.Now().Time
	spread := cluster("spread", nil, map[string]string{"nvidia.com/gpu.free.lodestar.dev": "8", "nvidia.com/gpu.largestfree.lodestar.dev": "2"})
	dense := cluster("dense", nil, map[string]string{"nvidia.com/gpu.free.lodestar.dev": "4", "nvidia.com/gpu.largestfree.lodestar.dev": "4"})
	none := cluster("none", nil, map[string]string{placementv1alpha1.PropertyCPUFree: "64"})
	pass := func(ask placementv1alpha1.ResourceAmount) []string {
		p := mustPolicy(t, placementv1alpha1.PlacementSpec{Scheduling: placementv1alpha1.Scheduling{ClusterSelector: &metav1.LabelSelector{},
			RequiredCapacity: &placementv1alpha1.Capacity{Resources: []placementv1alpha1.ResourceAmount{ask}}}})
		var out []string
		for _, c := range []Cluster{spread, dense, none} {
			if _, reason, _ := filter(c, false, p, now); reason == "" {
				out = append(out, c.Name)
			}
		}
		return out
	}
	g.Expect(pass(placementv1alpha1.ResourceAmount{Name: "nvidia.com/gpu", Quantity: "4"})).To(ConsistOf("spread", "dense"))
	g.Expect(pass(placementv1alpha1.ResourceAmount{Name: "nvidia.com/gpu", Quantity: "4", OnOneNode: true})).To(ConsistOf("dense"))
	g.Expect(pass(placementv1alpha1.ResourceAmount{Name: "nvidia.com/gpu", Quantity: "5"})).To(ConsistOf("spread"))
	g.Expect(pass(placementv1alpha1.ResourceAmount{Name: "amd.com/gpu", Quantity: "1"})).To(BeEmpty())
	g.Expect(pass(placementv1alpha1.ResourceAmount{Name: "nvidia.com/gpu", Quantity: "1e18", OnOneNode: true})).To(BeEmpty(), "an absurd ask excludes every cluster, nothing else")
	g.Expect(pass(placementv1alpha1.ResourceAmount{Name: "nvidia.com/gpu", Quantity: "0"})).To(ConsistOf("spread", "dense"), "nothing asked: only a cluster that reports none fails")

	p := mustPolicy(t, placementv1alpha1.PlacementSpec{Scheduling: placementv1alpha1.Scheduling{ClusterSelector: &metav1.LabelSelector{},
		RequiredCapacity: &placementv1alpha1.Capacity{Resources: []placementv1alpha1.ResourceAmount{{Name: "nvidia.com/gpu", Quantity: "4", OnOneNode: true}}}}})
	e := Explain(spread, false, p, now)
	g.Expect(e.Verdicts).To(ContainElement(And(HaveField("Filter", FilterResources), HaveField("Passed", false),
		HaveField("Detail", "nvidia.com/gpu on one node free 2 < 4 asked"))))

	_, err := PolicyFor(placementv1alpha1.Scheduling{ClusterSelector: &metav1.LabelSelector{},
		RequiredCapacity: &placementv1alpha1.Capacity{Resources: []placementv1alpha1.ResourceAmount{{Name: "nvidia.com/gpu", Quantity: "lots"}}}}, "seed")
	g.Expect(err).To(MatchError(ContainSubstring("spec.scheduling.requiredCapacity.resources[0].quantity")))
}

// A quantity with a huge exponent (1e20000000: 23 s of CPU to compare before
// quantities were bounded) is refused in a Placement stored before the CRD
// refused it, and a cluster that reports one has no such capacity.
func TestQuantitiesOutOfBounds(t *testing.T) {
	g := NewWithT(t)
	_, err := PolicyFor(placementv1alpha1.Scheduling{ClusterSelector: &metav1.LabelSelector{},
		RequiredCapacity: &placementv1alpha1.Capacity{CPU: "1e20000000"}}, "seed")
	g.Expect(err).To(MatchError(ContainSubstring(`spec.scheduling.requiredCapacity.cpu: quantity "1e20000000" is out of bounds`)))

	p, err := PolicyFor(placementv1alpha1.Scheduling{ClusterSelector: &metav1.LabelSelector{},
		RequiredCapacity: &placementv1alpha1.Capacity{CPU: "2"}}, "seed")
	g.Expect(err).NotTo(HaveOccurred())
	res := Schedule([]Cluster{cluster("huge", nil, map[string]string{placementv1alpha1.PropertyCPUFree: "1e999999999"})}, nil, p, metav1.Now().Time)
	g.Expect(res.Selected).To(BeEmpty())
	g.Expect(res.Excluded).To(HaveKeyWithValue(placementv1alpha1.ExclusionInsufficientCapacity, ConsistOf("huge")))
}

// A tenant's Placement tolerates the drain taint for at most ten minutes,
// even when its toleration says for good; a ClusterPlacement's carrier (a
// platform admin's) tolerates it as it says.
func TestTenantsTolerateTheDrainForTenMinutesAtMost(t *testing.T) {
	g := NewWithT(t)
	now := metav1.Now().Time
	drained := cluster("drained", nil, nil)
	drained.Taints = []placementv1alpha1.Taint{{Key: placementv1alpha1.DrainTaintKey, Effect: placementv1alpha1.TaintNoExecute,
		TimeAdded: now.Add(-11 * time.Minute).UTC().Format(time.RFC3339)}}
	spec := placementv1alpha1.Scheduling{ClusterSelector: &metav1.LabelSelector{},
		Tolerations: []placementv1alpha1.Toleration{{Key: placementv1alpha1.DrainTaintKey, Operator: placementv1alpha1.TolerationExists}}}
	for ns, kept := range map[string]bool{"shop": false, placementv1alpha1.ClusterPlacementNamespace: true} {
		p, err := PolicyOf(&placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}, Spec: placementv1alpha1.PlacementSpec{Scheduling: spec}})
		g.Expect(err).NotTo(HaveOccurred())
		res := Schedule([]Cluster{drained}, map[string]bool{"drained": true}, p, now)
		if kept {
			g.Expect(res.Selected).To(HaveLen(1), ns)
			continue
		}
		g.Expect(res.Selected).To(BeEmpty(), ns)
		g.Expect(res.Excluded).To(HaveKeyWithValue(placementv1alpha1.ExclusionTolerationExpired, ConsistOf("drained")))
	}
}

// A forced drain ends a tenant's toleration of it at its forceAt, however long
// the toleration, and says so; a ClusterPlacement's carrier keeps tolerating
// it; before forceAt the tenant keeps the cluster and looks again then.
func TestForcedDrainEndsTenantTolerations(t *testing.T) {
	g := NewWithT(t)
	now := metav1.Now().Time
	drainedAt := func(forceAt time.Time) Cluster {
		c := cluster("drained", nil, nil)
		c.Taints = []placementv1alpha1.Taint{{Key: placementv1alpha1.DrainTaintKey, Effect: placementv1alpha1.TaintNoExecute,
			TimeAdded: now.Add(-time.Minute).UTC().Format(time.RFC3339), ForceAt: forceAt.UTC().Format(time.RFC3339)}}
		return c
	}
	spec := placementv1alpha1.Scheduling{ClusterSelector: &metav1.LabelSelector{},
		Tolerations: []placementv1alpha1.Toleration{{Key: placementv1alpha1.DrainTaintKey, Operator: placementv1alpha1.TolerationExists, TolerationSeconds: ptr.To(int64(300))}}}
	policy := func(ns string) Policy {
		p, err := PolicyOf(&placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}, Spec: placementv1alpha1.PlacementSpec{Scheduling: spec}})
		g.Expect(err).NotTo(HaveOccurred())
		return p
	}
	current := map[string]bool{"drained": true}

	res := Schedule([]Cluster{drainedAt(now.Add(-time.Second))}, current, policy("shop"), now)
	g.Expect(res.Selected).To(BeEmpty(), "forced: the tenant's 300 s are cut short")
	g.Expect(res.Excluded).To(HaveKeyWithValue(placementv1alpha1.ExclusionTolerationExpired, ConsistOf("drained")))
	verdicts := Explain(drainedAt(now.Add(-time.Second)), true, policy("shop"), now)
	g.Expect(fmt.Sprint(verdicts)).To(ContainSubstring("tolerated until the drain overruled tenants (forceAt"))

	res = Schedule([]Cluster{drainedAt(now.Add(-time.Second))}, current, policy(placementv1alpha1.ClusterPlacementNamespace), now)
	g.Expect(res.Selected).To(HaveLen(1), "the platform's own are not overruled")

	res = Schedule([]Cluster{drainedAt(now.Add(time.Minute))}, current, policy("shop"), now)
	g.Expect(res.Selected).To(HaveLen(1), "not forced yet")
	g.Expect(res.RecheckAfter).To(BeNumerically("<=", time.Minute))

	_, err := CheckTaints([]placementv1alpha1.Taint{{Key: "maintenance", Effect: placementv1alpha1.TaintNoExecute, ForceAt: now.Format(time.RFC3339)}})
	g.Expect(err).To(MatchError(ContainSubstring("forceAt is for the drain taint")))
	_, err = CheckTaints([]placementv1alpha1.Taint{{Key: placementv1alpha1.DrainTaintKey, Effect: placementv1alpha1.TaintNoExecute, ForceAt: "soon"}})
	g.Expect(err).To(MatchError(ContainSubstring(`forceAt "soon" is not RFC 3339`)))
}
