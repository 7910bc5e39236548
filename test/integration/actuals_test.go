// Actuals: what the tests read back of the fleet and expect of it: Placement
// conditions and status, the Works on the hub, the objects on the members,
// the agents' records and the hub's metrics. What they set up is in
// fixtures_test.go.

package integration

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/clusterworks"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/renderctl"
)

// placementCondition returns the Placement's condition of type t, failing g when
// it is absent.
func placementCondition(g Gomega, t *testing.T, key client.ObjectKey, ct string) *metav1.Condition {
	p := &placementv1alpha1.Placement{}
	g.Expect(hubCP.Client.Get(t.Context(), key, p)).To(Succeed())
	c := meta.FindStatusCondition(p.Status.Conditions, ct)
	g.Expect(c).NotTo(BeNil(), "no %s condition", ct)
	return c
}

// appliedKey is the key of a Work's AppliedWork on its member.
func appliedKey(w *workv1alpha1.Work) client.ObjectKey {
	return client.ObjectKey{Name: appliedName(w.Namespace, w.Name)}
}

// appliedName is the name of the AppliedWork of the Work name in workNamespace, as
// the agents of the test hub name it.
func appliedName(workNamespace, name string) string {
	return names.AppliedWork(testHubID(), workNamespace, name)
}

// testHubID is the test hub's identity as its agents derive it from its address.
func testHubID() string {
	return names.HubID(hubCP.Config.Host)
}

// firstManifestCondition reads a Work from the hub and returns the condition of
// type ct of its first manifest.
func firstManifestCondition(g Gomega, w *workv1alpha1.Work, ct string) *metav1.Condition {
	got := &workv1alpha1.Work{}
	g.Expect(hubCP.Client.Get(context.Background(), client.ObjectKeyFromObject(w), got)).To(Succeed())
	return manifestCondition(g, got, 0, ct)
}

// manifestCondition returns the condition of type t of the manifest with ordinal i.
func manifestCondition(g Gomega, w *workv1alpha1.Work, i int, t string) *metav1.Condition {
	for _, mc := range w.Status.ManifestConditions {
		if mc.Identifier.Ordinal == i {
			c := meta.FindStatusCondition(mc.Conditions, t)
			g.Expect(c).NotTo(BeNil(), "manifest %d has no %s condition", i, t)
			return c
		}
	}
	g.Expect(false).To(BeTrue(), "no manifest %d", i)
	return nil
}

// cleanupBlockedCondition is the Work's CleanupBlocked condition as the hub has it.
func cleanupBlockedCondition(g Gomega, w *workv1alpha1.Work) *metav1.Condition {
	got := &workv1alpha1.Work{}
	g.Expect(hubCP.Client.Get(context.Background(), client.ObjectKeyFromObject(w), got)).To(Succeed())
	return meta.FindStatusCondition(got.Status.Conditions, lodestarworkv1alpha1.ConditionCleanupBlocked)
}

func getProfile(g Gomega, set, name string) *cpv1alpha1.ClusterProfile {
	p := &cpv1alpha1.ClusterProfile{}
	g.Expect(hubCP.Client.Get(context.Background(), client.ObjectKey{Namespace: set, Name: name}, p)).To(Succeed())
	return p
}

// workOf returns the Placement's Work for cluster, or nil.
func workOf(g Gomega, p *placementv1alpha1.Placement, cluster string) *workv1alpha1.Work {
	w := &workv1alpha1.Work{}
	err := hubCP.Client.Get(context.Background(), client.ObjectKey{Namespace: names.ClusterNamespace(cluster), Name: names.Work(p.Namespace, p.Name)}, w)
	if apierrors.IsNotFound(err) {
		return nil
	}
	g.Expect(err).NotTo(HaveOccurred())
	return w
}

func workAvailable(w *workv1alpha1.Work) bool {
	return clusterworks.WorkAvailability(w) == metav1.ConditionTrue
}

// expectGreeting asserts the web ConfigMap's greeting on a member.
func expectGreeting(g Gomega, t *testing.T, cluster, ns, greeting string) {
	cm := &corev1.ConfigMap{}
	g.Expect(members[cluster].Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web-config"}, cm)).To(Succeed())
	g.Expect(cm.Data).To(HaveKeyWithValue("greeting", greeting))
}

func grantOf(g Gomega, name string) *placementv1alpha1.MemberAccessGrant {
	grant := &placementv1alpha1.MemberAccessGrant{}
	g.Expect(hubCP.Client.Get(context.Background(), client.ObjectKey{Name: name}, grant)).To(Succeed())
	return grant
}

func secretIn(ns, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	return s, hubCP.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s)
}

// memberObjects returns the UID and resourceVersion of ConfigMaps on member-2.
func memberObjects(t *testing.T, ns string, names ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range names {
		cm := memberConfigMap(t, member2, ns, n)
		out[n] = string(cm.UID) + "@" + cm.ResourceVersion
	}
	return out
}

// deploymentOn reads the web Deployment on a member.
func deploymentOn(g Gomega, cluster, ns string) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	g.Expect(members[cluster].Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, d)).To(Succeed())
	return d
}

// expectPreviewIsTheWork checks that `kubectl lodestar render` prints exactly
// what the cluster's Work holds.
func expectPreviewIsTheWork(g Gomega, p *placementv1alpha1.Placement, cluster string) {
	_, res, err := renderctl.Render(context.Background(), hubCP.Client, renderctl.Options{Placement: client.ObjectKeyFromObject(p), Cluster: cluster})
	g.Expect(err).NotTo(HaveOccurred())
	w := workOf(g, p, cluster)
	g.Expect(w).NotTo(BeNil())
	g.Expect(w.Spec.Workload.Manifests).To(HaveLen(len(res.Manifests)))
	for i, m := range w.Spec.Workload.Manifests {
		g.Expect(m.Raw).To(MatchJSON(res.Manifests[i].Raw), "manifest %d on %s", i, cluster)
	}
}

// partsOn are the Works of the Placement of key on cluster, in part order.
func partsOn(g Gomega, key client.ObjectKey, cluster string) []*workv1alpha1.Work {
	list := &workv1alpha1.WorkList{}
	g.Expect(hubCP.Client.List(context.Background(), list, client.InNamespace(names.ClusterNamespace(cluster)),
		client.MatchingLabels{placementv1alpha1.PlacementNamespaceLabel: key.Namespace, placementv1alpha1.PlacementNameLabel: names.LabelValue(key.Name)})).To(Succeed())
	return clusterworks.ByCluster(list.Items)[cluster]
}

// expectPlacedOn asserts that the web objects are on the member with the given
// greeting, and that only the selected objects are.
func expectPlacedOn(g Gomega, t *testing.T, cluster, ns, greeting string) {
	c := members[cluster].Client
	cm := &corev1.ConfigMap{}
	g.Expect(c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web-config"}, cm)).To(Succeed())
	g.Expect(cm.Data).To(Equal(map[string]string{"greeting": greeting}))
	deploy := &appsv1.Deployment{}
	g.Expect(c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web"}, deploy)).To(Succeed())
	g.Expect(deploy.Spec.Replicas).To(HaveValue(BeEquivalentTo(2)))
	err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "not-placed"}, &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "an unselected object must not be placed")
}

// expectAbsentFrom asserts that no web object is on the member.
func expectAbsentFrom(g Gomega, t *testing.T, cluster, ns string) {
	c := members[cluster].Client
	for _, obj := range []client.Object{&corev1.ConfigMap{}, &appsv1.Deployment{}} {
		name := "web"
		if _, ok := obj.(*corev1.ConfigMap); ok {
			name = "web-config"
		}
		err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, obj)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s/%s on %s: %v", obj, ns, name, cluster, err)
	}
}

// expectStatus asserts that the Placement reports every condition True, at its
// current generation, with exactly the given cluster applied.
func expectStatus(g Gomega, t *testing.T, key client.ObjectKey, cluster string) {
	p := &placementv1alpha1.Placement{}
	g.Expect(hubCP.Client.Get(t.Context(), key, p)).To(Succeed())
	for _, ct := range []string{placementv1alpha1.ScheduledCondition, placementv1alpha1.WorkSynchronizedCondition, placementv1alpha1.AppliedCondition} {
		c := meta.FindStatusCondition(p.Status.Conditions, ct)
		g.Expect(c).NotTo(BeNil(), "condition %s", ct)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "condition %s: %s", ct, c.Message)
		g.Expect(c.ObservedGeneration).To(Equal(p.Generation), "condition %s", ct)
	}
	g.Expect(p.Status.ObservedGeneration).To(Equal(p.Generation))
	g.Expect(p.Status.SelectedClusters).To(HaveValue(BeEquivalentTo(1)))
	g.Expect(p.Status.AppliedClusters).To(HaveValue(BeEquivalentTo(1)))
	g.Expect(p.Status.Clusters).To(ConsistOf(HaveField("Name", cluster)))
	g.Expect(p.Status.Clusters[0].Applied).To(Equal(metav1.ConditionTrue))
	g.Expect(p.Status.Clusters[0].Work).To(Equal(names.Work(key.Namespace, key.Name)))
}

// greetingOn is the web ConfigMap's greeting on a member, "" when absent.
func greetingOn(g Gomega, cluster, ns string) string {
	cm := &corev1.ConfigMap{}
	err := members[cluster].Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web-config"}, cm)
	if apierrors.IsNotFound(err) {
		return ""
	}
	g.Expect(err).NotTo(HaveOccurred())
	return cm.Data["greeting"]
}

// progressing is the Placement's Progressing condition at its generation.
func progressing(g Gomega, key client.ObjectKey) (*placementv1alpha1.Placement, *metav1.Condition) {
	p := &placementv1alpha1.Placement{}
	g.Expect(hubCP.Client.Get(context.Background(), key, p)).To(Succeed())
	c := meta.FindStatusCondition(p.Status.Conditions, placementv1alpha1.ProgressingCondition)
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.ObservedGeneration).To(Equal(p.Generation))
	return p, c
}

// expectRolledOut waits until the Placement's rollout of revision number is
// complete and every cluster has the greeting (unless it is empty).
func expectRolledOut(t *testing.T, key client.ObjectKey, number int64, greeting string, clusters ...string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		p, c := progressing(g, key)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonRolloutComplete), c.Message)
		g.Expect(p.Status.Rollout.TargetRevisionNumber).To(Equal(number))
		g.Expect(p.Status.Rollout.StableRevision).To(Equal(p.Status.Rollout.TargetRevision))
		for _, cl := range clusters {
			if greeting != "" {
				g.Expect(greetingOn(g, cl, key.Namespace)).To(Equal(greeting), "on %s", cl)
			}
		}
	}).Should(Succeed())
}

// configMapOn creates, in tenant, a ConfigMap and a Placement of the same name
// that places it, with spec changed by mutate.
func configMapOn(t *testing.T, tenant, name string, mutate func(*placementv1alpha1.PlacementSpec)) *placementv1alpha1.Placement {
	t.Helper()
	g := NewWithT(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenant}, Data: map[string]string{"k": "v"}}
	g.Expect(hubCP.Client.Create(t.Context(), cm)).To(Succeed())
	p := &placementv1alpha1.Placement{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenant},
		Spec:       placementv1alpha1.PlacementSpec{ResourceSelectors: []placementv1alpha1.ResourceSelector{{Version: "v1", Kind: "ConfigMap", Name: name}}},
	}
	mutate(&p.Spec)
	g.Expect(hubCP.Client.Create(t.Context(), p)).To(Succeed())
	return p
}

// clusterStatusOf returns the Placement's status entry of a cluster, or nil.
func clusterStatusOf(g Gomega, key client.ObjectKey, cluster string) *placementv1alpha1.ClusterStatus {
	p := &placementv1alpha1.Placement{}
	g.Expect(hubCP.Client.Get(context.Background(), key, p)).To(Succeed())
	for i := range p.Status.Clusters {
		if p.Status.Clusters[i].Name == cluster {
			return &p.Status.Clusters[i]
		}
	}
	return nil
}

// eventuallyManifest waits until manifest i of the Work reports the Applied
// status and reason (any reason when empty) at the Work's generation, and returns
// its message.
func eventuallyManifest(t *testing.T, w *workv1alpha1.Work, i int, status metav1.ConditionStatus, reason string) string {
	t.Helper()
	var msg string
	NewWithT(t).Eventually(func(g Gomega) {
		got := &workv1alpha1.Work{}
		g.Expect(hubCP.Client.Get(t.Context(), client.ObjectKeyFromObject(w), got)).To(Succeed())
		c := manifestCondition(g, got, i, lodestarworkv1alpha1.ConditionApplied)
		g.Expect(c.ObservedGeneration).To(Equal(got.Generation))
		if reason != "" {
			g.Expect(c.Reason).To(Equal(reason), c.Message)
		}
		g.Expect(c.Status).To(Equal(status), c.Message)
		msg = c.Message
	}).Should(Succeed())
	return msg
}

func memberConfigMap(t *testing.T, cluster, ns, name string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{}
	NewWithT(t).Expect(members[cluster].Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, cm)).To(Succeed())
	return cm
}

// bindingOf reads a ClusterSetBinding.
func bindingOf(g Gomega, ns, set string) *placementv1alpha1.ClusterSetBinding {
	b := &placementv1alpha1.ClusterSetBinding{}
	g.Expect(hubCP.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: set}, b)).To(Succeed())
	return b
}

// managedClusters counts the ClusterProfiles Lodestar manages in set.
func managedClusters(g Gomega, set string) int32 {
	list := &cpv1alpha1.ClusterProfileList{}
	g.Expect(hubCP.Client.List(context.Background(), list, client.InNamespace(set))).To(Succeed())
	var n int32
	for i := range list.Items {
		if lookup.Managed(&list.Items[i]) && list.Items[i].DeletionTimestamp.IsZero() {
			n++
		}
	}
	return n
}

// watchedKind is lodestar_agent_watched_kinds for the kind, over the agents of
// this process (only one places the test's kind).
func watchedKind(g Gomega, group, kind string) float64 {
	return gauge(g, "lodestar_agent_watched_kinds", group, kind)
}

// hubWatchedKind is the hub manager's lodestar_watched_kinds for the kind.
func hubWatchedKind(g Gomega, group, kind string) float64 {
	return gauge(g, "lodestar_watched_kinds", group, kind)
}

// gauge is the value of a gauge of this process's registry with the labels
// group and kind.
func gauge(g Gomega, name, group, kind string) float64 {
	families, err := crmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	var v float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["group"] == group && labels["kind"] == kind {
				v += m.GetGauge().GetValue()
			}
		}
	}
	return v
}
