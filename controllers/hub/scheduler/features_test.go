package scheduler_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/hub/scheduler"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// fleet is a cluster set of its own and a tenant namespace bound to it.
type fleet struct {
	set, tenant string
}

func newFleet(t *testing.T) fleet {
	t.Helper()
	g := NewWithT(t)
	i := int(nextSet.Add(1)) - 1
	g.Expect(i).To(BeNumerically("<", len(fleetSets)), "more fleets than the scheduler manages cluster sets for")
	f := fleet{set: fleetSets[i], tenant: "tenant-" + rand.String(6)}
	g.Expect(hubCP.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.set}})).To(Succeed())
	g.Expect(hubCP.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.tenant}})).To(Succeed())
	bind(t, f.tenant, f.set)
	return f
}

// profile is a ClusterProfile to add; without conditions it is reported healthy.
type profile struct {
	labels     map[string]string
	properties map[string]string
	conditions map[string]metav1.ConditionStatus
	taints     []placementv1alpha1.Taint
}

func (f fleet) add(t *testing.T, name string, p profile) {
	t.Helper()
	g := NewWithT(t)
	cp := &cpv1alpha1.ClusterProfile{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.set, Labels: p.labels, Annotations: map[string]string{}},
		Spec:       cpv1alpha1.ClusterProfileSpec{ClusterManager: cpv1alpha1.ClusterManager{Name: scheduler.ClusterManagerName}},
	}
	if p.taints != nil {
		b, err := json.Marshal(p.taints)
		g.Expect(err).NotTo(HaveOccurred())
		cp.Annotations[placementv1alpha1.TaintsAnnotation] = string(b)
	}
	g.Expect(hubCP.Client.Create(t.Context(), cp)).To(Succeed())
	if p.conditions == nil {
		// As the cluster health controller reports a cluster whose agent is there.
		p.conditions = map[string]metav1.ConditionStatus{placementv1alpha1.ControlPlaneHealthyCondition: metav1.ConditionTrue}
	}
	for k, v := range p.properties {
		cp.Status.Properties = append(cp.Status.Properties, cpv1alpha1.Property{Name: k, Value: v, LastObservedTime: metav1.Now()})
	}
	for k, v := range p.conditions {
		cp.Status.Conditions = append(cp.Status.Conditions, metav1.Condition{Type: k, Status: v, Reason: "Test", LastTransitionTime: metav1.Now()})
	}
	g.Expect(hubCP.Client.Status().Update(t.Context(), cp)).To(Succeed())
}

func (f fleet) placement(t *testing.T, mutate func(*placementv1alpha1.PlacementSpec)) *placementv1alpha1.Placement {
	t.Helper()
	p := placement(f.tenant, &metav1.LabelSelector{})
	p.Name = "p-" + rand.String(5)
	mutate(&p.Spec)
	NewWithT(t).Expect(hubCP.Client.Create(t.Context(), p)).To(Succeed())
	return p
}

// decided returns the clusters p's decisions name.
func decided(g Gomega, t *testing.T, p *placementv1alpha1.Placement) []string {
	list := &cpv1alpha1.PlacementDecisionList{}
	g.Expect(hubCP.Client.List(t.Context(), list, client.InNamespace(p.Namespace), client.MatchingLabels{cpv1alpha1.PlacementKeyLabel: p.Name})).To(Succeed())
	out := []string{}
	for _, pd := range list.Items {
		for _, d := range pd.Decisions {
			out = append(out, d.ClusterProfileRef.Name)
		}
	}
	return out
}

func scheduled(g Gomega, t *testing.T, p *placementv1alpha1.Placement) (*metav1.Condition, *placementv1alpha1.Placement) {
	got := &placementv1alpha1.Placement{}
	g.Expect(hubCP.Client.Get(t.Context(), client.ObjectKeyFromObject(p), got)).To(Succeed())
	c := meta.FindStatusCondition(got.Status.Conditions, placementv1alpha1.ScheduledCondition)
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.ObservedGeneration).To(Equal(got.Generation))
	return c, got
}

func TestPropertiesNamesAndCapacity(t *testing.T) {
	f := newFleet(t)
	f.add(t, "big", profile{labels: map[string]string{"env": "prod"}, properties: map[string]string{
		placementv1alpha1.PropertyNodeCount: "10", placementv1alpha1.PropertyCPUFree: "64", placementv1alpha1.PropertyMemoryFree: "256Gi"}})
	f.add(t, "small", profile{labels: map[string]string{"env": "prod"}, properties: map[string]string{
		placementv1alpha1.PropertyNodeCount: "2", placementv1alpha1.PropertyCPUFree: "2", placementv1alpha1.PropertyMemoryFree: "4Gi"}})
	f.add(t, "dev", profile{labels: map[string]string{"env": "dev"}})

	byExpression := f.placement(t, func(s *placementv1alpha1.PlacementSpec) {
		s.Scheduling.ClusterExpression = "cluster.labels.env == 'prod' && int(cluster.properties['nodes.lodestar.dev']) >= 3"
	})
	byNames := f.placement(t, func(s *placementv1alpha1.PlacementSpec) {
		s.Scheduling.ClusterSelector = nil
		s.Scheduling.ClusterNames = []string{"small", "dev", "elsewhere"}
	})
	byCapacity := f.placement(t, func(s *placementv1alpha1.PlacementSpec) {
		s.Scheduling.RequiredCapacity = &placementv1alpha1.Capacity{CPU: "4", Memory: "8Gi"}
	})
	for p, want := range map[*placementv1alpha1.Placement][]string{byExpression: {"big"}, byNames: {"dev", "small"}, byCapacity: {"big"}} {
		NewWithT(t).Eventually(func(g Gomega) {
			g.Expect(decided(g, t, p)).To(ConsistOf(want))
		}).Should(Succeed(), p.Name)
	}
	// Clusters it does not name are not counted: its status does not change with
	// the fleet's size.
	NewWithT(t).Eventually(func(g Gomega) {
		_, got := scheduled(g, t, byNames)
		g.Expect(got.Status.Scheduling).NotTo(BeNil())
		g.Expect(got.Status.Scheduling.Eligible).To(HaveValue(BeEquivalentTo(2)))
		g.Expect(got.Status.Scheduling.Excluded).NotTo(ContainElement(HaveField("Reason", placementv1alpha1.ExclusionNotInClusterNames)))
	}).Should(Succeed())
	NewWithT(t).Eventually(func(g Gomega) {
		_, got := scheduled(g, t, byCapacity)
		g.Expect(got.Status.Scheduling.Eligible).To(HaveValue(BeEquivalentTo(1)))
		g.Expect(got.Status.Scheduling.Excluded).To(ContainElement(And(
			HaveField("Reason", placementv1alpha1.ExclusionInsufficientCapacity), HaveField("Count", BeEquivalentTo(2)),
			HaveField("Clusters", ConsistOf("dev", "small")))))
	}).Should(Succeed())
}

func TestHealthAndTaints(t *testing.T) {
	f := newFleet(t)
	f.add(t, "healthy", profile{})
	f.add(t, "sick", profile{conditions: map[string]metav1.ConditionStatus{cpv1alpha1.ClusterConditionControlPlaneHealthy: metav1.ConditionFalse}})
	f.add(t, "cordoned", profile{taints: []placementv1alpha1.Taint{{Key: "lodestar.dev/cordon", Effect: placementv1alpha1.TaintNoSchedule}}})
	f.add(t, "gpu", profile{taints: []placementv1alpha1.Taint{{Key: "gpu", Value: "true", Effect: placementv1alpha1.TaintNoSchedule}}})

	plain := f.placement(t, func(*placementv1alpha1.PlacementSpec) {})
	tolerant := f.placement(t, func(s *placementv1alpha1.PlacementSpec) {
		s.Scheduling.Tolerations = []placementv1alpha1.Toleration{{Key: "gpu", Value: "true"}}
	})
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		g.Expect(decided(g, t, plain)).To(ConsistOf("healthy"))
		g.Expect(decided(g, t, tolerant)).To(ConsistOf("healthy", "gpu"))
		_, got := scheduled(g, t, plain)
		g.Expect(got.Status.Scheduling.Excluded).To(ContainElements(
			And(HaveField("Reason", placementv1alpha1.ExclusionUnhealthy), HaveField("Clusters", ConsistOf("sick"))),
			And(HaveField("Reason", placementv1alpha1.ExclusionTainted), HaveField("Clusters", ConsistOf("cordoned", "gpu"))),
		))
	}).Should(Succeed())

	// Draining (NoExecute) moves the tolerant Placement off gpu (after a cordon,
	// NoSchedule, it would have stayed). Its Work stays until the cluster kept
	// reports the objects Available: the work generator's gate sees to that, not
	// the decisions.
	b, _ := json.Marshal([]placementv1alpha1.Taint{
		{Key: "gpu", Value: "true", Effect: placementv1alpha1.TaintNoSchedule},
		{Key: "lodestar.dev/drain", Effect: placementv1alpha1.TaintNoExecute, TimeAdded: time.Now().UTC().Format(time.RFC3339)},
	})
	update(t, &cpv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Namespace: f.set, Name: "gpu"}}, func(cp *cpv1alpha1.ClusterProfile) {
		cp.Annotations[placementv1alpha1.TaintsAnnotation] = string(b)
	})
	g.Eventually(func(g Gomega) {
		g.Expect(decided(g, t, tolerant)).To(ConsistOf("healthy"))
		_, got := scheduled(g, t, tolerant)
		g.Expect(got.Status.Scheduling.Excluded).To(ContainElement(
			And(HaveField("Reason", placementv1alpha1.ExclusionTainted), HaveField("Clusters", ContainElement("gpu")))))
	}).Should(Succeed())
}

// availableWork writes, as an agent would report it, the Placement's Work on
// cluster with every object Available.
func availableWork(t *testing.T, p *placementv1alpha1.Placement, cluster string) {
	t.Helper()
	g := NewWithT(t)
	ns := names.ClusterNamespace(cluster)
	if err := hubCP.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	w := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: names.Work(p.Namespace, p.Name), Namespace: ns, Labels: lookup.WorkLabels(p)}}
	g.Expect(hubCP.Client.Create(t.Context(), w)).To(Succeed())
	w.Status.Conditions = []metav1.Condition{{Type: lodestarworkv1alpha1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: "Available",
		ObservedGeneration: w.Generation, LastTransitionTime: metav1.Now()}}
	g.Expect(hubCP.Client.Status().Update(t.Context(), w)).To(Succeed())
}

// A NoExecute taint tolerated for a while: the Placement stays until the time is
// up, then leaves.
func TestNoExecuteTolerationExpires(t *testing.T) {
	const tolerated = 10 * time.Second
	f := newFleet(t)
	f.add(t, "a", profile{})
	p := f.placement(t, func(s *placementv1alpha1.PlacementSpec) {
		s.Scheduling.Tolerations = []placementv1alpha1.Toleration{{Key: "drain", Operator: placementv1alpha1.TolerationExists,
			Effect: placementv1alpha1.TaintNoExecute, TolerationSeconds: ptr.To(int64(tolerated / time.Second))}}
	})
	g := NewWithT(t)
	g.Eventually(func(g Gomega) { g.Expect(decided(g, t, p)).To(ConsistOf("a")) }).Should(Succeed())
	// The taint's time is written to the second: the toleration ends no earlier
	// than added + tolerated, and the decision must hold at least until then.
	added := time.Now().UTC().Truncate(time.Second)
	b, _ := json.Marshal([]placementv1alpha1.Taint{{Key: "drain", Effect: placementv1alpha1.TaintNoExecute, TimeAdded: added.Format(time.RFC3339)}})
	update(t, &cpv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Namespace: f.set, Name: "a"}}, func(cp *cpv1alpha1.ClusterProfile) {
		cp.Annotations = map[string]string{placementv1alpha1.TaintsAnnotation: string(b)}
	})
	// While the toleration lasts (checked only up to a second before its end, so
	// that the check never races the expiry), the cluster stays chosen.
	if hold := time.Until(added.Add(tolerated)) - time.Second; hold > 0 {
		g.Consistently(func(g Gomega) { g.Expect(decided(g, t, p)).To(ConsistOf("a")) }).WithTimeout(hold).Should(Succeed())
	}
	g.Eventually(func(g Gomega) {
		g.Expect(decided(g, t, p)).To(BeEmpty())
		_, got := scheduled(g, t, p)
		g.Expect(got.Status.Scheduling.Excluded).To(ContainElement(HaveField("Reason", placementv1alpha1.ExclusionTolerationExpired)))
	}).Should(Succeed())
	g.Expect(time.Now()).To(BeTemporally(">=", added.Add(tolerated)), "not before the toleration ended")
}

// Placements see only the cluster sets their namespace's ClusterSetBindings
// name; a binding removed takes its set's clusters away, and a namespace with no
// binding gets none, with a reason.
func TestClusterSets(t *testing.T) {
	g := NewWithT(t)
	f := newFleet(t)
	f.add(t, "mine", profile{})
	other := newFleet(t)
	other.add(t, "theirs", profile{})
	p := f.placement(t, func(*placementv1alpha1.PlacementSpec) {})
	g.Eventually(func(g Gomega) { g.Expect(decided(g, t, p)).To(ConsistOf("mine")) }).Should(Succeed())

	// A cluster-set admin binds the other set too, then takes it away again.
	b := bind(t, f.tenant, other.set)
	g.Eventually(func(g Gomega) { g.Expect(decided(g, t, p)).To(ConsistOf("mine", "theirs")) }).Should(Succeed())
	g.Expect(hubCP.Client.Delete(t.Context(), b)).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(decided(g, t, p)).To(ConsistOf("mine")) }).Should(Succeed())

	// Without any binding, no cluster, and the condition says why.
	g.Expect(hubCP.Client.Delete(t.Context(), &placementv1alpha1.ClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Name: f.set, Namespace: f.tenant}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(decided(g, t, p)).To(BeEmpty())
		c, _ := scheduled(g, t, p)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonNoClusterSetBinding))
		g.Expect(c.Message).To(ContainSubstring("namespace " + f.tenant + " has no ClusterSetBinding"))
	}).Should(Succeed())
}

// Fewer eligible clusters than asked for: the ones there are are chosen, and the
// Placement says so with a reason and a Warning event.
func TestNotEnoughClusters(t *testing.T) {
	g := NewWithT(t)
	f := newFleet(t)
	f.add(t, "a", profile{})
	f.add(t, "b", profile{labels: map[string]string{"tier": "gold"}})
	p := f.placement(t, func(s *placementv1alpha1.PlacementSpec) { s.Scheduling.NumberOfClusters = ptr.To[int32](3) })
	g.Eventually(func(g Gomega) {
		c, got := scheduled(g, t, p)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonNotEnoughClusters))
		g.Expect(c.Message).To(ContainSubstring("2 of the 3 clusters"))
		g.Expect(got.Status.SelectedClusters).To(HaveValue(BeEquivalentTo(2)))
		g.Expect(decided(g, t, p)).To(ConsistOf("a", "b"))
		events := &eventsv1.EventList{}
		g.Expect(hubCP.Client.List(t.Context(), events, client.InNamespace(f.tenant))).To(Succeed())
		g.Expect(events.Items).To(ContainElement(HaveField("Reason", placementv1alpha1.ReasonNotEnoughClusters)))
	}).Should(Succeed())
}

// Malformed CEL is a False condition with a reason and an event.
func TestInvalidExpression(t *testing.T) {
	g := NewWithT(t)
	f := newFleet(t)
	p := f.placement(t, func(s *placementv1alpha1.PlacementSpec) { s.Scheduling.ClusterExpression = "cluster.labels[" })
	g.Eventually(func(g Gomega) {
		c, _ := scheduled(g, t, p)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonInvalidClusterExpression))
		events := &eventsv1.EventList{}
		g.Expect(hubCP.Client.List(t.Context(), events, client.InNamespace(f.tenant))).To(Succeed())
		g.Expect(events.Items).To(ContainElement(HaveField("Reason", placementv1alpha1.ReasonInvalidClusterExpression)))
	}).Should(Succeed())
}

// A Placement for another scheduler gets no decisions and no status from ours.
func TestExternalScheduler(t *testing.T) {
	g := NewWithT(t)
	f := newFleet(t)
	f.add(t, "a", profile{})
	p := f.placement(t, func(s *placementv1alpha1.PlacementSpec) { s.Scheduling.SchedulerName = "acme" })
	mine := f.placement(t, func(*placementv1alpha1.PlacementSpec) {})
	g.Eventually(func(g Gomega) { g.Expect(decided(g, t, mine)).NotTo(BeEmpty()) }).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(decided(g, t, p)).To(BeEmpty())
		got := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(t.Context(), client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(meta.FindStatusCondition(got.Status.Conditions, placementv1alpha1.ScheduledCondition)).To(BeNil())
	}).Should(Succeed())
}

// The API server refuses contradictory or malformed scheduling fields.
func TestSchedulingValidation(t *testing.T) {
	f := newFleet(t)
	tests := map[string]struct {
		mutate  func(*placementv1alpha1.PlacementSpec)
		message string
	}{
		"preferences without a number": {func(s *placementv1alpha1.PlacementSpec) {
			s.Scheduling.Preferences = []placementv1alpha1.Preference{{Weight: 1, Expression: "1"}}
		}, "preferences need numberOfClusters"},
		"spread without a number": {func(s *placementv1alpha1.PlacementSpec) {
			s.Scheduling.TopologySpread = &placementv1alpha1.TopologySpread{TopologyKey: "zone"}
		}, "topologySpread needs numberOfClusters"},
		"more than named": {func(s *placementv1alpha1.PlacementSpec) {
			s.Scheduling.ClusterNames, s.Scheduling.NumberOfClusters = []string{"a"}, ptr.To[int32](2)
		}, "numberOfClusters cannot exceed"},
		"bad quantity": {func(s *placementv1alpha1.PlacementSpec) {
			s.Scheduling.RequiredCapacity = &placementv1alpha1.Capacity{Memory: "lots"}
		}, "memory must be a quantity"},
		"exists with a value": {func(s *placementv1alpha1.PlacementSpec) {
			s.Scheduling.Tolerations = []placementv1alpha1.Toleration{{Key: "k", Operator: placementv1alpha1.TolerationExists, Value: "v"}}
		}, "operator Exists takes no value"},
		"seconds without NoExecute": {func(s *placementv1alpha1.PlacementSpec) {
			s.Scheduling.Tolerations = []placementv1alpha1.Toleration{{Key: "k", Value: "v", TolerationSeconds: ptr.To[int64](5)}}
		}, "tolerationSeconds applies to effect NoExecute only"},
		"preference with both": {func(s *placementv1alpha1.PlacementSpec) {
			s.Scheduling.NumberOfClusters = ptr.To[int32](1)
			s.Scheduling.Preferences = []placementv1alpha1.Preference{{Weight: 1, Expression: "1", PropertySort: &placementv1alpha1.PropertySort{Name: "x"}}}
		}, "exactly one of expression and propertySort"},
		"weight out of range": {func(s *placementv1alpha1.PlacementSpec) {
			s.Scheduling.NumberOfClusters = ptr.To[int32](1)
			s.Scheduling.Preferences = []placementv1alpha1.Preference{{Weight: 101, Expression: "1"}}
		}, "spec.scheduling.preferences[0].weight"},
		"zero skew": {func(s *placementv1alpha1.PlacementSpec) {
			s.Scheduling.NumberOfClusters = ptr.To[int32](1)
			s.Scheduling.TopologySpread = &placementv1alpha1.TopologySpread{TopologyKey: "zone", MaxSkew: -1}
		}, "spec.scheduling.topologySpread.maxSkew"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			p := placement(f.tenant, &metav1.LabelSelector{})
			tt.mutate(&p.Spec)
			err := hubCP.Client.Create(t.Context(), p)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			g.Expect(err.Error()).To(ContainSubstring(tt.message))
		})
	}
	t.Run("schedulerName is immutable", func(t *testing.T) {
		g := NewWithT(t)
		p := placement(f.tenant, &metav1.LabelSelector{})
		p.Name = "immutable"
		g.Expect(hubCP.Client.Create(t.Context(), p)).To(Succeed())
		g.Expect(p.Spec.Scheduling.SchedulerName).To(Equal(placementv1alpha1.DefaultSchedulerName), "defaulted")
		// The scheduler writes the status meanwhile: retry a stale update.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := hubCP.Client.Get(t.Context(), client.ObjectKeyFromObject(p), p); err != nil {
				return err
			}
			p.Spec.Scheduling.SchedulerName = "acme"
			return hubCP.Client.Update(t.Context(), p)
		})
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		g.Expect(err.Error()).To(ContainSubstring("schedulerName is immutable"))
	})
}

// 500 clusters over five zones: a Placement picks 100 spread evenly, in slices of at
// most 100, and its choice does not churn when unrelated clusters come, go or change.
func TestFiveHundredClusters(t *testing.T) {
	g := NewWithT(t)
	f := newFleet(t)
	zones := []string{"z1", "z2", "z3", "z4", "z5"}
	for i := range 500 {
		f.add(t, fmt.Sprintf("c%03d", i), profile{labels: map[string]string{"zone": zones[i%5], "fleet": "main"}})
	}
	p := f.placement(t, func(s *placementv1alpha1.PlacementSpec) {
		s.Scheduling.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"fleet": "main"}}
		s.Scheduling.NumberOfClusters = ptr.To[int32](100)
		s.Scheduling.TopologySpread = &placementv1alpha1.TopologySpread{TopologyKey: "zone", MaxSkew: 1}
	})
	var first []string
	g.Eventually(func(g Gomega) {
		first = decided(g, t, p)
		g.Expect(first).To(HaveLen(100))
		c, got := scheduled(g, t, p)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(got.Status.Scheduling.Eligible).To(HaveValue(BeEquivalentTo(500)))
	}).WithTimeout(2 * time.Minute).Should(Succeed())
	perZone := map[string]int{}
	for _, c := range first {
		var i int
		_, _ = fmt.Sscanf(c, "c%03d", &i)
		perZone[zones[i%5]]++
	}
	g.Expect(perZone).To(Equal(map[string]int{"z1": 20, "z2": 20, "z3": 20, "z4": 20, "z5": 20}))
	g.Expect(slices(g, t, p)).To(Equal(map[int]int{0: 100}))

	chosen := map[string]bool{}
	for _, c := range first {
		chosen[c] = true
	}
	// Unrelated churn: new clusters, removed and relabelled clusters that were not chosen.
	for i := range 20 {
		f.add(t, fmt.Sprintf("new%02d", i), profile{labels: map[string]string{"zone": zones[i%5], "fleet": "main"}})
	}
	removed, relabelled := 0, 0
	for i := range 500 {
		name := fmt.Sprintf("c%03d", i)
		if chosen[name] {
			continue
		}
		cp := &cpv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Namespace: f.set, Name: name}}
		switch {
		case removed < 20:
			g.Expect(hubCP.Client.Delete(t.Context(), cp)).To(Succeed())
			removed++
		case relabelled < 20:
			update(t, cp, func(cp *cpv1alpha1.ClusterProfile) { cp.Labels["team"] = "other" })
			relabelled++
		}
	}
	g.Eventually(func(g Gomega) {
		_, got := scheduled(g, t, p)
		g.Expect(got.Status.Scheduling.Eligible).To(HaveValue(BeEquivalentTo(500)))
	}).WithTimeout(time.Minute).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(decided(g, t, p)).To(ConsistOf(first))
	}).Should(Succeed())

	// Losing a chosen cluster replaces it in the same zone; the others stay.
	lost := first[0]
	g.Expect(hubCP.Client.Delete(t.Context(), &cpv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Namespace: f.set, Name: lost}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		now := decided(g, t, p)
		g.Expect(now).To(HaveLen(100))
		g.Expect(now).NotTo(ContainElement(lost))
		kept := 0
		for _, c := range now {
			if chosen[c] {
				kept++
			}
		}
		g.Expect(kept).To(Equal(99))
	}).WithTimeout(time.Minute).Should(Succeed())
}

// setVersion sets the Kubernetes version a cluster's profile reports.
func (f fleet) setVersion(t *testing.T, name, version string) {
	t.Helper()
	g := NewWithT(t)
	cp := &cpv1alpha1.ClusterProfile{}
	g.Expect(hubCP.Client.Get(t.Context(), client.ObjectKey{Namespace: f.set, Name: name}, cp)).To(Succeed())
	cp.Status.Version.Kubernetes = version
	if cp.Status.Conditions == nil {
		cp.Status.Conditions = []metav1.Condition{}
	}
	g.Expect(hubCP.Client.Status().Update(t.Context(), cp)).To(Succeed())
}

// A chosen cluster is not dropped by a filter that flaps: its free CPU falling
// below requiredCapacity because of the Placement's own workload (4 free, 2
// required, 3 placed: 1 free), or its expression failing because a property it
// reads vanished. A cluster not chosen yet is judged by both.
func TestFilterChangesDoNotDropChosenClusters(t *testing.T) {
	f := newFleet(t)
	props := map[string]string{placementv1alpha1.PropertyCPUFree: "4", placementv1alpha1.PropertyNodeCount: "3"}
	f.add(t, "a", profile{properties: props})
	byCapacity := f.placement(t, func(s *placementv1alpha1.PlacementSpec) {
		s.Scheduling.RequiredCapacity = &placementv1alpha1.Capacity{CPU: "2"}
	})
	byExpression := f.placement(t, func(s *placementv1alpha1.PlacementSpec) {
		s.Scheduling.ClusterExpression = "int(cluster.properties['nodes.lodestar.dev']) >= 3"
	})
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		g.Expect(decided(g, t, byCapacity)).To(ConsistOf("a"))
		g.Expect(decided(g, t, byExpression)).To(ConsistOf("a"))
	}).Should(Succeed())

	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cp := &cpv1alpha1.ClusterProfile{}
		if err := hubCP.Client.Get(t.Context(), client.ObjectKey{Namespace: f.set, Name: "a"}, cp); err != nil {
			return err
		}
		cp.Status.Properties = []cpv1alpha1.Property{{Name: placementv1alpha1.PropertyCPUFree, Value: "1", LastObservedTime: metav1.Now()}}
		return hubCP.Client.Status().Update(t.Context(), cp)
	})).To(Succeed())
	f.add(t, "b", profile{properties: map[string]string{placementv1alpha1.PropertyCPUFree: "1"}})

	g.Eventually(func(g Gomega) {
		_, got := scheduled(g, t, byExpression)
		g.Expect(got.Status.Scheduling.Excluded).To(ContainElements(
			And(HaveField("Reason", placementv1alpha1.KeptWhileExpressionFails), HaveField("Clusters", ConsistOf("a"))),
			And(HaveField("Reason", placementv1alpha1.ExclusionExpressionError), HaveField("Clusters", ConsistOf("b")))))
		_, got = scheduled(g, t, byCapacity)
		g.Expect(got.Status.Scheduling.Excluded).To(ContainElement(
			And(HaveField("Reason", placementv1alpha1.ExclusionInsufficientCapacity), HaveField("Clusters", ConsistOf("b")))))
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(decided(g, t, byCapacity)).To(ConsistOf("a"))
		g.Expect(decided(g, t, byExpression)).To(ConsistOf("a"))
	}).Should(Succeed())
}

// A tenant's wildcard toleration does not keep its Placement on a cluster the
// platform drains: only a toleration that names Lodestar's drain key does.
func TestWildcardTolerationDoesNotTolerateADrain(t *testing.T) {
	f := newFleet(t)
	f.add(t, "stays", profile{})
	f.add(t, "drained", profile{})
	wildcard := f.placement(t, func(s *placementv1alpha1.PlacementSpec) {
		s.Scheduling.Tolerations = []placementv1alpha1.Toleration{{Operator: placementv1alpha1.TolerationExists}}
	})
	g := NewWithT(t)
	g.Eventually(func(g Gomega) { g.Expect(decided(g, t, wildcard)).To(ConsistOf("stays", "drained")) }).Should(Succeed())
	b, _ := json.Marshal([]placementv1alpha1.Taint{{Key: placementv1alpha1.DrainTaintKey, Effect: placementv1alpha1.TaintNoExecute, TimeAdded: time.Now().UTC().Format(time.RFC3339)}})
	update(t, &cpv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Namespace: f.set, Name: "drained"}}, func(cp *cpv1alpha1.ClusterProfile) {
		cp.Annotations = map[string]string{placementv1alpha1.TaintsAnnotation: string(b)}
	})
	// "stays" is available, so the drained cluster leaves at once.
	availableWork(t, wildcard, "stays")
	g.Eventually(func(g Gomega) {
		g.Expect(decided(g, t, wildcard)).To(ConsistOf("stays"))
		_, got := scheduled(g, t, wildcard)
		g.Expect(got.Status.Scheduling.Excluded).To(ContainElement(
			And(HaveField("Reason", placementv1alpha1.ExclusionTainted), HaveField("Clusters", ConsistOf("drained")))))
	}).Should(Succeed())
}

// A clusterExpression that builds a huge string (a chain of replace() calls,
// each one cost unit: 10⁹ bytes within the cost limit before strings were
// bounded) fails for each cluster under the clusterExpression filter, priced
// by what it builds (or refused for its size); the tenant's other Placement
// is scheduled.
func TestExpressionBombFailsAlone(t *testing.T) {
	g := NewWithT(t)
	f := newFleet(t)
	f.add(t, "a", profile{})
	bomb := "'" + strings.Repeat("a", 10) + "'" + strings.Repeat(".replace('a', 'aaaaaaaaaa')", 9) + ".size() > 0"
	p := f.placement(t, func(s *placementv1alpha1.PlacementSpec) { s.Scheduling.ClusterExpression = bomb })
	other := f.placement(t, func(s *placementv1alpha1.PlacementSpec) { s.Scheduling.ClusterExpression = "cluster.name == 'a'" })
	g.Eventually(func(g Gomega) {
		_, got := scheduled(g, t, p)
		g.Expect(got.Status.Scheduling).NotTo(BeNil())
		g.Expect(got.Status.Scheduling.Excluded).To(ContainElement(
			And(HaveField("Reason", placementv1alpha1.ExclusionExpressionError), HaveField("Clusters", ConsistOf("a")))))
		g.Expect(got.Status.Scheduling.Clusters).To(ContainElement(HaveField("Verdicts", ContainElement(And(
			HaveField("Filter", "clusterExpression"),
			HaveField("Detail", MatchRegexp(`replace\(\) would build a string of|exceeded its cost limit`)))))))
		g.Expect(decided(g, t, other)).To(ConsistOf("a"))
	}).Should(Succeed())
}
