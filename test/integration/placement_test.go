package integration

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/render"
)

func webObjects(ns string) (*corev1.ConfigMap, *appsv1.Deployment, *corev1.ConfigMap) {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "web-config", Namespace: ns},
		Data:       map[string]string{"greeting": "hello"},
	}
	labels := map[string]string{"app": "web"}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
			},
		},
	}
	unselected := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "not-placed", Namespace: ns}, Data: map[string]string{"k": "v"}}
	return cm, deploy, unselected
}

// createWebApp creates the web ConfigMap (changed by edit, when given) and
// Deployment of webObjects on the hub.
func createWebApp(t *testing.T, ns string, edit func(*corev1.ConfigMap)) {
	t.Helper()
	g := NewWithT(t)
	cm, deploy, _ := webObjects(ns)
	if edit != nil {
		edit(cm)
	}
	g.Expect(hubCP.Client.Create(t.Context(), cm)).To(Succeed())
	g.Expect(hubCP.Client.Create(t.Context(), deploy)).To(Succeed())
}

func webPlacement(ns string) *placementv1alpha1.Placement {
	return &placementv1alpha1.Placement{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{
				{Version: "v1", Kind: "ConfigMap", Name: "web-config"},
				{Group: "apps", Version: "v1", Kind: "Deployment", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
			},
			Scheduling: placementv1alpha1.Scheduling{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "production"}}},
		},
	}
}

// configMapPlacement creates a namespace of its own with the web ConfigMap on the
// hub, and returns a Placement (not created) that places only the ConfigMap.
func configMapPlacement(t *testing.T) (string, *corev1.ConfigMap, *placementv1alpha1.Placement) {
	t.Helper()
	ns := newNamespace(t)
	cm, _, _ := webObjects(ns)
	NewWithT(t).Expect(hubCP.Client.Create(t.Context(), cm)).To(Succeed())
	p := webPlacement(ns)
	p.Spec.ResourceSelectors = p.Spec.ResourceSelectors[:1]
	return ns, cm, p
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

func TestPlacementLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	cm, deploy, unselected := webObjects(ns)
	for _, obj := range []client.Object{cm, deploy, unselected} {
		g.Expect(hubCP.Client.Create(ctx, obj)).To(Succeed())
	}
	placement := webPlacement(ns)
	g.Expect(hubCP.Client.Create(ctx, placement)).To(Succeed())
	key := client.ObjectKeyFromObject(placement)

	// The workload reaches only the member whose labels match.
	g.Eventually(func(g Gomega) {
		expectPlacedOn(g, t, member1, ns, "hello")
		expectStatus(g, t, key, member1)
	}).Should(Succeed())
	g.Consistently(func(g Gomega) { expectAbsentFrom(g, t, member2, ns) }).Should(Succeed())

	// The decision is a standard PlacementDecision beside the Placement.
	pd := &cpv1alpha1.PlacementDecision{}
	g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-0"}, pd)).To(Succeed())
	g.Expect(pd.Labels).To(HaveKeyWithValue(cpv1alpha1.PlacementKeyLabel, "web"))
	g.Expect(pd.Labels).To(HaveKeyWithValue(cpv1alpha1.DecisionIndexLabel, "0"))
	g.Expect(pd.Decisions).To(ConsistOf(HaveField("ClusterProfileRef.Name", member1)))

	// The member records what it applied, with UIDs.
	applied := &lodestarworkv1alpha1.AppliedWork{}
	g.Expect(members[member1].Client.Get(ctx, client.ObjectKey{Name: appliedName(names.ClusterNamespace(member1), names.Work(ns, "web"))}, applied)).To(Succeed())
	memberCM := &corev1.ConfigMap{}
	g.Expect(members[member1].Client.Get(ctx, client.ObjectKeyFromObject(cm), memberCM)).To(Succeed())
	g.Expect(applied.Status.AppliedResources).To(ContainElement(And(
		HaveField("Kind", "ConfigMap"), HaveField("Name", "web-config"), HaveField("UID", memberCM.UID))))
	g.Expect(applied.Status.AppliedResources).To(HaveLen(2))

	// Editing the ConfigMap on the hub updates it on the member.
	g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
	cm.Data["greeting"] = "bonjour"
	g.Expect(hubCP.Client.Update(ctx, cm)).To(Succeed())
	g.Eventually(func(g Gomega) {
		expectPlacedOn(g, t, member1, ns, "bonjour")
		expectStatus(g, t, key, member1)
	}).Should(Succeed())

	// Relabelling the clusters moves the workload.
	setClusterLabels(t, member1, map[string]string{"env": "staging"})
	setClusterLabels(t, member2, map[string]string{"env": "production"})
	// The move is make-before-break: member-1 keeps its copy until member-2's is
	// Available. member-2 runs no deployment controller, so its status is written
	// here as that controller would.
	g.Eventually(func(g Gomega) { expectPlacedOn(g, t, member2, ns, "bonjour") }).Should(Succeed())
	setDeploymentStatus(t, ns, "web", 2)
	g.Eventually(func(g Gomega) {
		expectPlacedOn(g, t, member2, ns, "bonjour")
		expectAbsentFrom(g, t, member1, ns)
		expectStatus(g, t, key, member2)
	}).Should(Succeed())
	err := members[member1].Client.Get(ctx, client.ObjectKey{Name: appliedName(names.ClusterNamespace(member1), names.Work(ns, "web"))}, &lodestarworkv1alpha1.AppliedWork{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the AppliedWork of a removed Work must be gone")

	// Deleting the Placement removes the workload from the members, then the Placement.
	g.Expect(hubCP.Client.Delete(ctx, placement)).To(Succeed())
	g.Eventually(func(g Gomega) {
		expectAbsentFrom(g, t, member2, ns)
		works := &workv1alpha1.WorkList{}
		g.Expect(hubCP.Client.List(ctx, works, client.MatchingLabels{placementv1alpha1.PlacementNamespaceLabel: ns})).To(Succeed())
		g.Expect(works.Items).To(BeEmpty())
		err := hubCP.Client.Get(ctx, key, &placementv1alpha1.Placement{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}).Should(Succeed())
	// What was never placed stays on the hub.
	g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})).To(Succeed())
}

// The work generator skips Works whose manifests are byte-for-byte what it renders:
// that holds only if the API server hands back the bytes it was given.
func TestGeneratedWorkRoundTrips(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	_, cm, p := configMapPlacement(t)
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	w := &workv1alpha1.Work{}
	g.Eventually(func(g Gomega) {
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: names.ClusterNamespace(member1), Name: names.Work(p.Namespace, p.Name)}, w)).To(Succeed())
	}).Should(Succeed())
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(cm), u)).To(Succeed())
	manifests, revision, err := render.Manifests([]*unstructured.Unstructured{u}, false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(w.Annotations).To(HaveKeyWithValue(placementv1alpha1.RevisionAnnotation, revision))
	g.Expect(w.Spec.Workload.Manifests).To(HaveLen(1))
	g.Expect(string(w.Spec.Workload.Manifests[0].Raw)).To(Equal(string(manifests[0].Raw)))
}
