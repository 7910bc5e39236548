package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	aboutv1alpha1 "sigs.k8s.io/about-api/pkg/apis/v1alpha1"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/docs/examples/extending/approver"
	"github.com/lodestar-dev/lodestar/docs/examples/extending/cheapest"
	"github.com/lodestar-dev/lodestar/docs/examples/extending/nodereport"
	"github.com/lodestar-dev/lodestar/internal/scheme"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// TestExtendingExample: the multicluster-runtime example of
// docs/examples/extending, deployed on the hub from its YAML, runs as two
// sharded replicas of its ServiceAccount and keeps a node report on both
// members through their tunnels (member-2 publishes no address of its own);
// a node added on a member is reported; when the replica serving member-1
// stops, the other takes it over.
func TestExtendingExample(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	applyExtendingDeploy(t)
	t.Cleanup(func() {
		_ = hubCP.Client.Delete(context.Background(), &placementv1alpha1.ConsumerAccessGrant{ObjectMeta: metav1.ObjectMeta{Name: "node-reporter"}})
		for _, cluster := range []string{member1, member2} {
			_ = members[cluster].Client.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nodereport.Namespace, Name: nodereport.Name}})
		}
	})
	g.Eventually(func(g Gomega) {
		got := consumerGrant(g, "node-reporter")
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, placementv1alpha1.ReadyCondition)).To(BeTrue())
	}).Should(Succeed())

	// Two replicas, as the Deployment runs them: the ServiceAccount's token,
	// the provider file of the example's ConfigMap with this machine's plugin.
	hub, err := testenv.ServiceAccountConfig(ctx, hubCP.Config, "platform-tools", "node-reporter", time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	providers := exampleProviders(t, hub.BearerToken)
	var wg sync.WaitGroup
	stops := map[string]context.CancelFunc{}
	for _, replica := range []string{"replica-a", "replica-b"} {
		rctx, cancel := context.WithCancel(context.Background())
		stops[replica] = cancel
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := nodereport.Run(rctx, nodereport.Options{Hub: hub, ClusterSet: placementv1alpha1.DefaultClusterSet, Access: providers,
				Replica: replica, LeaseNamespace: "platform-tools", LeaseDuration: 6 * time.Second})
			if err != nil && rctx.Err() == nil {
				t.Errorf("replica %s: %v", replica, err)
			}
		}()
	}
	t.Cleanup(func() {
		for _, stop := range stops {
			stop()
		}
		wg.Wait()
	})

	report := func(g Gomega, cluster string) map[string]string {
		cm := &corev1.ConfigMap{}
		g.Expect(members[cluster].Client.Get(ctx, client.ObjectKey{Namespace: nodereport.Namespace, Name: nodereport.Name}, cm)).To(Succeed())
		return cm.Data
	}
	nodesOf := func(g Gomega, cluster string) string {
		list := &corev1.NodeList{}
		g.Expect(members[cluster].Client.List(ctx, list)).To(Succeed())
		var names []string
		for i := range list.Items {
			names = append(names, list.Items[i].Name)
		}
		slices.Sort(names)
		return strings.Join(names, ",")
	}
	for _, cluster := range []string{member1, member2} {
		g.Eventually(func(g Gomega) {
			got := report(g, cluster)
			g.Expect(got).To(HaveKeyWithValue("cluster", cluster))
			g.Expect(got).To(HaveKeyWithValue("nodes", nodesOf(g, cluster)))
			g.Expect(got["replica"]).To(BeElementOf("replica-a", "replica-b"))
		}).Should(Succeed())
	}

	// A node added on member-2 is reported (the replica watches through the tunnel).
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "reported-" + strings.ToLower(t.Name()[:8])}}
	g.Expect(members[member2].Client.Create(ctx, node)).To(Succeed())
	t.Cleanup(func() { _ = members[member2].Client.Delete(context.Background(), node) })
	g.Eventually(func(g Gomega) {
		g.Expect(strings.Split(report(g, member2)["nodes"], ",")).To(ContainElement(node.Name))
	}).Should(Succeed())

	// The replica serving member-1 stops: the other takes member-1 over.
	var owner string
	g.Eventually(func(g Gomega) { owner = report(g, member1)["replica"] }).Should(Succeed())
	stops[owner]()
	other := map[string]string{"replica-a": "replica-b", "replica-b": "replica-a"}[owner]
	g.Eventually(func(g Gomega) {
		g.Expect(report(g, member1)).To(HaveKeyWithValue("replica", other))
	}).WithTimeout(2 * testenv.EventuallyTimeout).Should(Succeed())

}

// exampleProviders is the example's provider file (its ConfigMap) with this
// machine's lodestar-credentials reading the ServiceAccount's token from a file.
func exampleProviders(t *testing.T, token string) *access.Config {
	t.Helper()
	g := NewWithT(t)
	cm := &corev1.ConfigMap{}
	g.Expect(hubCP.Client.Get(t.Context(), client.ObjectKey{Namespace: "platform-tools", Name: "node-reporter-providers"}, cm)).To(Succeed())
	var file struct {
		Providers []map[string]any `json:"providers"`
	}
	g.Expect(json.Unmarshal([]byte(cm.Data["providers.json"]), &file)).To(Succeed())
	g.Expect(file.Providers).To(HaveLen(1))
	plugin, err := testenv.Binary("lodestar-credentials")
	g.Expect(err).NotTo(HaveOccurred())
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	g.Expect(os.WriteFile(tokenFile, []byte(token), 0o600)).To(Succeed())
	exec := file.Providers[0]["execConfig"].(map[string]any)
	exec["command"], exec["args"] = plugin, []string{"--token-file", tokenFile}
	b, err := json.Marshal(file)
	g.Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(dir, "providers.json")
	g.Expect(os.WriteFile(path, b, 0o600)).To(Succeed())
	providers, err := access.NewFromFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	return providers
}

// applyExtendingDeploy applies docs/examples/extending/deploy as its README says.
func applyExtendingDeploy(t *testing.T) {
	t.Helper()
	_, err := testenv.ApplyDir(t.Context(), hubCP.Client, filepath.Join("..", "..", "docs", "examples", "extending", "deploy"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
}

// TestWaveApproverExample: the External strategy's example approver, run as
// its ServiceAccount from the example's YAML, holds a tenant's new revision
// while the metric is high, then approves it one cluster per wave.
func TestWaveApproverExample(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	applyExtendingDeploy(t)
	ns := newNamespace(t)
	text, err := os.ReadFile(filepath.Join("..", "..", "docs", "examples", "extending", "tenant", "web-external.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	createYAML(t, ns, string(text))
	placementsGoAtEnd(t, ns)
	greeting := func(g Gomega, cluster string) string {
		cm := &corev1.ConfigMap{}
		g.Expect(members[cluster].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-config"}, cm)).To(Succeed())
		return cm.Data["greeting"]
	}
	// The first revision goes everywhere at once: nothing runs to protect.
	g.Eventually(func(g Gomega) {
		for _, cluster := range []string{member1, member2} {
			g.Expect(greeting(g, cluster)).To(Equal("hello"))
		}
	}).Should(Succeed())

	// The approver, as its ServiceAccount, gated on a metric served here.
	var metric atomic.Value
	metric.Store("0.5")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("namespace") != ns || r.URL.Query().Get("placement") != "web" {
			http.Error(w, "unknown placement", http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte(metric.Load().(string)))
	}))
	t.Cleanup(srv.Close)
	cfg, err := testenv.ServiceAccountConfig(ctx, hubCP.Config, "platform-tools", "wave-approver", time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme.Hub(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect((&approver.Approver{Client: mgr.GetClient(), Metric: approver.HTTPMetric(srv.URL), Threshold: 0.01, WaveSize: 1, Recheck: time.Second}).SetupWithManager(mgr)).To(Succeed())
	mctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Start(mctx) }()
	t.Cleanup(func() { cancel(); <-done })

	// A new revision, held while the metric is high.
	g.Expect(updateOnHub(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-config"}}, func(cm *corev1.ConfigMap) {
		cm.Data["greeting"] = "hi"
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		p := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, p)).To(Succeed())
		g.Expect(p.Status.Rollout).NotTo(BeNil())
		g.Expect(p.Status.Rollout.Clusters).To(HaveLen(2))
		g.Expect(p.Status.Rollout.Clusters).To(HaveEach(HaveField("State", placementv1alpha1.ClusterPending)))
	}).Should(Succeed())
	approvals := func(g Gomega) []placementv1alpha1.RolloutApproval {
		list := &placementv1alpha1.RolloutApprovalList{}
		g.Expect(hubCP.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		return list.Items
	}
	g.Consistently(func(g Gomega) {
		g.Expect(approvals(g)).To(BeEmpty())
		for _, cluster := range []string{member1, member2} {
			g.Expect(greeting(g, cluster)).To(Equal("hello"))
		}
	}).Should(Succeed())

	// The metric good: one wave per cluster, member-1 first.
	metric.Store("0.001")
	g.Eventually(func(g Gomega) {
		for _, cluster := range []string{member1, member2} {
			g.Expect(greeting(g, cluster)).To(Equal("hi"))
		}
	}).Should(Succeed())
	got := approvals(g)
	g.Expect(got).To(HaveLen(2))
	g.Expect(got).To(ConsistOf(HaveField("Spec.Clusters", []string{member1}), HaveField("Spec.Clusters", []string{member2})))
}

// TestPropertyProducerExample: a ClusterProperty written on one member, as
// the example's producer would, brings the example tenant's Placement there
// alone, with the value in its copy; when the producer withdraws it, the
// Placement leaves.
func TestPropertyProducerExample(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	dir := filepath.Join("..", "..", "docs", "examples", "extending")
	objs, err := testenv.ApplyDir(ctx, members[member2].Client, filepath.Join(dir, "member"))
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		for _, o := range objs {
			_ = members[member2].Client.Delete(context.Background(), o)
		}
	})
	ns := newNamespace(t)
	text, err := os.ReadFile(filepath.Join(dir, "tenant", "trainer.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	createYAML(t, ns, string(text))
	placementsGoAtEnd(t, ns)
	key := client.ObjectKey{Namespace: ns, Name: "trainer-config"}
	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(members[member2].Client.Get(ctx, key, cm)).To(Succeed())
		g.Expect(cm.Data).To(HaveKeyWithValue("gpus", "4"))
	}).Should(Succeed())
	g.Consistently(func() bool {
		return apierrors.IsNotFound(members[member1].Client.Get(ctx, key, &corev1.ConfigMap{}))
	}).Should(BeTrue(), "member-1 publishes no GPUs")

	for _, o := range objs {
		g.Expect(members[member2].Client.Delete(ctx, o)).To(Succeed())
	}
	g.Eventually(func() bool {
		return apierrors.IsNotFound(members[member2].Client.Get(ctx, key, &corev1.ConfigMap{}))
	}).Should(BeTrue(), "without the property, the Placement leaves member-2")
}

// TestExternalSchedulerExample: the example external scheduler, run as its
// ServiceAccount from the example's YAML, places the example tenant's
// Placement on the member of the lowest cost its producer publishes, and
// moves it when the costs change; Lodestar's scheduler stays out.
func TestExternalSchedulerExample(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	applyExtendingDeploy(t)
	setProperty(t, member1, cheapest.CostProperty, "3")
	setProperty(t, member2, cheapest.CostProperty, "1")

	cfg, err := testenv.ServiceAccountConfig(ctx, hubCP.Config, "platform-tools", "cheapest-scheduler", time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme.Hub(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect((&cheapest.Scheduler{Client: mgr.GetClient(), Name: "cheapest", ClusterSet: placementv1alpha1.DefaultClusterSet}).SetupWithManager(mgr)).To(Succeed())
	mctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Start(mctx) }()
	t.Cleanup(func() { cancel(); <-done })

	ns := newNamespace(t)
	text, err := os.ReadFile(filepath.Join("..", "..", "docs", "examples", "extending", "tenant", "cheapest.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	createYAML(t, ns, string(text))
	placementsGoAtEnd(t, ns)
	key := client.ObjectKey{Namespace: ns, Name: "batch-config"}
	on := func(cluster string) bool { return members[cluster].Client.Get(ctx, key, &corev1.ConfigMap{}) == nil }
	g.Eventually(func(g Gomega) {
		g.Expect(on(member2)).To(BeTrue())
		g.Expect(on(member1)).To(BeFalse())
	}).Should(Succeed())

	// member-1 becomes the cheapest: the Placement moves there.
	g.Eventually(func() error {
		prop := &aboutv1alpha1.ClusterProperty{}
		if err := members[member1].Client.Get(ctx, client.ObjectKey{Name: cheapest.CostProperty}, prop); err != nil {
			return err
		}
		prop.Spec.Value = "0.5"
		return members[member1].Client.Update(ctx, prop)
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(on(member1)).To(BeTrue())
		g.Expect(on(member2)).To(BeFalse())
	}).Should(Succeed())
	p := &placementv1alpha1.Placement{}
	g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "batch"}, p)).To(Succeed())
	g.Expect(p.Status.Conditions).NotTo(ContainElement(HaveField("Type", placementv1alpha1.ScheduledCondition)), "Lodestar's scheduler stays out")
}
