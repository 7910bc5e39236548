package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"
	"sigs.k8s.io/yaml"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/fleetview"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/settled"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// shopChart is the example chart of docs/examples/hub-tools.
var shopChart = filepath.Join("..", "..", "docs", "examples", "hub-tools", "shop")

// hubTool runs a tool (helm, kubectl) against the hub as its administrator
// and returns its combined output.
func hubTool(t *testing.T, timeout time.Duration, bin string, args ...string) (string, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hub.kubeconfig")
	if err := testenv.WriteKubeconfig(hubCP.Config, "hub", path); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", path}, args...)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The tools' own wait and rollout logic works on the hub, with helm v3 (whose
// --wait reads the Deployment's new ReplicaSet) and v4 (whose --wait is
// kstatus): helm installs and upgrades the example chart with --wait
// --wait-for-jobs and returns once the fleet (two members) runs it; kubectl
// rollout status, history, undo and restart and kubectl wait work on the
// hub's Deployment; the ReplicaSets Lodestar writes for them are never placed;
// helm uninstall takes the app off the members.
func TestHelmAndKubectlRolloutOnTheHub(t *testing.T) {
	extraMembers(t)
	for _, helm := range []struct{ version, env string }{{"v3", testenv.HelmEnv}, {"v4", testenv.Helm4Env}} {
		t.Run("helm "+helm.version, func(t *testing.T) {
			bin := os.Getenv(helm.env)
			if bin == "" {
				t.Fatalf("%s is not set: run through `make test`, which builds helm %s into bin/", helm.env, helm.version)
			}
			helmAndRollout(t, bin)
		})
	}
}

// helmAndRollout installs, upgrades, rolls back, restarts and uninstalls the
// example chart with the helm binary helmBin.
func helmAndRollout(t *testing.T, helmBin string) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newTenant(t, placementv1alpha1.DefaultClusterSet, auxSet)
	running := []string{fullMember, member3} // members that run pods
	kubectl := filepath.Join(os.Getenv(testenv.AssetsEnv), "kubectl")
	helm := func(args ...string) {
		t.Helper()
		out, err := hubTool(t, 4*time.Minute, helmBin, append(args, "-n", ns)...)
		g.Expect(err).NotTo(HaveOccurred(), "helm %s: %s", strings.Join(args, " "), out)
	}
	run := func(args ...string) string {
		t.Helper()
		out, err := hubTool(t, 2*time.Minute, kubectl, append(args, "-n", ns)...)
		g.Expect(err).NotTo(HaveOccurred(), "kubectl %s: %s", strings.Join(args, " "), out)
		return out
	}
	onMember := func(g Gomega, cluster string) *appsv1.Deployment {
		d := &appsv1.Deployment{}
		g.Expect(members[cluster].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-web"}, d)).To(Succeed())
		return d
	}
	// The image both clusters run, "" while they differ.
	image := func(g Gomega) string {
		a, b := onMember(g, running[0]).Spec.Template.Spec.Containers[0].Image, onMember(g, running[1]).Spec.Template.Spec.Containers[0].Image
		if a != b {
			return ""
		}
		return a
	}
	clusters := "clusterNames={" + strings.Join(running, ",") + "}"

	// Install: helm returns once the Deployment runs on the cluster and the
	// hook Job completed there.
	helm("install", "shop", shopChart, "--wait", "--wait-for-jobs", "--timeout", "3m", "--set", clusters)
	g.Expect(image(g)).To(Equal("nginx:1.27"))
	for _, c := range running {
		g.Expect(onMember(g, c).Status.AvailableReplicas).To(BeEquivalentTo(2), "helm waited for %s", c)
	}
	g.Expect(run("rollout", "status", "deployment/shop-web", "--timeout=60s")).To(ContainSubstring("successfully rolled out"))
	g.Expect(run("wait", "--for=condition=Available", "deployment/shop-web", "--timeout=60s")).To(ContainSubstring("condition met"))
	sets := &appsv1.ReplicaSetList{}
	g.Expect(hubCP.Client.List(ctx, sets, client.InNamespace(ns))).To(Succeed())
	g.Expect(sets.Items).To(ConsistOf(HaveField("ObjectMeta.Labels", HaveKeyWithValue(fleetview.Label, "shop-web"))))
	g.Expect(sets.Items[0].Status.ReadyReplicas).To(BeEquivalentTo(2))

	// Upgrade to a new image: helm waits for the new ReplicaSet the hub
	// shows once the cluster runs it.
	helm("upgrade", "shop", shopChart, "--wait", "--wait-for-jobs", "--timeout", "3m", "--set", clusters, "--set", "image=nginx:1.28")
	g.Expect(image(g)).To(Equal("nginx:1.28"))
	history := run("rollout", "history", "deployment/shop-web")
	g.Expect(history).To(MatchRegexp(`(?m)^1\s`))
	g.Expect(history).To(MatchRegexp(`(?m)^2\s`))

	// kubectl rollout undo on the hub rolls the fleet back to the previous
	// template; restart rolls out a restart to every cluster.
	g.Expect(run("rollout", "undo", "deployment/shop-web")).To(ContainSubstring("rolled back"))
	g.Eventually(image).Should(Equal("nginx:1.27"))
	g.Expect(run("rollout", "status", "deployment/shop-web", "--timeout=90s")).To(ContainSubstring("successfully rolled out"))
	g.Expect(run("rollout", "history", "deployment/shop-web")).To(MatchRegexp(`(?m)^3\s`), "the first template is revision 3 now")
	hub := &appsv1.Deployment{}
	g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-web"}, hub)).To(Succeed())
	g.Expect(hub.Annotations).To(HaveKeyWithValue("meta.helm.sh/release-name", "shop"), "undo kept helm's annotations")
	run("rollout", "restart", "deployment/shop-web")
	g.Eventually(func(g Gomega) {
		for _, c := range running {
			g.Expect(onMember(g, c).Spec.Template.Annotations).To(HaveKey("kubectl.kubernetes.io/restartedAt"))
		}
	}).Should(Succeed())
	g.Expect(run("rollout", "status", "deployment/shop-web", "--timeout=90s")).To(ContainSubstring("successfully rolled out"))

	// What Lodestar wrote for the tools is never placed.
	w := &workv1alpha1.Work{}
	g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: names.ClusterNamespace(fullMember), Name: names.Work(ns, "shop")}, w)).To(Succeed())
	for _, m := range w.Spec.Workload.Manifests {
		g.Expect(string(m.Raw)).NotTo(ContainSubstring(`"kind":"ReplicaSet"`))
	}
	for _, c := range running {
		sets = &appsv1.ReplicaSetList{}
		g.Expect(members[c].Client.List(ctx, sets, client.InNamespace(ns), client.HasLabels{fleetview.Label})).To(Succeed())
		g.Expect(sets.Items).To(BeEmpty())
	}

	// Uninstall: the Placement goes and takes the app off the cluster.
	helm("uninstall", "shop", "--wait", "--timeout", "3m")
	g.Eventually(func() bool {
		err := hubCP.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop"}, &placementv1alpha1.Placement{})
		return apierrors.IsNotFound(err)
	}).Should(BeTrue())
	for _, c := range running {
		g.Eventually(func() bool {
			err := members[c].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-web"}, &appsv1.Deployment{})
			return apierrors.IsNotFound(err)
		}).Should(BeTrue())
		g.Expect(members[c].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-web"}, &corev1.Service{})).NotTo(Succeed())
	}
	g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-smoke-test"}, &batchv1.Job{})).NotTo(Succeed(),
		"helm deleted the hook Job once it succeeded")
}

// kstatus (sigs.k8s.io/cli-utils, as Flux, kpt and helm v4 read status) reads
// a placed Deployment, StatefulSet and Job (on two members), their Placement
// and a ClusterPlacement Current once the fleet runs them; a Placement whose
// cluster runs nothing yet is InProgress (and so is its Deployment), and one
// that cannot be carried out (no ClusterSetBinding) is Failed. Argo CD, with
// the health checks of docs/examples/hub-tools/argocd-cm.yaml, reads the same
// Placements Healthy, Progressing and Degraded.
func TestKstatusAndArgoCDReadTheFleet(t *testing.T) {
	extraMembers(t)
	g := NewWithT(t)
	ctx := t.Context()
	ns := newTenant(t, placementv1alpha1.DefaultClusterSet, auxSet)
	placementsGoAtEnd(t, ns)
	createYAML(t, ns, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx:1.27}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  replicas: 2
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: postgres:17}]}
---
`+migrateJob+`---
apiVersion: placement.lodestar.dev/v1alpha1
kind: Placement
metadata: {name: app}
spec:
  resourceSelectors:
    - {group: apps, version: v1, kind: Deployment, name: web}
    - {group: apps, version: v1, kind: StatefulSet, name: db}
    - {group: batch, version: v1, kind: Job, name: migrate}
  scheduling: {clusterNames: [`+fullMember+`, `+member3+`]}
  reporting: {reflection: Aggregate}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: idle}
spec:
  selector: {matchLabels: {app: idle}}
  template:
    metadata: {labels: {app: idle}}
    spec: {containers: [{name: idle, image: nginx:1.27}]}
---
apiVersion: placement.lodestar.dev/v1alpha1
kind: Placement
metadata: {name: idle}
spec:
  resourceSelectors: [{group: apps, version: v1, kind: Deployment, name: idle}]
  scheduling: {clusterNames: [`+member2+`]}
  reporting: {reflection: Aggregate}
`)
	unbound := newTenant(t) // no ClusterSetBinding
	placementsGoAtEnd(t, unbound)
	createYAML(t, unbound, `
apiVersion: placement.lodestar.dev/v1alpha1
kind: Placement
metadata: {name: nowhere}
spec:
  resourceSelectors: [{version: v1, kind: ConfigMap}]
  scheduling: {clusterSelector: {}}
`)
	name := "kstatus-" + ns
	cp := &unstructured.Unstructured{}
	g.Expect(yaml.Unmarshal([]byte(`
apiVersion: placement.lodestar.dev/v1alpha1
kind: ClusterPlacement
metadata: {name: `+name+`}
spec:
  resourceSelectors: [{group: rbac.authorization.k8s.io, version: v1, kind: ClusterRole, name: `+name+`}]
  scheduling: {clusterSelector: {matchLabels: {env: production}}}
`), &cp.Object)).To(Succeed())
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}}
	g.Expect(hubCP.Client.Create(ctx, role)).To(Succeed())
	g.Expect(hubCP.Client.Create(ctx, cp)).To(Succeed())
	t.Cleanup(func() {
		_ = hubCP.Client.Delete(context.Background(), cp)
		_ = hubCP.Client.Delete(context.Background(), role)
	})

	read := func(g Gomega, apiVersion, kind, namespace, name string) *kstatus.Result {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u)).To(Succeed())
		res, err := kstatus.Compute(u)
		g.Expect(err).NotTo(HaveOccurred())
		return res
	}
	placements := "placement.lodestar.dev/v1alpha1"
	for _, obj := range [][4]string{
		{"apps/v1", "Deployment", ns, "web"}, {"apps/v1", "StatefulSet", ns, "db"}, {"batch/v1", "Job", ns, "migrate"},
		{placements, "Placement", ns, "app"}, {placements, "ClusterPlacement", "", name},
	} {
		g.Eventually(func(g Gomega) {
			res := read(g, obj[0], obj[1], obj[2], obj[3])
			g.Expect(res.Status).To(Equal(kstatus.CurrentStatus), "%s %s: %s", obj[1], obj[3], res.Message)
		}).Should(Succeed())
	}
	g.Eventually(func(g Gomega) {
		res := read(g, placements, "Placement", unbound, "nowhere")
		g.Expect(res.Status).To(Equal(kstatus.FailedStatus), res.Message)
		g.Expect(res.Message).To(ContainSubstring("ClusterSetBinding"))
	}).Should(Succeed())

	scripts, err := argoHealthScripts()
	g.Expect(err).NotTo(HaveOccurred())
	argo := func(g Gomega, kind, namespace, name string) (string, string) {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(placements)
		u.SetKind(kind)
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u)).To(Succeed())
		status, msg, err := argoHealth(scripts[kind], u)
		g.Expect(err).NotTo(HaveOccurred())
		return status, msg
	}
	for _, want := range [][4]string{
		{"Placement", ns, "app", "Healthy"}, {"ClusterPlacement", "", name, "Healthy"},
		{"Placement", unbound, "nowhere", "Degraded"}, {"Placement", ns, "idle", "Progressing"},
	} {
		g.Eventually(func(g Gomega) {
			status, msg := argo(g, want[0], want[1], want[2])
			g.Expect(status).To(Equal(want[3]), "%s %s: %s", want[0], want[2], msg)
		}).Should(Succeed())
	}
	// member-2 runs no controllers: its copy never becomes available.
	g.Eventually(func(g Gomega) {
		c := placementCondition(g, t, client.ObjectKey{Namespace: ns, Name: "idle"}, settled.ReconcilingCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.ObservedGeneration).To(BeEquivalentTo(1))
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(read(g, placements, "Placement", ns, "idle").Status).To(Equal(kstatus.InProgressStatus))
		g.Expect(read(g, "apps/v1", "Deployment", ns, "idle").Status).NotTo(Equal(kstatus.CurrentStatus))
	}, 5*time.Second, time.Second).Should(Succeed())
}
