package integration

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/render"
)

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

// Admission refuses what the CRD's own rules cannot see: a Placement naming a
// cluster-scoped kind (the placement-scope policy). The CRD's rules
// (x-kubernetes-validations) are tested once, in test/crdrules.
func TestAdmissionRefusesClusterScopedKinds(t *testing.T) {
	g := NewWithT(t)
	p := webPlacement(newNamespace(t))
	p.Spec.ResourceSelectors[0] = placementv1alpha1.ResourceSelector{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}
	err := hubCP.Client.Create(t.Context(), p)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("rbac.authorization.k8s.io/ClusterRole is cluster-scoped: a platform admin places it with a ClusterPlacement"))
}

// A Placement whose selectors can never select anything gets a False condition
// with a reason and a Warning event, and places nothing.
func TestInvalidResourceSelector(t *testing.T) {
	// A cluster-scoped kind of a CRD: admission cannot know its scope.
	clusterScoped := "g" + rand.String(6) + ".example.com"
	createWidgetCRD(t, hubCP.Client, clusterScoped, apiextensionsv1.ClusterScoped, "v1")
	tests := []struct {
		name     string
		selector placementv1alpha1.ResourceSelector
		message  string
	}{
		{"unknown kind", placementv1alpha1.ResourceSelector{Group: "example.com", Version: "v1", Kind: "Widget"}, "does not serve kind"},
		{"kind typo", placementv1alpha1.ResourceSelector{Group: "apps", Version: "v1", Kind: "Deploymnet"}, "does not serve kind apps/v1, Kind=Deploymnet; did you mean apps/v1 Deployment?"},
		{"cluster-scoped kind", placementv1alpha1.ResourceSelector{Group: clusterScoped, Version: "v1", Kind: "Widget"}, "cluster-scoped"},
		{"a ServiceImport", placementv1alpha1.ResourceSelector{Group: "multicluster.x-k8s.io", Version: "v1beta1", Kind: "ServiceImport"},
			"ServiceImport are never placed: ServiceImports are made by the Multicluster Services controller"},
		{"bad label selector", placementv1alpha1.ResourceSelector{Version: "v1", Kind: "ConfigMap", LabelSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}},
		}}, "labelSelector"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			p := webPlacement(ns)
			p.Spec.ResourceSelectors = []placementv1alpha1.ResourceSelector{tt.selector}
			g.Expect(hubCP.Client.Create(t.Context(), p)).To(Succeed())

			g.Eventually(func(g Gomega) {
				c := placementCondition(g, t, client.ObjectKeyFromObject(p), placementv1alpha1.RenderedCondition)
				g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonInvalidResourceSelector))
				g.Expect(c.Message).To(ContainSubstring(tt.message))

				events := &eventsv1.EventList{}
				g.Expect(hubCP.Client.List(t.Context(), events, client.InNamespace(ns))).To(Succeed())
				g.Expect(events.Items).To(ContainElement(And(
					HaveField("Reason", placementv1alpha1.ReasonInvalidResourceSelector),
					HaveField("Type", "Warning"),
					HaveField("Regarding.Name", p.Name),
				)))
			}).Should(Succeed())
		})
	}
}

// A Placement whose selectors select nothing (a label typo) does not read as
// applied or available: Applied and Available say nothing is selected, and
// turn True once the object carries the label.
func TestNothingSelectedIsNotSuccess(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns, Labels: map[string]string{"app": "shop"}}}
	g.Expect(hubCP.Client.Create(t.Context(), cm)).To(Succeed())
	p := webPlacement(ns)
	p.Spec.ResourceSelectors = []placementv1alpha1.ResourceSelector{{Version: "v1", Kind: "ConfigMap",
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shpo"}}}}
	p.Spec.Scheduling = placementv1alpha1.Scheduling{ClusterNames: []string{member1}}
	g.Expect(hubCP.Client.Create(t.Context(), p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)
	g.Eventually(func(g Gomega) {
		for _, ct := range []string{placementv1alpha1.AppliedCondition, placementv1alpha1.AvailableCondition} {
			c := placementCondition(g, t, key, ct)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse), ct)
			g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonNothingSelected), ct)
			g.Expect(c.Message).To(ContainSubstring("the resource selectors select nothing"))
		}
	}).Should(Succeed())

	g.Expect(updateOnHub(cm, func(c *corev1.ConfigMap) { c.Labels["app"] = "shpo" })).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(placementCondition(g, t, key, placementv1alpha1.AvailableCondition).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(placementCondition(g, t, key, placementv1alpha1.AppliedCondition).Status).To(Equal(metav1.ConditionTrue))
	}).Should(Succeed())
}

// A Placement without clusterSelector or clusterNames chooses no cluster, and
// says how to choose every one.
func TestNoClusterSelectorSaysSo(t *testing.T) {
	g := NewWithT(t)
	p := webPlacement(newNamespace(t))
	p.Spec.Scheduling = placementv1alpha1.Scheduling{}
	g.Expect(hubCP.Client.Create(t.Context(), p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := placementCondition(g, t, client.ObjectKeyFromObject(p), placementv1alpha1.ScheduledCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonNoMatchingClusters))
		g.Expect(c.Message).To(ContainSubstring("spec.scheduling has no clusterSelector and no clusterNames, so no cluster is chosen: clusterSelector: {} chooses every cluster"))
	}).Should(Succeed())
}

// A Placement whose cluster selector matches nothing says so.
func TestNoMatchingClusters(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	p := webPlacement(ns)
	p.Spec.Scheduling.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "nowhere"}}
	g.Expect(hubCP.Client.Create(t.Context(), p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := placementCondition(g, t, client.ObjectKeyFromObject(p), placementv1alpha1.ScheduledCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonNoMatchingClusters))
		applied := placementCondition(g, t, client.ObjectKeyFromObject(p), placementv1alpha1.AppliedCondition)
		g.Expect(applied.Reason).To(Equal(placementv1alpha1.ReasonNoClusters))
	}).Should(Succeed())
}
