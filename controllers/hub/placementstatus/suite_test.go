package placementstatus_test

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/hub"
	"github.com/lodestar-dev/lodestar/controllers/hub/placementstatus"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// The status aggregator's suite: one hub API server, the aggregator alone on
// it. The tests write the Works and their status as the work generator and
// the agents would, and read the Placement's status.

var hubCP *testenv.ControlPlane

// clusterSet is the cluster-set namespace of this package's clusters.
const clusterSet = "placementstatus-test-set"

func TestMain(m *testing.M) {
	// The package's Gomega defaults, sized for a busy 2-core CI machine.
	testenv.SetGomegaDefaults()
	os.Exit(testenv.HubSuite(m, hub.ManagerOptions(ctrl.Options{}, ""), clusterSet, &hubCP, startAggregator))
}

// startAggregator runs only the status aggregator on the hub.
func startAggregator(mgr ctrl.Manager) error {
	return (&placementstatus.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(placementstatus.Name), Scope: lookup.Scope{Sets: []string{clusterSet}}}).SetupWithManager(mgr)
}

// fixture is one test's Placement, decided on clusters of its own.
type fixture struct {
	t         *testing.T
	g         Gomega
	ns        string
	clusters  []string
	placement *placementv1alpha1.Placement
}

// newFixture makes a tenant namespace bound to the package's cluster set, n
// clusters, and a Placement with spec whose decisions name every cluster.
func newFixture(t *testing.T, n int, spec placementv1alpha1.PlacementSpec) *fixture {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	ns, err := testenv.NewTenant(ctx, hubCP.Client, clusterSet)
	g.Expect(err).NotTo(HaveOccurred())
	f := &fixture{t: t, g: g, ns: ns}
	f.clusters, err = testenv.NewClusters(ctx, hubCP.Client, clusterSet, ns, n)
	g.Expect(err).NotTo(HaveOccurred())
	spec.ResourceSelectors = []placementv1alpha1.ResourceSelector{{Group: "apps", Version: "v1", Kind: "Deployment"}}
	f.placement = &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: f.ns}, Spec: spec}
	g.Expect(hubCP.Client.Create(ctx, f.placement)).To(Succeed())
	pd := &cpv1alpha1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{Name: names.DecisionSlice("web", 0), Namespace: f.ns,
		Labels: map[string]string{cpv1alpha1.PlacementKeyLabel: "web"}}, SchedulerName: placementv1alpha1.DefaultSchedulerName}
	for _, name := range f.clusters {
		pd.Decisions = append(pd.Decisions, cpv1alpha1.ClusterDecision{ClusterProfileRef: cpv1alpha1.ClusterProfileReference{Namespace: clusterSet, Name: name}, Reason: "test"})
	}
	g.Expect(controllerutil.SetControllerReference(f.placement, pd, hubCP.Client.Scheme())).To(Succeed())
	g.Expect(hubCP.Client.Create(ctx, pd)).To(Succeed())
	return f
}

// objectReport is what an agent reports of one manifest.
type objectReport struct {
	name      string
	available bool
	message   string
	feedback  map[string]any
}

// work writes part i of n of the Placement's Works on cluster, with the status
// its agent reports of its objects, as the work generator and the agent would.
func (f *fixture) work(cluster string, i, n int, objects ...objectReport) {
	f.t.Helper()
	ctx := f.t.Context()
	w := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: names.WorkPart(f.ns, "web", i), Namespace: names.ClusterNamespace(cluster),
		Labels: managedBy(lookup.WorkLabels(f.placement)), Annotations: map[string]string{placementv1alpha1.RevisionAnnotation: "r1"}}}
	if i > 0 {
		w.Labels[placementv1alpha1.WorkPartLabel] = strconv.Itoa(i)
	}
	if n > 1 {
		w.Annotations[placementv1alpha1.WorkPartsAnnotation] = strconv.Itoa(n)
	}
	for _, o := range objects {
		raw, _ := json.Marshal(map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": o.name, "namespace": "app"}})
		w.Spec.Workload.Manifests = append(w.Spec.Workload.Manifests, workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}})
	}
	f.g.Expect(hubCP.Client.Create(ctx, w)).To(Succeed())
	allAvailable := true
	for ord, o := range objects {
		conds := []metav1.Condition{condition(lodestarworkv1alpha1.ConditionApplied, true, "applied", w.Generation),
			condition(lodestarworkv1alpha1.ConditionAvailable, o.available, o.message, w.Generation)}
		if o.feedback != nil {
			b, _ := json.Marshal(map[string]any{"values": o.feedback})
			conds = append(conds, metav1.Condition{Type: lodestarworkv1alpha1.ConditionStatusFeedback, Status: metav1.ConditionTrue,
				Reason: lodestarworkv1alpha1.ReasonFeedbackReported, Message: string(b), ObservedGeneration: w.Generation, LastTransitionTime: metav1.Now()})
		}
		w.Status.ManifestConditions = append(w.Status.ManifestConditions, workv1alpha1.ManifestCondition{
			Identifier: workv1alpha1.ResourceIdentifier{Ordinal: ord, Group: "apps", Version: "v1", Kind: "Deployment", Resource: "deployments", Namespace: "app", Name: o.name},
			Conditions: conds})
		allAvailable = allAvailable && o.available
	}
	w.Status.Conditions = []metav1.Condition{condition(lodestarworkv1alpha1.ConditionApplied, true, "all applied", w.Generation),
		condition(lodestarworkv1alpha1.ConditionAvailable, allAvailable, "some not available", w.Generation)}
	f.g.Expect(hubCP.Client.Status().Update(ctx, w)).To(Succeed())
}

func condition(t string, ok bool, msg string, gen int64) metav1.Condition {
	c := metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: "Reported", Message: msg, ObservedGeneration: gen, LastTransitionTime: metav1.Now()}
	if !ok {
		c.Status, c.Reason = metav1.ConditionFalse, "NotYet"
	}
	return c
}

// status reads the Placement's status.
func (f *fixture) status(g Gomega) placementv1alpha1.PlacementStatus {
	p := &placementv1alpha1.Placement{}
	g.Expect(hubCP.Client.Get(context.Background(), client.ObjectKeyFromObject(f.placement), p)).To(Succeed())
	return p.Status
}

// managedBy adds the label of the hub manager that writes Works (the default
// one, whose cache holds only the Works it labels) to a Work's labels.
func managedBy(labels map[string]string) map[string]string {
	labels[placementv1alpha1.HubManagerLabel] = placementv1alpha1.DefaultHubManager
	return labels
}
