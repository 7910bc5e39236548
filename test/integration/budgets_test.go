package integration

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/fleet"
)

// A drain that would break a Placement's disruption budget waits and says
// so; with the budget lowered, the copy leaves: the docs' example.
func TestDrainHonoursTheDisruptionBudget(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	placementsGoAtEnd(t, ns)
	files, doc := examples(t, "budgets", 1)
	for _, obj := range exampleObjects(t, files[0], doc, ns) {
		g.Expect(hubCP.Client.Create(ctx, obj)).To(Succeed(), "%s %s", obj.GetKind(), obj.GetName())
	}
	key := client.ObjectKey{Namespace: ns, Name: "web"}
	onMember2 := func() error {
		return members[member2].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-settings"}, &corev1.ConfigMap{})
	}
	g.Eventually(func(g Gomega) {
		g.Expect(placementCondition(g, t, key, placementv1alpha1.AvailableCondition).Status).To(Equal(metav1.ConditionTrue))
	}).Should(Succeed())

	g.Expect(fleet.Drain(ctx, hubCP.Client, "", member2, time.Now(), false)).To(Succeed())
	t.Cleanup(func() { _ = fleet.Uncordon(context.Background(), hubCP.Client, "", member2) })
	budgeted, err := fleet.BudgetedOn(ctx, hubCP.Client, member2)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(budgeted).To(ContainElement(And(HaveField("Namespace", ns), HaveField("Placement", "web"),
		HaveField("Why", ContainSubstring("minAvailableClusters 2")))), "the drain names the Placements it paces")

	// No other cluster to go to: without the budget the copy would go at
	// once; with it, it stays, and the Placement says why.
	g.Eventually(func(g Gomega) {
		c := placementCondition(g, t, key, placementv1alpha1.ProgressingCondition)
		g.Expect(c.Message).To(ContainSubstring("kept by spec.strategy.disruptionBudget: member-2 (the disruption budget keeps 2 clusters Available; without it 1 would be)"))
	}).Should(Succeed())
	g.Expect(onMember2()).To(Succeed())
	g.Consistently(onMember2, 3*time.Second, 500*time.Millisecond).Should(Succeed())

	// A budget of 1: the drain goes on.
	g.Eventually(func() error {
		return updateOnHub(&placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}, func(p *placementv1alpha1.Placement) {
			p.Spec.Strategy.DisruptionBudget.MinAvailableClusters = intstr.FromInt32(1)
		})
	}).Should(Succeed())
	g.Eventually(onMember2).Should(Satisfy(apierrors.IsNotFound))
	g.Eventually(func(g Gomega) {
		c := placementCondition(g, t, key, placementv1alpha1.ProgressingCondition)
		g.Expect(c.Message).NotTo(ContainSubstring("disruptionBudget"))
	}).Should(Succeed())
}
