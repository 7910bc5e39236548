package scheduler_test

import (
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/util/retry"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/hub"
	"github.com/lodestar-dev/lodestar/controllers/hub/scheduler"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

var hubCP *testenv.ControlPlane

// clusterSet is the cluster-set namespace of this package's tests, so that they
// do not see ClusterProfiles of other packages.
const clusterSet = "scheduler-test-set"

// fleetSets are the further cluster sets the scheduler manages here, one per
// newFleet (nextSet counts them out).
var (
	fleetSets []string
	nextSet   atomic.Int32
)

func init() {
	for i := range 64 {
		fleetSets = append(fleetSets, fmt.Sprintf("scheduler-set-%02d", i))
	}
}

func TestMain(m *testing.M) {
	// The package's Gomega defaults, sized for a busy 2-core CI machine.
	testenv.SetGomegaDefaults()
	os.Exit(testenv.HubSuite(m, hub.ManagerOptions(ctrl.Options{}, ""), clusterSet, &hubCP, startScheduler))
}

// startScheduler runs only the scheduler on the hub, for the cluster set of these tests.
func startScheduler(mgr ctrl.Manager) error {
	return (&scheduler.Reconciler{
		Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(scheduler.Name), Scope: lookup.Scope{Sets: append([]string{clusterSet}, fleetSets...)},
	}).SetupWithManager(mgr)
}

// newNamespace creates a tenant namespace bound to the package's cluster set.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "test-" + rand.String(6)}}
	NewWithT(t).Expect(hubCP.Client.Create(t.Context(), ns)).To(Succeed())
	bind(t, ns.Name, clusterSet)
	return ns.Name
}

// bind lets the Placements of ns use set, as a cluster-set admin does.
func bind(t *testing.T, ns, set string) *placementv1alpha1.ClusterSetBinding {
	t.Helper()
	b := &placementv1alpha1.ClusterSetBinding{
		ObjectMeta: metav1.ObjectMeta{Name: set, Namespace: ns},
		Spec:       placementv1alpha1.ClusterSetBindingSpec{ClusterSet: set},
	}
	NewWithT(t).Expect(hubCP.Client.Create(t.Context(), b)).To(Succeed())
	return b
}

func placement(ns string, selector *metav1.LabelSelector) *placementv1alpha1.Placement {
	return &placementv1alpha1.Placement{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{{Version: "v1", Kind: "ConfigMap"}},
			Scheduling:        placementv1alpha1.Scheduling{ClusterSelector: selector},
		},
	}
}

// update changes obj on the hub with mutate, read afresh and again on a conflict:
// the scheduler writes Placements' status, and other tests' writes may race too.
func update[T client.Object](t *testing.T, obj T, mutate func(T)) {
	t.Helper()
	NewWithT(t).Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := hubCP.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		mutate(obj)
		return hubCP.Client.Update(t.Context(), obj)
	})).To(Succeed())
}

// reportHealthy writes the ClusterProfile's health as the cluster health
// controller reports a cluster whose agent is there.
func reportHealthy(t *testing.T, cp *cpv1alpha1.ClusterProfile) {
	t.Helper()
	cp.Status.Conditions = []metav1.Condition{{Type: placementv1alpha1.ControlPlaneHealthyCondition, Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.Now()}}
	NewWithT(t).Expect(hubCP.Client.Status().Update(t.Context(), cp)).To(Succeed())
}

// slices returns the number of clusters in each PlacementDecision slice of p, by
// the slice's index label.
func slices(g Gomega, t *testing.T, p *placementv1alpha1.Placement) map[int]int {
	list := &cpv1alpha1.PlacementDecisionList{}
	g.Expect(hubCP.Client.List(t.Context(), list, client.InNamespace(p.Namespace),
		client.MatchingLabels{cpv1alpha1.PlacementKeyLabel: p.Name})).To(Succeed())
	out := map[int]int{}
	for _, pd := range list.Items {
		idx, err := strconv.Atoi(pd.Labels[cpv1alpha1.DecisionIndexLabel])
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pd.Labels).To(HaveKeyWithValue(cpv1alpha1.DecisionKeyLabel, p.Name))
		g.Expect(pd.SchedulerName).To(Equal(p.Spec.Scheduling.SchedulerName), "the Placement's schedulerName (defaulted by the API server)")
		g.Expect(pd.SchedulerName).To(Equal(placementv1alpha1.DefaultSchedulerName))
		g.Expect(metav1.IsControlledBy(&pd, p)).To(BeTrue())
		out[idx] = len(pd.Decisions)
	}
	return out
}

// Decisions of more than 100 clusters are split into slices of at most 100, and
// slices that are no longer needed are removed.
func TestDecisionSlices(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	label := "slices-" + rand.String(4)
	for i := range 250 {
		tier := "bulk"
		if i < 30 {
			tier = "small"
		}
		cp := &cpv1alpha1.ClusterProfile{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%03d", label, i), Namespace: clusterSet,
				Labels: map[string]string{"test": label, "tier": tier}},
			Spec: cpv1alpha1.ClusterProfileSpec{ClusterManager: cpv1alpha1.ClusterManager{Name: scheduler.ClusterManagerName}},
		}
		g.Expect(hubCP.Client.Create(ctx, cp)).To(Succeed())
		reportHealthy(t, cp)
	}
	// A profile another cluster manager owns is never scheduled.
	g.Expect(hubCP.Client.Create(ctx, &cpv1alpha1.ClusterProfile{
		ObjectMeta: metav1.ObjectMeta{Name: label + "-foreign", Namespace: clusterSet, Labels: map[string]string{"test": label}},
		Spec:       cpv1alpha1.ClusterProfileSpec{ClusterManager: cpv1alpha1.ClusterManager{Name: "someone-else"}},
	})).To(Succeed())

	ns := newNamespace(t)
	p := placement(ns, &metav1.LabelSelector{MatchLabels: map[string]string{"test": label}})
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(slices(g, t, p)).To(Equal(map[int]int{0: 100, 1: 100, 2: 50}))
		got := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(got.Status.SelectedClusters).To(HaveValue(BeEquivalentTo(250)))
		c := meta.FindStatusCondition(got.Status.Conditions, placementv1alpha1.ScheduledCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
	}).WithTimeout(time.Minute).Should(Succeed())

	update(t, p, func(p *placementv1alpha1.Placement) { p.Spec.Scheduling.ClusterSelector.MatchLabels["tier"] = "small" })
	g.Eventually(func(g Gomega) {
		g.Expect(slices(g, t, p)).To(Equal(map[int]int{0: 30}))
	}).WithTimeout(time.Minute).Should(Succeed())
}

// An invalid cluster selector is a False condition with a reason and an event.
func TestInvalidClusterSelector(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	p := placement(ns, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Near"}}})
	g.Expect(hubCP.Client.Create(t.Context(), p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(t.Context(), client.ObjectKeyFromObject(p), got)).To(Succeed())
		c := meta.FindStatusCondition(got.Status.Conditions, placementv1alpha1.ScheduledCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonInvalidClusterSelector))
		g.Expect(c.ObservedGeneration).To(Equal(got.Generation))
		events := &eventsv1.EventList{}
		g.Expect(hubCP.Client.List(t.Context(), events, client.InNamespace(ns))).To(Succeed())
		g.Expect(events.Items).To(ContainElement(HaveField("Reason", placementv1alpha1.ReasonInvalidClusterSelector)))
	}).WithTimeout(time.Minute).Should(Succeed())
}
