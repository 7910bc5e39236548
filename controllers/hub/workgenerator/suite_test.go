package workgenerator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/hub"
	"github.com/lodestar-dev/lodestar/controllers/hub/workgenerator"
	"github.com/lodestar-dev/lodestar/internal/clusterworks"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/patch"
	"github.com/lodestar-dev/lodestar/internal/render"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// The work generator's suite: one hub API server, the work generator alone on
// it. The tests write what the other controllers would (the revision maker's
// PlacementRevisions and status.revision, the scheduler's PlacementDecisions,
// the agents' Work status) and check the Works it writes.

var hubCP *testenv.ControlPlane

// clusterSet is the cluster-set namespace of this package's clusters.
const clusterSet = "workgenerator-test-set"

func TestMain(m *testing.M) {
	// The package's Gomega defaults, sized for a busy 2-core CI machine.
	testenv.SetGomegaDefaults()
	os.Exit(testenv.HubSuite(m, hub.ManagerOptions(ctrl.Options{}, ""), clusterSet, &hubCP, startWorkGenerator))
}

// startWorkGenerator runs only the work generator on the hub.
func startWorkGenerator(mgr ctrl.Manager) error {
	return (&workgenerator.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder(workgenerator.Name), Scope: lookup.Scope{Sets: []string{clusterSet}},
	}).SetupWithManager(mgr)
}

// fixture is one test's Placement on its own clusters.
type fixture struct {
	t         *testing.T
	g         Gomega
	ns        string
	clusters  []string
	placement *placementv1alpha1.Placement
	revisions int64
}

// newFixture creates a tenant namespace bound to the package's cluster set, n
// clusters of their own (ClusterProfiles and hub namespaces), and a Placement
// with spec (its resource selectors are not read here: the revisions are
// written by the test).
func newFixture(t *testing.T, n int, spec placementv1alpha1.PlacementSpec) *fixture {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	ns, err := testenv.NewTenant(ctx, hubCP.Client, clusterSet)
	g.Expect(err).NotTo(HaveOccurred())
	f := &fixture{t: t, g: g, ns: ns}
	f.clusters, err = testenv.NewClusters(ctx, hubCP.Client, clusterSet, ns, n)
	g.Expect(err).NotTo(HaveOccurred())
	spec.ResourceSelectors = []placementv1alpha1.ResourceSelector{{Version: "v1", Kind: "ConfigMap"}}
	f.placement = &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: f.ns}, Spec: spec}
	g.Expect(hubCP.Client.Create(ctx, f.placement)).To(Succeed())
	return f
}

// configMap is the manifest of a ConfigMap whose data has a value of size bytes.
func configMap(name string, size int) runtime.RawExtension {
	b, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": "app"}, "data": map[string]any{"v": fmt.Sprintf("%0*d", size, 0)}})
	return runtime.RawExtension{Raw: b}
}

// render makes the next PlacementRevision of manifests and names it in the
// Placement's status as the revision maker does; it returns its hash.
func (f *fixture) render(manifests ...runtime.RawExtension) string {
	f.t.Helper()
	return f.renderWith(nil, manifests...)
}

// renderWith is render of a revision with overrides.
func (f *fixture) renderWith(overrides []placementv1alpha1.Override, manifests ...runtime.RawExtension) string {
	f.t.Helper()
	f.revisions++
	hash := fmt.Sprintf("%010x%06x", f.revisions, f.revisions)
	rev := &placementv1alpha1.PlacementRevision{
		ObjectMeta: metav1.ObjectMeta{Name: names.Revision(f.placement.Name, hash), Namespace: f.ns,
			Labels: map[string]string{placementv1alpha1.PlacementNameLabel: f.placement.Name, placementv1alpha1.RevisionHashLabel: hash}},
		Spec: placementv1alpha1.PlacementRevisionSpec{Placement: f.placement.Name, Revision: f.revisions, Hash: hash, Overrides: overrides},
	}
	f.g.Expect(render.SetRevisionManifests(&rev.Spec, manifests)).To(Succeed())
	f.g.Expect(controllerutil.SetControllerReference(f.placement, rev, hubCP.Client.Scheme())).To(Succeed())
	f.g.Expect(hubCP.Client.Create(f.t.Context(), rev)).To(Succeed())
	f.setRendered(metav1.ConditionTrue, placementv1alpha1.ReasonRendered, rev.Name)
	return hash
}

// setRendered writes the revision maker's part of the Placement's status.
func (f *fixture) setRendered(status metav1.ConditionStatus, reason, revision string) {
	f.t.Helper()
	p := &placementv1alpha1.Placement{}
	f.g.Expect(hubCP.Client.Get(f.t.Context(), client.ObjectKeyFromObject(f.placement), p)).To(Succeed())
	desired := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
	desired.Status.Revision = revision
	desired.Status.Conditions = []metav1.Condition{{Type: placementv1alpha1.RenderedCondition, Status: status, Reason: reason,
		Message: "written by the test", ObservedGeneration: p.Generation, LastTransitionTime: metav1.Now()}}
	f.g.Expect(patch.ApplyStatus(f.t.Context(), hubCP.Client, desired, "lodestar-placementrevision")).To(Succeed())
}

// decide writes the Placement's PlacementDecision, naming clusters, as the
// scheduler does.
func (f *fixture) decide(clusters ...string) {
	f.t.Helper()
	pd := &cpv1alpha1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{Name: names.DecisionSlice(f.placement.Name, 0), Namespace: f.ns,
		Labels: map[string]string{cpv1alpha1.PlacementKeyLabel: f.placement.Name}}}
	f.g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		_, err := controllerutil.CreateOrUpdate(f.t.Context(), hubCP.Client, pd, func() error {
			pd.SchedulerName = placementv1alpha1.DefaultSchedulerName
			pd.Decisions = nil
			for _, c := range clusters {
				pd.Decisions = append(pd.Decisions, cpv1alpha1.ClusterDecision{ClusterProfileRef: cpv1alpha1.ClusterProfileReference{Namespace: clusterSet, Name: c}, Reason: "test"})
			}
			return controllerutil.SetControllerReference(f.placement, pd, hubCP.Client.Scheme())
		})
		return err
	})).To(Succeed())
}

// works are the Placement's Works on cluster, in part order.
func (f *fixture) works(g Gomega, cluster string) []*workv1alpha1.Work {
	list := &workv1alpha1.WorkList{}
	g.Expect(hubCP.Client.List(context.Background(), list, client.InNamespace(names.ClusterNamespace(cluster)),
		client.MatchingLabels(lookup.WorkLabels(f.placement)))).To(Succeed())
	return clusterworks.ByCluster(list.Items)[cluster]
}

// revisionOn is the revision the cluster's Works hold, "" without Works.
func (f *fixture) revisionOn(g Gomega, cluster string) string {
	rev, _ := clusterworks.Revision(f.works(g, cluster))
	return rev
}

// reportAvailable writes the status an agent reports on each of the cluster's
// Works: applied and available.
func (f *fixture) reportAvailable(cluster string) {
	f.t.Helper()
	status := metav1.ConditionTrue
	for _, w := range f.works(f.g, cluster) {
		desired := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: w.Namespace}}
		desired.Status.Conditions = []metav1.Condition{
			{Type: lodestarworkv1alpha1.ConditionApplied, Status: metav1.ConditionTrue, Reason: "Applied", Message: "test", ObservedGeneration: w.Generation, LastTransitionTime: metav1.Now()},
			{Type: lodestarworkv1alpha1.ConditionAvailable, Status: status, Reason: "Test", Message: "test", ObservedGeneration: w.Generation, LastTransitionTime: metav1.Now()},
		}
		f.g.Expect(hubCP.Client.Status().Patch(f.t.Context(), desired, client.Merge, client.FieldOwner("lodestar-agent"))).To(Succeed())
	}
}

// condition is the Placement's condition of type ct.
func (f *fixture) condition(g Gomega, ct string) *metav1.Condition {
	p := &placementv1alpha1.Placement{}
	g.Expect(hubCP.Client.Get(context.Background(), client.ObjectKeyFromObject(f.placement), p)).To(Succeed())
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == ct {
			return &p.Status.Conditions[i]
		}
	}
	return &metav1.Condition{}
}

// eventually is Eventually with the package's defaults, for a function of g.
func eventually(f *fixture, fn func(g Gomega)) {
	f.t.Helper()
	f.g.Eventually(fn).Should(Succeed())
}

// never is Consistently over a short while, for what must not happen.
func never(f *fixture, fn func(g Gomega)) {
	f.t.Helper()
	f.g.Consistently(fn).WithTimeout(2 * time.Second).Should(Succeed())
}
