package charts

import (
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/fleet"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// The quick start's hub (testenv.StartHubCluster) behaves like a real hub: the
// ClusterRoles admin and edit carry the tenant role (aggregation), a
// ServiceAccount token Secret is filled, and deleting a tenant namespace deletes
// its Placements, so what they placed leaves the member, and the namespace goes
// (with no namespace controller it stayed Terminating and the app stayed).
func TestQuickstartHubBehavesLikeAHub(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	f := runFleet(t, testenv.StartHubCluster)
	hubCP, memberCP := f.hub, f.member

	for _, role := range []string{"admin", "edit"} {
		g.Eventually(func(g Gomega) {
			cr := &rbacv1.ClusterRole{}
			g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Name: role}, cr)).To(Succeed())
			g.Expect(slices.ContainsFunc(cr.Rules, func(r rbacv1.PolicyRule) bool {
				return slices.Contains(r.APIGroups, placementv1alpha1.GroupVersion.Group) && slices.Contains(r.Resources, "placements")
			})).To(BeTrue(), "%s aggregates lodestar:tenant: %v", role, cr.Rules)
		}).Should(Succeed())
	}

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}
	g.Expect(hubCP.Client.Create(ctx, ns)).To(Succeed())
	g.Expect(fleet.BindClusterSet(ctx, hubCP.Client, ns.Name, placementv1alpha1.DefaultClusterSet)).To(Succeed())

	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "robot"}}
	g.Expect(hubCP.Client.Create(ctx, sa)).To(Succeed())
	token := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "robot-token",
		Annotations: map[string]string{corev1.ServiceAccountNameKey: sa.Name}}, Type: corev1.SecretTypeServiceAccountToken}
	g.Expect(hubCP.Client.Create(ctx, token)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(token), token)).To(Succeed())
		g.Expect(token.Data[corev1.ServiceAccountTokenKey]).NotTo(BeEmpty(), "the token controller fills the Secret")
	}).Should(Succeed())

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "settings"}, Data: map[string]string{"k": "v"}}
	g.Expect(hubCP.Client.Create(ctx, cm)).To(Succeed())
	p := &placementv1alpha1.Placement{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "settings"},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{{Version: "v1", Kind: "ConfigMap", Name: cm.Name}},
			Scheduling:        placementv1alpha1.Scheduling{ClusterSelector: &metav1.LabelSelector{}},
		},
	}
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, placementv1alpha1.AvailableCondition)).To(BeTrue(), "%v", got.Status.Conditions)
		g.Expect(memberCP.Client.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})).To(Succeed())
	}).WithTimeout(2 * testenv.EventuallyTimeout).Should(Succeed())

	g.Expect(hubCP.Client.Delete(ctx, ns)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := memberCP.Client.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the placed ConfigMap leaves the member: %v", err)
		err = hubCP.Client.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the tenant namespace is deleted: %v", err)
	}).WithTimeout(2 * testenv.EventuallyTimeout).Should(Succeed())
}
