package charts

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/agent"
	"github.com/lodestar-dev/lodestar/internal/fleet"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/scheme"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// hubRelease is a hub chart release run as one local process with the chart's
// arguments, as its ServiceAccount.
type hubRelease struct {
	t          *testing.T
	fullname   string
	chart      *testenv.ChartProcess
	kubeconfig string
	process    *os.Process
}

// installHubRelease installs the hub chart as release name with args and
// returns it, not yet running.
func installHubRelease(t *testing.T, cp *testenv.ControlPlane, dir, name, fullname string, args ...string) *hubRelease {
	g := NewWithT(t)
	out, err := helm(t, append([]string{"install", name, filepath.Join(chartsDir, "lodestar-hub"), "--kubeconfig", filepath.Join(dir, "hub"),
		"--namespace", releaseNamespace, "--create-namespace"}, args...)...)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(testenv.PlacementsAdmitted(t.Context(), cp.Client)).To(Succeed())
	chart, err := testenv.FromDeployment(t.Context(), cp.Client, client.ObjectKey{Namespace: releaseNamespace, Name: fullname}, "manager", filepath.Join(dir, fullname))
	g.Expect(err).NotTo(HaveOccurred())
	r := &hubRelease{t: t, fullname: fullname, chart: chart, kubeconfig: filepath.Join(dir, fullname+"-sa")}
	g.Expect(testenv.WriteKubeconfig(serviceAccountConfig(t, cp.Config, fullname), "hub", r.kubeconfig)).To(Succeed())
	return r
}

// args are the chart's arguments for a local process serving its metrics on
// metrics ("0": none).
func (r *hubRelease) args(metrics string) (env, args []string) {
	p := &testenv.ChartProcess{Args: append([]string(nil), r.chart.Args...), Env: r.chart.Env}
	p.Set("kubeconfig", r.kubeconfig)
	p.Set("metrics-bind-address", metrics)
	p.Set("health-probe-bind-address", "0")
	return p.Env, p.Args
}

// run starts a replica of the release, serving its metrics on metrics.
func (r *hubRelease) run(metrics string) *os.Process {
	return r.startBinary(metrics).process
}

func (r *hubRelease) startBinary(metrics string) *running {
	env, args := r.args(metrics)
	return startBinary(r.t, "lodestar-hub", env, args...)
}

func (r *hubRelease) start() { r.process = r.run("0") }

// emptyHub starts a hub API server without CRDs (the chart installs them) and
// writes its kubeconfig as dir/hub.
func emptyHub(t *testing.T) (hub *testenv.ControlPlane, dir string) {
	g := NewWithT(t)
	hub, err := testenv.StartEmpty("hub", scheme.Hub())
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = hub.Stop() })
	dir = t.TempDir()
	g.Expect(testenv.WriteKubeconfig(hub.Config, "hub", filepath.Join(dir, "hub"))).To(Succeed())
	return hub, dir
}

// One hub, two hub manager releases, each with its own cluster set, its own
// leader election Lease and its own members: each places the Placements of the
// namespaces that bind its set on its set's clusters only, and never touches
// the other's (with one stopped, its namespaces' new Placements stay
// unscheduled while the other's go on). A namespace that binds both sets is the
// manager's of the first set (sorted); the other's binding says so. A third
// manager refuses to start on a set another one marked.
func TestTwoHubManagersEachWithItsClusterSets(t *testing.T) {
	g := NewWithT(t)
	hubCP, dir := emptyHub(t)
	hc := hubCP.Client
	ctx := t.Context()

	// The hub-wide release manages fleet-a; the second, not hub-wide, fleet-b.
	main := installHubRelease(t, hubCP, dir, "lodestar-hub", "lodestar-hub", "--set", "debug.enabled=false", "--set", "clusterSetNamespaces={fleet-a}")
	edge := installHubRelease(t, hubCP, dir, "edge", "edge-lodestar-hub", "--set", "hubWide=false", "--set", "clusterSetNamespaces={fleet-b}")
	g.Expect(edge.chart.Args).To(ContainElements("--hub-wide=false", "--hub-manager-name=edge-lodestar-hub", "--leader-election-id=edge-lodestar-hub.placement.lodestar.dev"))
	g.Expect(edge.chart.Args).NotTo(ContainElement(HavePrefix("--debug-bind-address")), "the debug API is the hub-wide release's")
	main.start()
	edge.start()
	g.Eventually(func(g Gomega) {
		for set, manager := range map[string]string{"fleet-a": "lodestar-hub", "fleet-b": "edge-lodestar-hub"} {
			ns := &corev1.Namespace{}
			g.Expect(hc.Get(ctx, client.ObjectKey{Name: set}, ns)).To(Succeed())
			g.Expect(ns.Labels).To(HaveKeyWithValue(placementv1alpha1.HubManagerLabel, manager))
		}
		g.Expect(leaseHolder(hc, main.chart.Args)).NotTo(BeEmpty())
		g.Expect(leaseHolder(hc, edge.chart.Args)).NotTo(BeEmpty())
	}).Should(Succeed(), "each manager marks its set and leads its own Lease")

	// One member per set, with its agent.
	members := map[string]*testenv.ControlPlane{}
	for name, set := range map[string]string{"a-1": "fleet-a", "b-1": "fleet-b"} {
		cp, err := testenv.StartMember(name, scheme.Agent())
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = cp.Stop() })
		members[name] = cp
		cfg, err := fleet.Join(ctx, hubCP.Config, hc, fleet.JoinOptions{Name: name, ClusterSet: set, TokenTTL: time.Hour})
		g.Expect(err).NotTo(HaveOccurred())
		a, err := agent.NewManager(agent.Options{ClusterName: name, Hub: cfg, Member: cp.Config, AgentNamespace: releaseNamespace,
			Manager: ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"}})
		g.Expect(err).NotTo(HaveOccurred())
		start(t, a)
	}
	g.Eventually(func(g Gomega) {
		for name, set := range map[string]string{"a-1": "fleet-a", "b-1": "fleet-b"} {
			p := &cpv1alpha1.ClusterProfile{}
			g.Expect(hc.Get(ctx, client.ObjectKey{Namespace: set, Name: name}, p)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(p.Status.Conditions, placementv1alpha1.AgentReachableCondition)).To(BeTrue(), "%s reachable (reported by its set's manager)", name)
		}
	}).Should(Succeed())

	// team-a binds fleet-a, team-b fleet-b, both binds both; each places an
	// app on every cluster it may use.
	for ns, sets := range map[string][]string{"team-a": {"fleet-a"}, "team-b": {"fleet-b"}, "both": {"fleet-a", "fleet-b"}} {
		g.Expect(hc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		for _, set := range sets {
			g.Expect(fleet.BindClusterSet(ctx, hc, ns, set)).To(Succeed())
		}
		placeApp(g, hc, ns, "app")
	}
	placedOn := map[string]string{"team-a": "a-1", "team-b": "b-1", "both": "a-1"}
	for ns, cluster := range placedOn {
		expectPlacedOnly(g, hc, members, client.ObjectKey{Namespace: ns, Name: "app"}, cluster)
	}
	// Each Work carries the name of the manager that wrote it, which is all
	// that manager caches.
	writer := map[string]string{"a-1": "lodestar-hub", "b-1": "edge-lodestar-hub"}
	for cluster, manager := range writer {
		works := &workv1alpha1.WorkList{}
		g.Expect(hc.List(ctx, works, client.InNamespace(names.ClusterNamespace(cluster)))).To(Succeed())
		g.Expect(works.Items).NotTo(BeEmpty())
		for _, w := range works.Items {
			g.Expect(w.Labels).To(HaveKeyWithValue(placementv1alpha1.HubManagerLabel, manager), "Work %s/%s", w.Namespace, w.Name)
		}
	}
	g.Eventually(func(g Gomega) {
		for set, want := range map[string]string{"fleet-a": placementv1alpha1.ReasonClusterSetBound, "fleet-b": placementv1alpha1.ReasonClusterSetOfOtherManager} {
			b := &placementv1alpha1.ClusterSetBinding{}
			g.Expect(hc.Get(ctx, client.ObjectKey{Namespace: "both", Name: set}, b)).To(Succeed())
			c := meta.FindStatusCondition(b.Status.Conditions, placementv1alpha1.BoundCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(want), "binding of %s in namespace both: %s", set, c.Message)
		}
	}).Should(Succeed())

	// The edge release stops (its Lease released): team-b's new Placement
	// stays untouched (the hub-wide manager does not take it), team-a's goes on.
	g.Expect(edge.process.Signal(os.Interrupt)).To(Succeed())
	g.Eventually(func() string { return leaseHolder(hc, edge.chart.Args) }).Should(BeEmpty())
	placeApp(g, hc, "team-b", "later")
	placeApp(g, hc, "team-a", "later")
	expectPlacedOnly(g, hc, members, client.ObjectKey{Namespace: "team-a", Name: "later"}, "a-1")
	g.Consistently(func(g Gomega) {
		p := &placementv1alpha1.Placement{}
		g.Expect(hc.Get(ctx, client.ObjectKey{Namespace: "team-b", Name: "later"}, p)).To(Succeed())
		g.Expect(p.Status.Conditions).To(BeEmpty(), "no manager but edge's writes team-b's Placements")
		decisions := &cpv1alpha1.PlacementDecisionList{}
		g.Expect(hc.List(ctx, decisions, client.InNamespace("team-b"), client.MatchingLabels{cpv1alpha1.PlacementKeyLabel: "later"})).To(Succeed())
		g.Expect(decisions.Items).To(BeEmpty())
	}).WithTimeout(10 * time.Second).Should(Succeed())
	edge.start()
	expectPlacedOnly(g, hc, members, client.ObjectKey{Namespace: "team-b", Name: "later"}, "b-1")

	// A third manager on fleet-b refuses to start, and says whose set it is.
	env, args := edge.args("0")
	refused := &testenv.ChartProcess{Args: args, Env: env}
	refused.Set("hub-manager-name", "intruder")
	refused.Set("leader-elect", "false")
	bin, err := testenv.Binary("lodestar-hub")
	g.Expect(err).NotTo(HaveOccurred())
	runCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(runCtx, bin, refused.Args...)
	cmd.Env = append(os.Environ(), refused.Env...)
	out, err := cmd.CombinedOutput()
	g.Expect(err).To(HaveOccurred(), "the intruder must not start")
	g.Expect(string(out)).To(And(ContainSubstring("cluster set fleet-b is managed by hub manager"), ContainSubstring("edge-lodestar-hub")))
	ns := &corev1.Namespace{}
	g.Expect(hc.Get(ctx, client.ObjectKey{Name: "fleet-b"}, ns)).To(Succeed())
	g.Expect(ns.Labels).To(HaveKeyWithValue(placementv1alpha1.HubManagerLabel, "edge-lodestar-hub"))
}

// placeApp creates a ConfigMap and a Placement of it, both named name, in ns,
// on every cluster the namespace may use.
func placeApp(g Gomega, hc client.Client, ns, name string) {
	g.Expect(hc.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"team": ns}})).To(Succeed())
	g.Expect(hc.Create(context.Background(), &placementv1alpha1.Placement{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{{Version: "v1", Kind: "ConfigMap", Name: name}},
			Scheduling:        placementv1alpha1.Scheduling{ClusterSelector: &metav1.LabelSelector{}},
		},
	})).To(Succeed())
}

// expectPlacedOnly waits until the Placement of key is Available with its
// ConfigMap on cluster, and on no other member.
func expectPlacedOnly(g Gomega, hc client.Client, members map[string]*testenv.ControlPlane, key client.ObjectKey, cluster string) {
	g.Eventually(func(g Gomega) {
		p := &placementv1alpha1.Placement{}
		g.Expect(hc.Get(context.Background(), key, p)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(p.Status.Conditions, placementv1alpha1.AvailableCondition)).To(BeTrue(), "%s Available: %v", key, p.Status.Conditions)
		for name, cp := range members {
			err := cp.Client.Get(context.Background(), key, &corev1.ConfigMap{})
			if name == cluster {
				g.Expect(err).NotTo(HaveOccurred(), "%s on %s", key, name)
			} else {
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s not on %s: %v", key, name, err)
			}
		}
	}).WithTimeout(3 * time.Minute).Should(Succeed())
}
