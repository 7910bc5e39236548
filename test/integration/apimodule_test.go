package integration

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	placementac "github.com/lodestar-dev/lodestar/api/client/applyconfiguration/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/api/client/informers/externalversions"
	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// The API module's generated clients on a real hub: an apply configuration
// writes a ConsumerAccessGrant as a platform team's program would, a shared
// informer's lister sees it and the status the hub writes, and the typed
// client deletes it.
func TestAPIModuleClients(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	cs := hubCP.Typed()
	name := "typed-" + ns
	_, err := cs.PlacementV1alpha1().ConsumerAccessGrants().Apply(ctx, placementac.ConsumerAccessGrant(name).WithSpec(
		placementac.ConsumerAccessGrantSpec().WithClusterSet(placementv1alpha1.DefaultClusterSet).
			WithConsumers(placementac.ConsumerRef().WithNamespace(ns).WithName("tool")).
			WithRules(rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list"}})),
		metav1.ApplyOptions{FieldManager: "platform-tool", Force: true})
	g.Expect(err).NotTo(HaveOccurred())

	factory := externalversions.NewSharedInformerFactory(cs, time.Hour)
	grants := factory.Placement().V1alpha1().ConsumerAccessGrants()
	lister := grants.Lister()
	factory.Start(ctx.Done())
	t.Cleanup(factory.Shutdown)
	g.Expect(cache.WaitForCacheSync(ctx.Done(), grants.Informer().HasSynced)).To(BeTrue())
	g.Eventually(func(g Gomega) {
		got, err := lister.Get(name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, placementv1alpha1.ReadyCondition)).To(BeTrue())
		g.Expect(got.Status.Applied).To(HaveValue(BeEquivalentTo(2)))
	}).Should(Succeed())

	g.Expect(cs.PlacementV1alpha1().ConsumerAccessGrants().Delete(ctx, name, metav1.DeleteOptions{})).To(Succeed())
	g.Eventually(func() bool {
		_, err := lister.Get(name)
		return apierrors.IsNotFound(err)
	}).Should(BeTrue(), "the grant goes once the members' roles are gone")
}
