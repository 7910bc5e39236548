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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/fleetview"
	"github.com/lodestar-dev/lodestar/internal/names"
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

// The tools' own wait and rollout logic works on the hub: helm (v3, the
// Makefile's) installs and upgrades the example chart with --wait
// --wait-for-jobs and returns once the fleet runs it; kubectl rollout status,
// history, undo and restart and kubectl wait work on the hub's Deployment;
// the ReplicaSets Lodestar writes for them are never placed; helm uninstall
// takes the app off the members.
func TestHelmAndKubectlRolloutOnTheHub(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	helmBin := os.Getenv(testenv.HelmEnv)
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
	onMember := func(g Gomega) *appsv1.Deployment {
		d := &appsv1.Deployment{}
		g.Expect(members[fullMember].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-web"}, d)).To(Succeed())
		return d
	}
	image := func(g Gomega) string { return onMember(g).Spec.Template.Spec.Containers[0].Image }

	// Install: helm returns once the Deployment runs on the cluster and the
	// hook Job completed there.
	helm("install", "shop", shopChart, "--wait", "--wait-for-jobs", "--timeout", "3m",
		"--set", "clusterSelector.matchLabels.env=production")
	g.Expect(image(g)).To(Equal("nginx:1.27"))
	g.Expect(onMember(g).Status.AvailableReplicas).To(BeEquivalentTo(2), "helm waited for the fleet")
	g.Expect(run("rollout", "status", "deployment/shop-web", "--timeout=60s")).To(ContainSubstring("successfully rolled out"))
	g.Expect(run("wait", "--for=condition=Available", "deployment/shop-web", "--timeout=60s")).To(ContainSubstring("condition met"))
	sets := &appsv1.ReplicaSetList{}
	g.Expect(hubCP.Client.List(ctx, sets, client.InNamespace(ns))).To(Succeed())
	g.Expect(sets.Items).To(ConsistOf(HaveField("ObjectMeta.Labels", HaveKeyWithValue(fleetview.Label, "shop-web"))))
	g.Expect(sets.Items[0].Status.ReadyReplicas).To(BeEquivalentTo(2))

	// Upgrade to a new image: helm waits for the new ReplicaSet the hub
	// shows once the cluster runs it.
	helm("upgrade", "shop", shopChart, "--wait", "--wait-for-jobs", "--timeout", "3m",
		"--set", "clusterSelector.matchLabels.env=production", "--set", "image=nginx:1.28")
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
		g.Expect(onMember(g).Spec.Template.Annotations).To(HaveKey("kubectl.kubernetes.io/restartedAt"))
	}).Should(Succeed())
	g.Expect(run("rollout", "status", "deployment/shop-web", "--timeout=90s")).To(ContainSubstring("successfully rolled out"))

	// What Lodestar wrote for the tools is never placed.
	w := &workv1alpha1.Work{}
	g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: names.ClusterNamespace(fullMember), Name: names.Work(ns, "shop")}, w)).To(Succeed())
	for _, m := range w.Spec.Workload.Manifests {
		g.Expect(string(m.Raw)).NotTo(ContainSubstring(`"kind":"ReplicaSet"`))
	}
	sets = &appsv1.ReplicaSetList{}
	g.Expect(members[fullMember].Client.List(ctx, sets, client.InNamespace(ns), client.HasLabels{fleetview.Label})).To(Succeed())
	g.Expect(sets.Items).To(BeEmpty())

	// Uninstall: the Placement goes and takes the app off the cluster.
	helm("uninstall", "shop", "--wait", "--timeout", "3m")
	g.Eventually(func() bool {
		err := hubCP.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop"}, &placementv1alpha1.Placement{})
		return apierrors.IsNotFound(err)
	}).Should(BeTrue())
	g.Eventually(func() bool {
		err := members[fullMember].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-web"}, &appsv1.Deployment{})
		return apierrors.IsNotFound(err)
	}).Should(BeTrue())
	g.Expect(members[fullMember].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-web"}, &corev1.Service{})).NotTo(Succeed())
	g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-smoke-test"}, &batchv1.Job{})).NotTo(Succeed(),
		"helm deleted the hook Job once it succeeded")
}
