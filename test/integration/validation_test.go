package integration

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/hub/scheduler"
)

// The API server rejects malformed Placements with the CRD's own messages.
func TestPlacementSchemaValidation(t *testing.T) {
	ns := newNamespace(t)
	tests := []struct {
		name    string
		mutate  func(*placementv1alpha1.Placement)
		message string
	}{
		{
			name: "name and labelSelector together",
			mutate: func(p *placementv1alpha1.Placement) {
				p.Spec.ResourceSelectors[0].LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
			},
			message: "name and labelSelector are mutually exclusive",
		},
		{
			name:    "no resource selector",
			mutate:  func(p *placementv1alpha1.Placement) { p.Spec.ResourceSelectors = nil },
			message: "spec.resourceSelectors",
		},
		{
			name:    "missing kind, with a name",
			mutate:  func(p *placementv1alpha1.Placement) { p.Spec.ResourceSelectors[0].Kind = "" },
			message: "a selector without kind selects by labelSelector alone",
		},
		{
			name: "cluster-scoped kind, refused at admission",
			mutate: func(p *placementv1alpha1.Placement) {
				p.Spec.ResourceSelectors[0] = placementv1alpha1.ResourceSelector{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}
			},
			message: "rbac.authorization.k8s.io/ClusterRole is cluster-scoped: a platform admin places it with a ClusterPlacement",
		},
		{
			name:    "missing version",
			mutate:  func(p *placementv1alpha1.Placement) { p.Spec.ResourceSelectors[0].Version = "" },
			message: "kind and version go together",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			p := webPlacement(ns)
			tt.mutate(p)
			err := hubCP.Client.Create(t.Context(), p)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tt.message))
		})
	}
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
		{"cluster-scoped kind", placementv1alpha1.ResourceSelector{Group: clusterScoped, Version: "v1", Kind: "Widget"}, "cluster-scoped"},
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

// externalDecision is a PlacementDecision as an external scheduler writes it for
// p (created): owned by p, for p's scheduler, naming refs.
func externalDecision(p *placementv1alpha1.Placement, name string, refs ...cpv1alpha1.ClusterProfileReference) *cpv1alpha1.PlacementDecision {
	pd := &cpv1alpha1.PlacementDecision{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: p.Namespace, Labels: map[string]string{cpv1alpha1.PlacementKeyLabel: p.Name},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: placementv1alpha1.GroupVersion.String(), Kind: "Placement", Name: p.Name, UID: p.UID,
			}},
		},
		SchedulerName: p.Spec.Scheduling.SchedulerName,
	}
	for _, ref := range refs {
		pd.Decisions = append(pd.Decisions, cpv1alpha1.ClusterDecision{ClusterProfileRef: ref, Reason: "acme says so"})
	}
	return pd
}

// Decisions written by another scheduler are consumed like Lodestar's own.
func TestExternalSchedulerDecisions(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	_, cm, p := configMapPlacement(t)
	p.Spec.Scheduling.SchedulerName = "acme-scheduler"
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())

	pd := externalDecision(p, "acme-web", cpv1alpha1.ClusterProfileReference{Namespace: scheduler.DefaultClusterSetNamespace, Name: member2})
	g.Expect(hubCP.Client.Create(ctx, pd)).To(Succeed())
	g.Eventually(func(g Gomega) {
		expectCM := &corev1.ConfigMap{}
		g.Expect(members[member2].Client.Get(ctx, client.ObjectKeyFromObject(cm), expectCM)).To(Succeed())
		c := placementCondition(g, t, client.ObjectKeyFromObject(p), placementv1alpha1.AppliedCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
	}).Should(Succeed())
	got := &placementv1alpha1.Placement{}
	g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
	g.Expect(got.Status.Conditions).NotTo(ContainElement(HaveField("Type", placementv1alpha1.ScheduledCondition)), "Lodestar's scheduler stays out")
}
