package charts

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	debugv1alpha1 "github.com/lodestar-dev/lodestar/api/debug/v1alpha1"
	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/hub"
	"github.com/lodestar-dev/lodestar/internal/debugapi"
	"github.com/lodestar-dev/lodestar/internal/fleet"
	"github.com/lodestar-dev/lodestar/internal/scheme"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

const releaseNamespace = testenv.ReleaseNamespace

// The package's Gomega defaults, sized for a busy CI machine (testenv).
func init() {
	testenv.SetGomegaDefaults()
}

// serviceAccountConfig returns a connection as a ServiceAccount of the charts
// (in the release namespace).
func serviceAccountConfig(t *testing.T, admin *rest.Config, name string) *rest.Config {
	t.Helper()
	cfg, err := testenv.ServiceAccountConfig(t.Context(), admin, releaseNamespace, name, time.Hour)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return cfg
}

// startFunc starts a control plane without CRDs (testenv).
type startFunc func(string, *runtime.Scheme) (*testenv.ControlPlane, error)

// chartedFleet starts a hub with startHub and a member with startMember (with
// or without their controller managers, no CRDs), writes their kubeconfigs as
// dir/hub and dir/member, and installs the hub chart into the hub. The chart's
// debug API reaches the hub manager at debugAddr (an ExternalName Service for
// localhost in place of the chart's): the hub manager must serve it there, or
// the hub's API server finds an APIService unavailable (and, as with any
// aggregated API, cannot finish deleting namespaces).
func chartedFleet(t *testing.T, startHub, startMember startFunc) (hubCP, memberCP *testenv.ControlPlane, dir, debugAddr string) {
	t.Helper()
	g := NewWithT(t)
	hubCP, err := startHub("hub", scheme.Hub())
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = hubCP.Stop() })
	memberCP, err = startMember("member", scheme.Agent())
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = memberCP.Stop() })
	dir = t.TempDir()
	g.Expect(testenv.WriteKubeconfig(hubCP.Config, "hub", filepath.Join(dir, "hub"))).To(Succeed())
	g.Expect(testenv.WriteKubeconfig(memberCP.Config, "member", filepath.Join(dir, "member"))).To(Succeed())
	out, err := helm(t, "install", "lodestar-hub", filepath.Join(chartsDir, "lodestar-hub"), "--kubeconfig", filepath.Join(dir, "hub"),
		"--namespace", releaseNamespace, "--create-namespace")
	g.Expect(err).NotTo(HaveOccurred(), out)
	// The chart's placement-writer policy admits Placements once the API
	// server has their CRD's schema, seconds after the install.
	g.Expect(testenv.PlacementsAdmitted(t.Context(), hubCP.Client)).To(Succeed())
	debugAddr = freeAddress(t)
	g.Expect(testenv.InstallDebugAPI(t.Context(), hubCP.Client, releaseNamespace, testenv.Port(debugAddr))).To(Succeed())
	return hubCP, memberCP, dir, debugAddr
}

// start runs a manager until the test ends.
func start(t *testing.T, mgr ctrl.Manager) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// The charts installed with helm into API servers without anything of ours (no
// CRDs, no RBAC) are all the hub manager and the agent need: both run as the
// charts' ServiceAccounts, the agent with narrow member RBAC (no cluster-admin),
// and a Deployment placed on the full member (controller manager, scheduler, a
// kwok node) runs there and is reported Available on the hub. The hub is an
// ordinary cluster too (controller manager, scheduler, a node): with the chart's
// defaults the placed Deployment starts no pod on it; with refuseTenantPods off,
// it does.
func TestChartsInstallAndRun(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	hubCP, memberCP, dir, debugAddr := chartedFleet(t, testenv.StartFullHub, testenv.StartFullEmpty)
	hubKubeconfig, memberKubeconfig := filepath.Join(dir, "hub"), filepath.Join(dir, "member")

	// The hub manager as the chart's ServiceAccount, electing a leader as the chart
	// configures it.
	hubSA := serviceAccountConfig(t, hubCP.Config, "lodestar-hub")
	mgr, err := ctrl.NewManager(hubSA, hub.ManagerOptions(ctrl.Options{
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		LeaderElection: true, LeaderElectionID: "lodestar-hub", LeaderElectionNamespace: releaseNamespace,
	}, ""))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hub.Setup(mgr, hub.Options{})).To(Succeed())
	_, err = debugapi.Add(mgr, debugapi.Options{BindAddress: debugAddr, Namespace: releaseNamespace, ReplicaID: "hub-0"})
	g.Expect(err).NotTo(HaveOccurred())
	start(t, mgr)

	// The member joins (an operator action, as admin on the hub) and installs the
	// agent chart with the kubeconfig join wrote.
	joined, err := fleet.Join(ctx, hubCP.Config, hubCP.Client, fleet.JoinOptions{Name: "edge-1", Labels: map[string]string{"env": "edge"}, TokenTTL: time.Hour})
	g.Expect(err).NotTo(HaveOccurred())
	joinKubeconfig := filepath.Join(dir, "edge-1.kubeconfig")
	g.Expect(testenv.WriteKubeconfig(joined, "hub", joinKubeconfig)).To(Succeed())
	out, err := helm(t, "install", "lodestar-agent", filepath.Join(chartsDir, "lodestar-agent"), "--kubeconfig", memberKubeconfig,
		"--namespace", releaseNamespace, "--create-namespace", "--set", "clusterName=edge-1",
		"--set-file", "hubKubeconfig.kubeconfig="+joinKubeconfig,
		// Narrow member RBAC: only what the agent needs itself, plus the placed kinds.
		"--set", "memberRBAC.clusterAdmin=false",
		"--set", "memberRBAC.rules[0].apiGroups={,apps}", "--set", "memberRBAC.rules[0].resources={configmaps,deployments}",
		"--set", "memberRBAC.rules[0].verbs={get,list,watch,create,update,patch,delete}")
	g.Expect(err).NotTo(HaveOccurred(), out)
	secret := &corev1.Secret{}
	g.Expect(memberCP.Client.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: "lodestar-hub-kubeconfig"}, secret)).To(Succeed())

	// The agent runs as the chart installed it: its arguments, configuration file
	// (the default member policy) and hub kubeconfig from the release, as its
	// ServiceAccount; only its ports are not the chart's.
	chart, err := testenv.FromDeployment(ctx, memberCP.Client, client.ObjectKey{Namespace: releaseNamespace, Name: "lodestar-agent"}, "agent", filepath.Join(dir, "agent"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(chart.Args).To(ContainElement(HavePrefix("--config=" + filepath.Join(dir, "agent", "config"))))
	g.Expect(testenv.WriteKubeconfig(serviceAccountConfig(t, memberCP.Config, "lodestar-agent"), "member", filepath.Join(dir, "agent.kubeconfig"))).To(Succeed())
	chart.Set("kubeconfig", filepath.Join(dir, "agent.kubeconfig"))
	chart.Set("metrics-bind-address", "0")
	chart.Set("health-probe-bind-address", "0")
	runBinary(t, "lodestar-agent", chart.Env, chart.Args...)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}
	g.Expect(hubCP.Client.Create(ctx, ns)).To(Succeed())
	g.Expect(fleet.BindClusterSet(ctx, hubCP.Client, ns.Name, placementv1alpha1.DefaultClusterSet)).To(Succeed())
	// Bound, the namespace is a tenant's before its workloads arrive.
	g.Eventually(func(g Gomega) {
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(ns), ns)).To(Succeed())
		g.Expect(ns.Labels).To(HaveKeyWithValue(placementv1alpha1.TenantNamespaceLabel, "true"))
	}).Should(Succeed())
	g.Expect(hubCP.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "settings"}, Data: map[string]string{"k": "v"}})).To(Succeed())
	labels := map[string]string{"app": "shop"}
	g.Expect(hubCP.Client.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "shop"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "shop", Image: "nginx:1.27"}}},
			},
		},
	})).To(Succeed())
	p := &placementv1alpha1.Placement{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "settings"},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{
				{Version: "v1", Kind: "ConfigMap", Name: "settings"},
				{Group: "apps", Version: "v1", Kind: "Deployment", Name: "shop"},
			},
			Scheduling: placementv1alpha1.Scheduling{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "edge"}}},
		},
	}
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		c := meta.FindStatusCondition(got.Status.Conditions, placementv1alpha1.AvailableCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
		g.Expect(got.Status.AvailableClusters).To(HaveValue(BeEquivalentTo(1)))
		cm := &corev1.ConfigMap{}
		g.Expect(memberCP.Client.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "settings"}, cm)).To(Succeed())
		deploy := &appsv1.Deployment{}
		g.Expect(memberCP.Client.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "shop"}, deploy)).To(Succeed())
		g.Expect(deploy.Status.AvailableReplicas).To(BeEquivalentTo(2), "the pods run on the member's fake node")
		created := &corev1.Namespace{}
		g.Expect(memberCP.Client.Get(ctx, client.ObjectKey{Name: "shop"}, created)).To(Succeed())
		g.Expect(created.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "baseline"), "the chart's default member policy")

		profile := &cpv1alpha1.ClusterProfile{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: placementv1alpha1.DefaultClusterSet, Name: "edge-1"}, profile)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(profile.Status.Conditions, placementv1alpha1.AgentReachableCondition)).To(BeTrue())
	}).WithTimeout(2 * testenv.EventuallyTimeout).Should(Succeed())

	// Debugging from the hub as the charts install it: the hub manager's debug
	// API and the agent's tunnel, each with its chart's RBAC (checking access,
	// impersonating, granting the tenant group logs on the member).
	debugCfg := rest.CopyConfig(hubCP.Config)
	debugCfg.Host = strings.TrimSuffix(debugCfg.Host, "/") + debugv1alpha1.PlacementPath("shop", "settings", debugv1alpha1.Log, "edge-1")
	g.Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(memberCP.Client.List(ctx, pods, client.InNamespace("shop"))).To(Succeed())
		g.Expect(pods.Items).NotTo(BeEmpty())
		log, err := kubernetes.NewForConfigOrDie(debugCfg).CoreV1().Pods("shop").GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(log)).To(ContainSubstring("ready on member"))
	}).Should(Succeed())

	consumerAccessAsInstalled(t, hubCP, memberKubeconfig)

	// On the hub, the Deployment's ReplicaSet may not create its pods.
	hubPods := func(g Gomega) []corev1.Pod {
		pods := &corev1.PodList{}
		g.Expect(hubCP.Client.List(ctx, pods, client.InNamespace("shop"))).To(Succeed())
		return pods.Items
	}
	g.Eventually(func(g Gomega) {
		sets := &appsv1.ReplicaSetList{}
		g.Expect(hubCP.Client.List(ctx, sets, client.InNamespace("shop"))).To(Succeed())
		g.Expect(sets.Items).To(HaveLen(1))
		var failure *appsv1.ReplicaSetCondition
		for i := range sets.Items[0].Status.Conditions {
			if c := &sets.Items[0].Status.Conditions[i]; c.Type == appsv1.ReplicaSetReplicaFailure {
				failure = c
			}
		}
		g.Expect(failure).NotTo(BeNil())
		g.Expect(failure.Message).To(ContainSubstring("namespace shop is a Lodestar tenant namespace"))
	}).Should(Succeed())
	g.Expect(hubPods(g)).To(BeEmpty())

	// Turned off, the hub runs the pods too.
	out, err = helm(t, "upgrade", "lodestar-hub", filepath.Join(chartsDir, "lodestar-hub"), "--kubeconfig", hubKubeconfig,
		"--namespace", releaseNamespace, "--reuse-values", "--set", "refuseTenantPods=false")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Eventually(func() error {
		// A change of the Deployment makes the ReplicaSet controller try again at once.
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "shop"}}
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := hubCP.Client.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
				return err
			}
			d.Spec.Replicas = ptr.To[int32](3)
			return hubCP.Client.Update(ctx, d)
		})
	}).Should(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(hubPods(g)).To(HaveLen(3)) }).Should(Succeed())

	// The manager writes the status only of the kinds it reflects, and of
	// those the platform admin adds.
	widgets := authorizationv1.ResourceAttributes{Verb: "patch", Group: "example.com", Resource: "widgets", Subresource: "status", Namespace: "shop"}
	for attrs, want := range map[authorizationv1.ResourceAttributes]bool{
		{Verb: "patch", Group: "apps", Resource: "deployments", Subresource: "status", Namespace: "shop"}:                  true,
		{Verb: "patch", Group: "placement.lodestar.dev", Resource: "placements", Subresource: "status", Namespace: "shop"}: true,
		{Verb: "patch", Group: "", Resource: "pods", Subresource: "status", Namespace: "shop"}:                             false,
		{Verb: "patch", Group: "certificates.k8s.io", Resource: "certificatesigningrequests", Subresource: "status"}:       false,
		{Verb: "patch", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Subresource: "status"}:       false,
		widgets: false,
	} {
		g.Expect(hubManagerMay(g, hubCP.Client, attrs)).To(Equal(want), "%+v", attrs)
	}
	out, err = helm(t, "upgrade", "lodestar-hub", filepath.Join(chartsDir, "lodestar-hub"), "--kubeconfig", hubKubeconfig,
		"--namespace", releaseNamespace, "--reuse-values",
		"--set", "reflection.statusResources[0].apiGroups={example.com}", "--set", "reflection.statusResources[0].resources={widgets/status}")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Eventually(func(g Gomega) { g.Expect(hubManagerMay(g, hubCP.Client, widgets)).To(BeTrue()) }).Should(Succeed())
	interpretationsAsInstalled(t, hubCP, hubKubeconfig)
}

// interpretationsAsInstalled: the library of ResourceInterpretations the hub
// chart ships, opted into per kind, is installed by helm, and the manager as
// the chart's ServiceAccount reads every one as valid; any user of the hub
// may read them.
func interpretationsAsInstalled(t *testing.T, hubCP *testenv.ControlPlane, hubKubeconfig string) {
	t.Helper()
	g := NewWithT(t)
	out, err := helm(t, "upgrade", "lodestar-hub", filepath.Join(chartsDir, "lodestar-hub"), "--kubeconfig", hubKubeconfig,
		"--namespace", releaseNamespace, "--reuse-values", "--set", "interpretations.argoRollout=true", "--set", "interpretations.leaderWorkerSet=true")
	g.Expect(err).NotTo(HaveOccurred(), out)
	for _, name := range []string{"rollouts.argoproj.io", "leaderworkersets.leaderworkerset.x-k8s.io"} {
		g.Eventually(func(g Gomega) {
			ri := &placementv1alpha1.ResourceInterpretation{}
			g.Expect(hubCP.Client.Get(t.Context(), client.ObjectKey{Name: name}, ri)).To(Succeed())
			ready := meta.FindStatusCondition(ri.Status.Conditions, placementv1alpha1.ReadyCondition)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), ready.Message)
		}).Should(Succeed())
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "alice", Groups: []string{"system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "list", Group: "placement.lodestar.dev", Resource: "resourceinterpretations"},
	}}
	g.Expect(hubCP.Client.Create(t.Context(), sar)).To(Succeed())
	g.Expect(sar.Status.Allowed).To(BeTrue(), "every user reads the interpretations")
	g.Eventually(func(g Gomega) {
		g.Expect(hubManagerMay(g, hubCP.Client, authorizationv1.ResourceAttributes{Verb: "patch", Group: "argoproj.io", Resource: "rollouts",
			Subresource: "status", Namespace: "shop"})).To(BeTrue(), "the Rollout's aggregate is reflected")
	}).Should(Succeed())
}

// hubManagerMay asks the hub's authorizer whether the chart's ServiceAccount may
// do what attrs say.
func hubManagerMay(g Gomega, c client.Client, attrs authorizationv1.ResourceAttributes) bool {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               "system:serviceaccount:" + releaseNamespace + ":lodestar-hub",
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + releaseNamespace, "system:authenticated"},
		ResourceAttributes: &attrs,
	}}
	g.Expect(c.Create(context.Background(), sar)).To(Succeed())
	return sar.Status.Allowed
}

// consumerAccessAsInstalled: platform teams' access through the tunnel with
// the charts' RBAC. The agent chart lets grants give nothing on the member by
// default (consumerAccess.rules empty: the agent may grant only what it
// holds), so a grant fails there, and its status says so; once the member's
// admin raises the ceiling, the consumer lists the member's nodes through the
// hub as its own member identity.
func consumerAccessAsInstalled(t *testing.T, hubCP *testenv.ControlPlane, memberKubeconfig string) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	g.Expect(hubCP.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "platform"}})).To(Succeed())
	g.Expect(hubCP.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "lister"}})).To(Succeed())
	grant := &placementv1alpha1.ConsumerAccessGrant{ObjectMeta: metav1.ObjectMeta{Name: "lister"}, Spec: placementv1alpha1.ConsumerAccessGrantSpec{
		Consumers: []placementv1alpha1.ConsumerRef{{Namespace: "platform", Name: "lister"}}, ClusterSet: placementv1alpha1.DefaultClusterSet,
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list"}}},
	}}
	g.Expect(hubCP.Client.Create(ctx, grant)).To(Succeed())
	ready := func(g Gomega) *metav1.Condition {
		got := &placementv1alpha1.ConsumerAccessGrant{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(grant), got)).To(Succeed())
		c := meta.FindStatusCondition(got.Status.Conditions, placementv1alpha1.ReadyCondition)
		g.Expect(c).NotTo(BeNil())
		return c
	}
	g.Eventually(func(g Gomega) {
		c := ready(g)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonRulesFailed))
		g.Expect(c.Message).To(ContainSubstring("edge-1"))
	}).Should(Succeed())

	out, err := helm(t, "upgrade", "lodestar-agent", filepath.Join(chartsDir, "lodestar-agent"), "--kubeconfig", memberKubeconfig,
		"--namespace", releaseNamespace, "--reuse-values",
		"--set", "consumerAccess.rules[0].apiGroups[0]=", "--set", "consumerAccess.rules[0].resources={nodes}", "--set", "consumerAccess.rules[0].verbs={list}")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Eventually(func(g Gomega) {
		g.Expect(ready(g).Status).To(Equal(metav1.ConditionTrue))
	}).WithTimeout(2 * testenv.EventuallyTimeout).Should(Succeed())

	consumer, err := testenv.ServiceAccountConfig(ctx, hubCP.Config, "platform", "lister", time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	consumer.Host = strings.TrimSuffix(consumer.Host, "/") + debugv1alpha1.ClusterProxyPath("edge-1")
	g.Eventually(func(g Gomega) {
		nodes, err := kubernetes.NewForConfigOrDie(consumer).CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(nodes.Items).NotTo(BeEmpty())
	}).Should(Succeed())
	_, err = kubernetes.NewForConfigOrDie(consumer).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	g.Expect(err).To(HaveOccurred(), "the grant gives nodes only")
	g.Expect(err.Error()).To(ContainSubstring(debugv1alpha1.ConsumerUser("platform", "lister")))
}
