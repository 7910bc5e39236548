package integration

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/agent"
	"github.com/lodestar-dev/lodestar/internal/fleet"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/scheme"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// With the hub unreachable (a proxy the test stops), the agent keeps what it
// applied, keeps correcting drift from the Works it last saw, and deletes nothing;
// when the hub is back it reports what happened meanwhile. A Work removed from the
// hub while the agent was away has its objects removed only after the grace
// period, and coming back within it cancels that.
func TestAgentWithoutTheHub(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	name, cfg := joinAux(t, "away", time.Hour)
	hubURL, err := url.Parse(cfg.Host)
	g.Expect(err).NotTo(HaveOccurred())
	proxy, err := testenv.StartProxy(hubURL.Host)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(proxy.Stop)
	proxied := rest.CopyConfig(cfg)
	proxied.Host = "https://" + proxy.Addr()
	const grace = 4 * time.Second
	opts := auxAgent(name, proxied, member2)
	opts.MissingWorkGracePeriod = grace
	// The same hub through another address: its identity is set, as --hub-id does.
	opts.HubID = testHubID()
	startAgent(t, opts)

	ns := "away-" + newNamespace(t)
	cm := func(n string) workv1alpha1.Manifest { return cmManifest(t, ns, n, map[string]any{"k": "v"}) }
	steady := newWork(t, name, "steady", nil, cm("steady"), cm("drifty"))
	reported := newWork(t, name, "reported", &lodestarworkv1alpha1.ApplyStrategy{WhenDrifted: lodestarworkv1alpha1.DriftReport}, cm("reported"))
	leaving := newWork(t, name, "leaving", nil, cm("leaving"))
	for _, w := range []*workv1alpha1.Work{steady, reported, leaving} {
		eventuallyManifest(t, w, 0, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)
	}
	eventuallyManifest(t, steady, 1, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)
	before := memberObjects(t, ns, "steady", "leaving")

	proxy.Stop()
	// Drift is corrected from the last known Works.
	editOnMember(t, member2, client.ObjectKey{Namespace: ns, Name: "drifty"}, func(cm *corev1.ConfigMap) { cm.Data["k"] = "changed" })
	g.Eventually(func(g Gomega) {
		g.Expect(memberConfigMap(t, member2, ns, "drifty").Data).To(HaveKeyWithValue("k", "v"))
	}).Should(Succeed())
	// A drift that is only reported waits for the hub.
	editOnMember(t, member2, client.ObjectKey{Namespace: ns, Name: "reported"}, func(cm *corev1.ConfigMap) { cm.Data["k"] = "changed" })
	// A Work goes from the hub while the agent cannot see it.
	forceRemove(t, leaving)
	g.Expect(memberObjects(t, ns, "steady", "leaving")).To(Equal(before), "nothing deleted or rewritten while the hub is away")

	g.Expect(proxy.Start()).To(Succeed())
	// What could not be reported is reported.
	g.Eventually(func(g Gomega) {
		c := firstManifestCondition(g, reported, lodestarworkv1alpha1.ConditionDrifted)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(ContainSubstring("data.k"))
	}).Should(Succeed())
	// The AppliedWork of the removed Work is marked; its object stays for now.
	appliedWorkKey := appliedKey(leaving)
	g.Eventually(func(g Gomega) {
		applied := &lodestarworkv1alpha1.AppliedWork{}
		g.Expect(members[member2].Client.Get(ctx, appliedWorkKey, applied)).To(Succeed())
		g.Expect(applied.Annotations).To(HaveKey(lodestarworkv1alpha1.WorkMissingSinceAnnotation))
	}).Should(Succeed())
	g.Expect(memberObjects(t, ns, "leaving")).To(HaveKeyWithValue("leaving", before["leaving"]))

	// It comes back within the grace period: nothing is removed.
	leaving = newWork(t, name, "leaving", nil, cm("leaving"))
	g.Eventually(func(g Gomega) {
		applied := &lodestarworkv1alpha1.AppliedWork{}
		g.Expect(members[member2].Client.Get(ctx, appliedWorkKey, applied)).To(Succeed())
		g.Expect(applied.Annotations).NotTo(HaveKey(lodestarworkv1alpha1.WorkMissingSinceAnnotation))
	}).Should(Succeed())
	eventuallyManifest(t, leaving, 0, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)
	g.Expect(memberConfigMap(t, member2, ns, "leaving").UID).To(BeEquivalentTo(before["leaving"][:36]), "the same object, kept")

	// Gone for good: removed once the grace period has passed.
	forceRemove(t, leaving)
	var since string
	g.Eventually(func(g Gomega) {
		applied := &lodestarworkv1alpha1.AppliedWork{}
		g.Expect(members[member2].Client.Get(ctx, appliedWorkKey, applied)).To(Succeed())
		since = applied.Annotations[lodestarworkv1alpha1.WorkMissingSinceAnnotation]
		g.Expect(since).NotTo(BeEmpty())
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(apierrors.IsNotFound(members[member2].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "leaving"}, &corev1.ConfigMap{}))).To(BeTrue())
		g.Expect(apierrors.IsNotFound(members[member2].Client.Get(ctx, appliedWorkKey, &lodestarworkv1alpha1.AppliedWork{}))).To(BeTrue())
	}).Should(Succeed())
	marked, err := time.Parse(time.RFC3339, since)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(time.Since(marked)).To(BeNumerically(">=", grace), "not removed before the grace period")

	// Through all of it, the steady object was neither deleted nor rewritten.
	g.Expect(memberObjects(t, ns, "steady")).To(HaveKeyWithValue("steady", before["steady"]))
}

// An agent stopped in the middle of applying a Work (objects created, not yet
// recorded) converges when it starts again: every object once, the ones created
// before kept as they are, all recorded.
func TestAgentRestartMidApply(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	name, cfg := joinAux(t, "restart", time.Hour)
	opts := auxAgent(name, cfg, member2)
	stop := startAgent(t, opts)
	ns := "midapply-" + newNamespace(t)
	const n = 200
	var manifests []workv1alpha1.Manifest
	for i := range n {
		manifests = append(manifests, cmManifest(t, ns, fmt.Sprintf("cm-%03d", i), map[string]any{"i": fmt.Sprint(i)}))
	}
	w := newWork(t, name, "big", nil, manifests...)
	member := members[member2].Client
	g.Eventually(func() error {
		return member.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cm-000"}, &corev1.ConfigMap{})
	}).WithPolling(5 * time.Millisecond).Should(Succeed())
	stop()

	created := map[string]types.UID{}
	list := &corev1.ConfigMapList{}
	g.Expect(member.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	for _, cm := range list.Items {
		created[cm.Name] = cm.UID
	}
	g.Expect(len(created)).To(BeNumerically("<", n), "stopped mid-apply")
	applied := &lodestarworkv1alpha1.AppliedWork{}
	g.Expect(member.Get(ctx, appliedKey(w), applied)).To(Succeed())
	g.Expect(len(applied.Status.AppliedResources)).To(BeNumerically("<", len(created)), "stopped before recording what it created")

	startAgent(t, opts)
	g.Eventually(func(g Gomega) {
		got := &workv1alpha1.Work{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(w), got)).To(Succeed())
		g.Expect(got.Status.ManifestConditions).To(HaveLen(n))
		for i := range n {
			g.Expect(manifestCondition(g, got, i, lodestarworkv1alpha1.ConditionApplied).Status).To(Equal(metav1.ConditionTrue))
		}
	}).Should(Succeed())
	g.Expect(member.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	g.Expect(list.Items).To(HaveLen(n))
	for _, cm := range list.Items {
		if uid, ok := created[cm.Name]; ok {
			g.Expect(cm.UID).To(Equal(uid), "%s was kept, not recreated", cm.Name)
		}
	}
	g.Expect(member.Get(ctx, appliedKey(w), applied)).To(Succeed())
	g.Expect(applied.Status.AppliedResources).To(HaveLen(n))
	seen := map[string]bool{}
	for _, rec := range applied.Status.AppliedResources {
		g.Expect(seen[rec.Name]).To(BeFalse(), "%s recorded once", rec.Name)
		seen[rec.Name] = true
	}
}

// A Job runs once: not again when the agent restarts, nor when it is removed from
// the member after finishing (as its TTL would); a new manifest is a new run.
func TestCompletedJobIsNotRunAgain(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	name, cfg := joinAux(t, "jobs", time.Hour)
	opts := auxAgent(name, cfg, fullMember)
	stop := startAgent(t, opts)
	ns := "jobs-" + newNamespace(t)
	job := func(run string) workv1alpha1.Manifest {
		return manifest(t, map[string]any{
			"apiVersion": "batch/v1", "kind": "Job",
			"metadata": map[string]any{"name": "once", "namespace": ns, "labels": map[string]any{"run": run}},
			"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
				"restartPolicy": "Never",
				"containers":    []any{map[string]any{"name": "task", "image": "busybox:1.36"}},
			}}},
		})
	}
	w := newWork(t, name, "jobs", nil, job("1"))
	g.Eventually(func(g Gomega) {
		g.Expect(firstManifestCondition(g, w, lodestarworkv1alpha1.ConditionAvailable).Reason).To(Equal("JobComplete"))
	}).Should(Succeed())
	member := members[fullMember].Client
	ran := &batchv1.Job{}
	g.Expect(member.Get(ctx, client.ObjectKey{Namespace: ns, Name: "once"}, ran)).To(Succeed())
	pods := func() int {
		list := &corev1.PodList{}
		g.Expect(member.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		return len(list.Items)
	}
	g.Expect(pods()).To(Equal(1))

	// The agent restarts; a marker added to the Work shows it has reconciled it.
	stop()
	startAgent(t, opts)
	g.Expect(updateOnHub(w, func(w *workv1alpha1.Work) {
		w.Spec.Workload.Manifests = append(w.Spec.Workload.Manifests, cmManifest(t, ns, "marker", nil))
	})).To(Succeed())
	eventuallyManifest(t, w, 1, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)
	again := &batchv1.Job{}
	g.Expect(member.Get(ctx, client.ObjectKey{Namespace: ns, Name: "once"}, again)).To(Succeed())
	g.Expect(again.UID).To(Equal(ran.UID), "the same Job")
	g.Expect(again.Status.Succeeded).To(BeEquivalentTo(1))
	g.Expect(pods()).To(Equal(1), "not run again")

	// Removed on the member after it finished: not created again.
	g.Expect(member.Delete(ctx, again, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	eventuallyManifest(t, w, 0, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonRanOnce)
	err := member.Get(ctx, client.ObjectKey{Namespace: ns, Name: "once"}, &batchv1.Job{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "not created again, got %v", err)
	g.Eventually(func(g Gomega) {
		g.Expect(firstManifestCondition(g, w, lodestarworkv1alpha1.ConditionAvailable).Status).To(Equal(metav1.ConditionTrue), "a Job that ran counts as available")
	}).Should(Succeed())

	// A new manifest is a new run.
	g.Expect(updateOnHub(w, func(w *workv1alpha1.Work) { w.Spec.Workload.Manifests[0] = job("2") })).To(Succeed())
	g.Eventually(func(g Gomega) {
		next := &batchv1.Job{}
		g.Expect(member.Get(ctx, client.ObjectKey{Namespace: ns, Name: "once"}, next)).To(Succeed())
		g.Expect(next.UID).NotTo(Equal(ran.UID))
		g.Expect(next.Labels).To(HaveKeyWithValue("run", "2"))
	}).Should(Succeed())
}

// A hub API server that restarts (same address, certificates and etcd; every
// connection cut, every watch to be established again) causes the agent to
// re-list, not to churn: nothing on the member is deleted or rewritten, and a Work
// changed after the restart is applied.
func TestHubAPIServerRestart(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ownHub, err := testenv.StartHub(scheme.Hub(), testenv.QuickShutdown)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = ownHub.Stop() })
	name := "restarted-" + rand.String(5)
	cfg, err := fleet.Join(ctx, ownHub.Config, ownHub.Client, fleet.JoinOptions{Name: name, TokenTTL: time.Hour})
	g.Expect(err).NotTo(HaveOccurred())
	startAgent(t, agent.Options{ClusterName: name, Hub: cfg, Member: members[member2].Config, LeaseDuration: 2 * time.Second})

	ns := "hubrestart-" + newNamespace(t)
	w := &workv1alpha1.Work{
		ObjectMeta: metav1.ObjectMeta{Namespace: names.ClusterNamespace(name), Name: "survivor"},
		Spec:       workv1alpha1.WorkSpec{Workload: workv1alpha1.WorkloadTemplate{Manifests: []workv1alpha1.Manifest{cmManifest(t, ns, "before", map[string]any{"k": "v"})}}},
	}
	g.Expect(ownHub.Client.Create(ctx, w)).To(Succeed())
	applied := func(i int) {
		g.Eventually(func(g Gomega) {
			got := &workv1alpha1.Work{}
			g.Expect(ownHub.Client.Get(ctx, client.ObjectKeyFromObject(w), got)).To(Succeed())
			c := manifestCondition(g, got, i, lodestarworkv1alpha1.ConditionApplied)
			g.Expect(c.ObservedGeneration).To(Equal(got.Generation))
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
		}).Should(Succeed())
	}
	applied(0)
	before := memberObjects(t, ns, "before")

	g.Expect(ownHub.RestartAPIServer()).To(Succeed())
	g.Eventually(func() error { return ownHub.Client.Get(ctx, client.ObjectKeyFromObject(w), w) }).Should(Succeed())
	g.Expect(memberObjects(t, ns, "before")).To(Equal(before), "nothing deleted or rewritten")

	// The agent sees Works again: a manifest added after the restart is applied.
	g.Eventually(func() error {
		if err := ownHub.Client.Get(ctx, client.ObjectKeyFromObject(w), w); err != nil {
			return err
		}
		w.Spec.Workload.Manifests = append(w.Spec.Workload.Manifests[:1], cmManifest(t, ns, "after", map[string]any{"k": "v"}))
		return ownHub.Client.Update(ctx, w)
	}).Should(Succeed())
	applied(1)
	g.Expect(memberObjects(t, ns, "before")).To(Equal(before), "the unchanged object is still not rewritten")
	g.Eventually(func(g Gomega) {
		profile := &cpv1alpha1.ClusterProfile{}
		g.Expect(ownHub.Client.Get(ctx, client.ObjectKey{Namespace: placementv1alpha1.DefaultClusterSet, Name: name}, profile)).To(Succeed())
		lease := &coordinationv1.Lease{}
		g.Expect(ownHub.Client.Get(ctx, client.ObjectKey{Namespace: names.ClusterNamespace(name), Name: placementv1alpha1.AgentLeaseName}, lease)).To(Succeed())
		g.Expect(lease.Spec.RenewTime.Time).To(BeTemporally(">", time.Now().Add(-5*time.Second)), "the heartbeat goes on")
	}).Should(Succeed())
}
