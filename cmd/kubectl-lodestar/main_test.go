package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/tools/clientcmd"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/claims"
	"github.com/lodestar-dev/lodestar/internal/fleet"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/scheduling"
	"github.com/lodestar-dev/lodestar/internal/scheme"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

var (
	hubCP         *testenv.ControlPlane
	hubKubeconfig string
)

func TestMain(m *testing.M) {
	testenv.SetGomegaDefaults()
	os.Exit(testenv.RunWithHub(m, scheme.Hub(), func(cp *testenv.ControlPlane) (func(), error) {
		hubCP = cp
		dir, err := os.MkdirTemp("", "kubectl-lodestar-")
		if err != nil {
			return nil, err
		}
		hubKubeconfig = filepath.Join(dir, "hub.kubeconfig")
		return func() { _ = os.RemoveAll(dir) }, testenv.WriteKubeconfig(cp.Config, "hub", hubKubeconfig)
	}))
}

// kubectlLodestar runs the plugin with the hub's kubeconfig and returns its output.
func kubectlLodestar(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), append(args, "--kubeconfig", hubKubeconfig), &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

// join joins name as a platform admin does: with a cluster ID, the agent's
// kubeconfig to a file.
func join(t *testing.T, name string, extra ...string) (string, string, error) {
	t.Helper()
	args := []string{"join", name, "--cluster-id", "id-" + name, "--output", filepath.Join(t.TempDir(), name+".kubeconfig")}
	return kubectlLodestar(t, append(args, extra...)...)
}

func TestJoinWritesTheAgentKubeconfig(t *testing.T) {
	g := NewWithT(t)
	out := filepath.Join(t.TempDir(), "agent.kubeconfig")
	_, stderr, err := kubectlLodestar(t, "join", "edge-1", "--label", "env=edge", "--label", "site=42", "--cluster-id", "id-edge-1", "--output", out)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stderr).To(ContainSubstring("lodestar-agent --cluster-name edge-1"))
	stat, err := os.Stat(out)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stat.Mode().Perm()).To(Equal(os.FileMode(0o600)))

	profile := &cpv1alpha1.ClusterProfile{}
	g.Expect(hubCP.Client.Get(t.Context(), client.ObjectKey{Namespace: placementv1alpha1.DefaultClusterSet, Name: "edge-1"}, profile)).To(Succeed())
	g.Expect(profile.Labels).To(HaveKeyWithValue("env", "edge"))
	g.Expect(profile.Labels).To(HaveKeyWithValue("site", "42"))

	// The kubeconfig is the agent's identity: its own namespace, nothing else.
	cfg, err := clientcmd.BuildConfigFromFlags("", out)
	g.Expect(err).NotTo(HaveOccurred())
	c, err := client.New(cfg, client.Options{Scheme: scheme.Hub()})
	g.Expect(err).NotTo(HaveOccurred())
	err = c.Get(t.Context(), client.ObjectKey{Namespace: names.ClusterNamespace("edge-1"), Name: placementv1alpha1.AgentLeaseName}, &coordinationv1.Lease{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
	err = c.List(t.Context(), &cpv1alpha1.ClusterProfileList{})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)

	// Printed to standard output only when asked (--output -); joining again
	// with the same ID is fine.
	stdout, _, err := kubectlLodestar(t, "join", "--label", "env=edge", "edge-1", "--cluster-id", "id-edge-1", "--output", "-")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = clientcmd.Load([]byte(stdout))
	g.Expect(err).NotTo(HaveOccurred())
}

// join never prints a live agent token unless asked, and never records a
// cluster without its ID unless told to: on earlier mains `join <name>` did
// both silently.
func TestJoinAsksForAnIdentityAndAFile(t *testing.T) {
	g := NewWithT(t)
	stdout, _, err := kubectlLodestar(t, "join", "edge-5", "--cluster-id", "id-edge-5")
	g.Expect(err).To(MatchError(ContainSubstring("--output is required: the agent's hub kubeconfig holds a live token")))
	g.Expect(stdout).To(BeEmpty())
	_, _, err = kubectlLodestar(t, "join", "edge-5", "--output", filepath.Join(t.TempDir(), "k"))
	g.Expect(err).To(MatchError(ContainSubstring("give --member-kubeconfig or --cluster-id, or --allow-unverified-identity")))
	p := &cpv1alpha1.ClusterProfile{}
	err = hubCP.Client.Get(t.Context(), client.ObjectKey{Namespace: placementv1alpha1.DefaultClusterSet, Name: "edge-5"}, p)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "nothing registered: %v", err)

	_, stderr, err := kubectlLodestar(t, "join", "edge-5", "--allow-unverified-identity", "--output", filepath.Join(t.TempDir(), "k"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stderr).To(ContainSubstring("Warning: cluster edge-5 joined without a cluster ID"))
}

func TestJoinRefusesATakenName(t *testing.T) {
	g := NewWithT(t)
	_, _, err := kubectlLodestar(t, "join", "edge-2", "--cluster-id", "aaa", "--output", "-")
	g.Expect(err).NotTo(HaveOccurred())
	_, _, err = kubectlLodestar(t, "join", "edge-2", "--cluster-id", "bbb", "--output", "-")
	g.Expect(fleet.IsConflict(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring(`cluster "edge-2" is registered for the member with cluster ID aaa`))
}

// Join refuses reserved names and a cluster namespace that exists without
// Lodestar's mark (someone else's, which unjoin would delete).
func TestJoinRefusesReservedNamesAndNamespaces(t *testing.T) {
	g := NewWithT(t)
	_, _, err := join(t, "placements")
	g.Expect(err).To(MatchError(ContainSubstring(`cluster name "placements" is reserved`)))
	g.Expect(hubCP.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names.ClusterNamespace("squatted")}})).To(Succeed())
	_, _, err = join(t, "squatted")
	g.Expect(fleet.IsConflict(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("namespace lodestar-cluster-squatted exists and is not Lodestar's"))
	err = hubCP.Client.Get(t.Context(), client.ObjectKey{Namespace: placementv1alpha1.DefaultClusterSet, Name: "squatted"}, &cpv1alpha1.ClusterProfile{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no ClusterProfile for a refused join: %v", err)

	_, _, err = join(t, "marked")
	g.Expect(err).NotTo(HaveOccurred())
	ns := &corev1.Namespace{}
	g.Expect(hubCP.Client.Get(t.Context(), client.ObjectKey{Name: names.ClusterNamespace("marked")}, ns)).To(Succeed())
	g.Expect(ns.Labels).To(HaveKeyWithValue(placementv1alpha1.ReservedNamespaceLabel, placementv1alpha1.ReservedForCluster))
}

func TestCordonAndUncordon(t *testing.T) {
	g := NewWithT(t)
	_, _, err := join(t, "edge-3")
	g.Expect(err).NotTo(HaveOccurred())
	taints := func() []placementv1alpha1.Taint {
		p := &cpv1alpha1.ClusterProfile{}
		g.Expect(hubCP.Client.Get(t.Context(), client.ObjectKey{Namespace: placementv1alpha1.DefaultClusterSet, Name: "edge-3"}, p)).To(Succeed())
		ts, err := scheduling.ParseTaints(p.Annotations[placementv1alpha1.TaintsAnnotation])
		g.Expect(err).NotTo(HaveOccurred())
		return ts
	}
	stdout, _, err := kubectlLodestar(t, "cordon", "edge-3")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stdout).To(ContainSubstring("cordoned"))
	g.Expect(taints()).To(ConsistOf(placementv1alpha1.Taint{Key: placementv1alpha1.CordonTaintKey, Effect: placementv1alpha1.TaintNoSchedule}))
	_, _, err = kubectlLodestar(t, "uncordon", "edge-3")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(taints()).To(BeEmpty())

	_, _, err = kubectlLodestar(t, "cordon", "no-such-cluster")
	g.Expect(err).To(MatchError(ContainSubstring("not found")))

	// Custom taints, as kubectl taint sets them on nodes.
	_, _, err = kubectlLodestar(t, "taint", "edge-3", "gpu=true:NoSchedule", "maintenance:NoExecute")
	g.Expect(err).NotTo(HaveOccurred())
	got := taints()
	g.Expect(got).To(HaveLen(2))
	g.Expect(got[0]).To(Equal(placementv1alpha1.Taint{Key: "gpu", Value: "true", Effect: placementv1alpha1.TaintNoSchedule}))
	g.Expect(got[1].Key).To(Equal("maintenance"))
	g.Expect(got[1].TimeAdded).NotTo(BeEmpty(), "a NoExecute taint starts tolerationSeconds")
	_, _, err = kubectlLodestar(t, "taint", "edge-3", "gpu=false:NoSchedule")
	g.Expect(err).To(MatchError(ContainSubstring("cluster edge-3 already has taint gpu=true:NoSchedule; --overwrite changes it")))
	_, _, err = kubectlLodestar(t, "taint", "edge-3", "gpu=false:NoSchedule", "--overwrite")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(taints()[0].Value).To(Equal("false"))
	_, _, err = kubectlLodestar(t, "cordon", "edge-3")
	g.Expect(err).NotTo(HaveOccurred())
	_, _, err = kubectlLodestar(t, "taint", "edge-3", "gpu-", "maintenance:NoExecute-")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(taints()).To(ConsistOf(HaveField("Key", placementv1alpha1.CordonTaintKey)), "other taints stay")
	_, _, err = kubectlLodestar(t, "taint", "edge-3", "gpu-")
	g.Expect(err).To(MatchError(ContainSubstring("cluster edge-3 has no taint gpu to remove")))
	for arg, msg := range map[string]string{
		"gpu=true":             "a taint to add is key[=value]:Effect",
		"gpu=true:Sometimes":   `effect "Sometimes" is not NoSchedule`,
		"bad key!:NoSchedule":  `key "bad key!"`,
		"gpu=true:NoSchedule-": "a taint to remove is key or key:Effect, without a value",
	} {
		_, _, err = kubectlLodestar(t, "taint", "edge-3", arg)
		g.Expect(err).To(MatchError(ContainSubstring(msg)), arg)
	}
	_, _, err = kubectlLodestar(t, "uncordon", "edge-3")
	g.Expect(err).NotTo(HaveOccurred())
}

func TestUsageErrors(t *testing.T) {
	g := NewWithT(t)
	_, _, err := kubectlLodestar(t, "frobnicate", "x")
	g.Expect(err).To(MatchError(ContainSubstring(`unknown command "frobnicate"`)))
	_, _, err = kubectlLodestar(t, "cordon")
	g.Expect(err).To(MatchError(ContainSubstring("takes one cluster name")))
	_, _, err = join(t, "x", "--token-ttl", "1m")
	g.Expect(err).To(MatchError(ContainSubstring("at least 10m")))
	var stdout bytes.Buffer
	g.Expect(run(context.Background(), nil, &stdout, &stdout)).To(Succeed())
	g.Expect(stdout.String()).To(ContainSubstring("kubectl lodestar operates a Lodestar fleet"))
	g.Expect(stdout.String()).To(ContainSubstring("join"))
	_, _, err = kubectlLodestar(t, "rollout", "restart", "web")
	g.Expect(err).To(MatchError(ContainSubstring(`unknown command "restart" for "kubectl-lodestar rollout"`)))
	_, _, err = kubectlLodestar(t, "get", "placements")
	g.Expect(err).To(MatchError(ContainSubstring(`unknown command "placements"`)))
}

func TestDrainAndUnjoin(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	_, _, err := join(t, "edge-4")
	g.Expect(err).NotTo(HaveOccurred())
	key := client.ObjectKey{Namespace: placementv1alpha1.DefaultClusterSet, Name: "edge-4"}
	profile := &cpv1alpha1.ClusterProfile{}

	stdout, _, err := kubectlLodestar(t, "drain", "edge-4")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stdout).To(ContainSubstring("draining"))
	g.Expect(hubCP.Client.Get(ctx, key, profile)).To(Succeed())
	taints, err := scheduling.ParseTaints(profile.Annotations[placementv1alpha1.TaintsAnnotation])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(taints).To(ConsistOf(And(HaveField("Key", placementv1alpha1.DrainTaintKey), HaveField("Effect", placementv1alpha1.TaintNoExecute), HaveField("TimeAdded", Not(BeEmpty())))))

	// A copy whose claims hold it there (as its agent reports them on its Work)
	// is listed, and stays unless the drain includes stateful copies.
	held := heldWork(t, "edge-4")
	stdout, _, err = kubectlLodestar(t, "drain", "edge-4")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stdout).To(ContainSubstring("1 Placement stays on edge-4, held by their claims"))
	g.Expect(stdout).To(ContainSubstring(held + "/db: StatefulSet " + held + "/db on edge-4 has 2 bound ReadWriteOnce claims (data-db-0..1)"))
	stdout, _, err = kubectlLodestar(t, "drain", "edge-4", "--include-stateful")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stdout).To(ContainSubstring("1 Placement moves with their claims left behind on edge-4"))
	g.Expect(hubCP.Client.Get(ctx, key, profile)).To(Succeed())
	taints, err = scheduling.ParseTaints(profile.Annotations[placementv1alpha1.TaintsAnnotation])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(taints).To(ConsistOf(And(HaveField("Key", placementv1alpha1.DrainTaintKey), HaveField("Value", placementv1alpha1.DrainStatefulValue))))

	_, _, err = kubectlLodestar(t, "uncordon", "edge-4")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hubCP.Client.Get(ctx, key, profile)).To(Succeed())
	g.Expect(profile.Annotations).NotTo(HaveKey(placementv1alpha1.TaintsAnnotation))

	// Unjoin --orphan marks the cluster's Works, then deletes the ClusterProfile;
	// without a hub manager here nothing finishes the cleanup, so it does not wait.
	w := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: names.ClusterNamespace("edge-4")}}
	g.Expect(hubCP.Client.Create(ctx, w)).To(Succeed())
	_, _, err = kubectlLodestar(t, "unjoin", "edge-4", "--orphan", "--wait", "0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(w), w)).To(Succeed())
	g.Expect(w.Annotations).To(HaveKeyWithValue(lodestarworkv1alpha1.DeletionPolicyAnnotation, lodestarworkv1alpha1.DeletionPolicyOrphan))
	g.Expect(hubCP.Client.Get(ctx, key, profile)).To(Succeed())
	g.Expect(profile.DeletionTimestamp.IsZero()).To(BeFalse(), "deleted, held by the cleanup finalizer")
	g.Expect(profile.Finalizers).To(ContainElement(placementv1alpha1.ClusterCleanupFinalizer))

	_, _, err = kubectlLodestar(t, "unjoin", "edge-4", "--wait", "1s")
	g.Expect(err).To(MatchError(ContainSubstring("still leaving after 1s")))
}

// A stolen agent token is cut off with one command: after `revoke`, the old
// token is refused (and so is renewing it), and a new join works again.
func TestRevokeCutsOffTheAgentsTokens(t *testing.T) {
	g := NewWithT(t)
	old := filepath.Join(t.TempDir(), "old.kubeconfig")
	_, _, err := kubectlLodestar(t, "join", "edge-9", "--cluster-id", "id-edge-9", "--output", old)
	g.Expect(err).NotTo(HaveOccurred())
	asAgent := func(path string) client.Client {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		g.Expect(err).NotTo(HaveOccurred())
		c, err := client.New(cfg, client.Options{Scheme: scheme.Hub()})
		g.Expect(err).NotTo(HaveOccurred())
		return c
	}
	works := func(c client.Client) error {
		return c.List(t.Context(), &workv1alpha1.WorkList{}, client.InNamespace(names.ClusterNamespace("edge-9")))
	}
	g.Expect(works(asAgent(old))).To(Succeed(), "the agent's token works")

	stdout, _, err := kubectlLodestar(t, "revoke", "edge-9")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stdout).To(ContainSubstring("every hub token of its agent is revoked"))
	// The API server may hold a token's authentication for a few seconds.
	g.Eventually(func(g Gomega) {
		g.Expect(apierrors.IsUnauthorized(works(asAgent(old)))).To(BeTrue(), "the old token is refused")
		_, err := fleet.AgentConfig(t.Context(), configOf(g, old), "edge-9", time.Hour)
		g.Expect(apierrors.IsUnauthorized(err)).To(BeTrue(), "the old token cannot renew itself: %v", err)
	}).Should(Succeed())

	fresh := filepath.Join(t.TempDir(), "new.kubeconfig")
	_, _, err = kubectlLodestar(t, "join", "edge-9", "--cluster-id", "id-edge-9", "--output", fresh)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() error { return works(asAgent(fresh)) }).Should(Succeed(), "a new join reconnects")

	_, _, err = kubectlLodestar(t, "revoke", "never-joined")
	g.Expect(err).To(MatchError(ContainSubstring("cluster never-joined has no agent identity on this hub")))
}

func configOf(g Gomega, path string) *rest.Config {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	g.Expect(err).NotTo(HaveOccurred())
	return cfg
}

// kubectl completes `kubectl lodestar ...` by running kubectl_complete-lodestar
// with the words typed so far and an empty one to complete: the binary, called
// by that name (make build links it beside kubectl-lodestar), answers as cobra's
// completion does.
func TestKubectlPluginCompletion(t *testing.T) {
	g := NewWithT(t)
	g.Expect(argsFor("/usr/local/bin/"+CompletionName, []string{"rollout", ""})).To(Equal([]string{"__complete", "rollout", ""}))
	g.Expect(argsFor("/usr/local/bin/kubectl-lodestar", []string{"rollout"})).To(Equal([]string{"rollout"}))

	bin, err := testenv.Binary(CompletionName)
	g.Expect(err).NotTo(HaveOccurred())
	out, err := exec.CommandContext(t.Context(), bin, "rollout", "").Output()
	g.Expect(err).NotTo(HaveOccurred())
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	g.Expect(lines).To(ContainElements(HavePrefix("approve"), HavePrefix("status"), HavePrefix("undo")))
	g.Expect(lines[len(lines)-1]).To(HavePrefix(":"), "cobra's directive, which kubectl reads")

	// Through kubectl itself, as `source <(kubectl completion bash)` asks it:
	// kubectl finds the link on the PATH.
	kubectl := exec.CommandContext(t.Context(), filepath.Join(os.Getenv(testenv.AssetsEnv), "kubectl"), "__complete", "lodestar", "")
	kubectl.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err = kubectl.Output()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.Split(string(out), "\n")).To(ContainElements(HavePrefix("cordon"), HavePrefix("render"), HavePrefix("why")))
}

// heldWork makes a Placement db (in a namespace of its own, returned) whose
// Work on cluster reports, as an agent does, a StatefulSet with two bound
// ReadWriteOnce claims.
func heldWork(t *testing.T, cluster string) string {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	ns := "held-" + rand.String(5)
	g.Expect(hubCP.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	p := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns}, Spec: placementv1alpha1.PlacementSpec{
		ResourceSelectors: []placementv1alpha1.ResourceSelector{{Group: "apps", Version: "v1", Kind: "StatefulSet", Name: "db"}}}}
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	w := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: names.Work(ns, "db"), Namespace: names.ClusterNamespace(cluster),
		Labels: map[string]string{placementv1alpha1.PlacementNameLabel: "db", placementv1alpha1.PlacementNamespaceLabel: ns}}}
	g.Expect(hubCP.Client.Create(ctx, w)).To(Succeed())
	bound := func(name string) claims.Claim {
		return claims.Claim{Name: name, Phase: claims.PhaseBound, AccessModes: []string{claims.ReadWriteOnce}}
	}
	c := claims.Condition(claims.NewReport([]claims.Claim{bound("data-db-0"), bound("data-db-1")}), 4096)
	c.LastTransitionTime = metav1.Now()
	w.Status.Conditions = []metav1.Condition{}
	w.Status.ManifestConditions = []workv1alpha1.ManifestCondition{{
		Identifier: workv1alpha1.ResourceIdentifier{Group: "apps", Version: "v1", Kind: "StatefulSet", Resource: "statefulsets", Namespace: ns, Name: "db"},
		Conditions: []metav1.Condition{c},
	}}
	g.Expect(hubCP.Client.Status().Update(ctx, w)).To(Succeed())
	return ns
}
