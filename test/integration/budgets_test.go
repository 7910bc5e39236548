package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/fleet"
	"github.com/lodestar-dev/lodestar/internal/testenv"
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

	g.Expect(fleet.Drain(ctx, hubCP.Client, "", member2, time.Now(), fleet.DrainOptions{})).To(Succeed())
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

// A platform admin's forced drain (`kubectl lodestar drain --force-after`)
// overrules tenants once its time comes: the budgeted copy that would stay
// for good leaves, a tenant's toleration of the drain ends, each Placement
// overruled records it (event DrainOverruled; the budget's copy), and
// nothing else of the namespace goes. Typed as an admin types it.
func TestForcedDrainOverrulesTenants(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	placementsGoAtEnd(t, ns)
	files, doc := examples(t, "budgets", 1)
	for _, obj := range exampleObjects(t, files[0], doc, ns) {
		g.Expect(hubCP.Client.Create(ctx, obj)).To(Succeed(), "%s %s", obj.GetKind(), obj.GetName())
	}
	// A tenant that tolerates the drain as long as a tenant may.
	createYAML(t, ns, `apiVersion: v1
kind: ConfigMap
metadata:
  name: patient
data:
  greeting: hello
---
apiVersion: placement.lodestar.dev/v1alpha1
kind: Placement
metadata:
  name: patient
spec:
  resourceSelectors:
  - {version: v1, kind: ConfigMap, name: patient}
  scheduling:
    clusterNames: [member-2]
    tolerations:
    - {key: lodestar.dev/drain, operator: Exists, effect: NoExecute, tolerationSeconds: 600}`)
	on := func(name string) func() error {
		return func() error {
			return members[member2].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.ConfigMap{})
		}
	}
	for _, name := range []string{"web", "patient"} {
		g.Eventually(func(g Gomega) {
			g.Expect(placementCondition(g, t, client.ObjectKey{Namespace: ns, Name: name}, placementv1alpha1.AvailableCondition).Status).To(Equal(metav1.ConditionTrue))
		}).Should(Succeed())
	}
	t.Cleanup(func() { _ = fleet.Uncordon(context.Background(), hubCP.Client, "", member2) })
	lodestar := filepath.Join(os.Getenv(testenv.BinEnv), "kubectl-lodestar")

	// Drained, not forced: both stay (the budget; the toleration).
	out, err := hubTool(t, testenv.EventuallyTimeout, lodestar, "drain", member2)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).NotTo(ContainSubstring("overrules tenants"))
	g.Eventually(func(g Gomega) {
		c := placementCondition(g, t, client.ObjectKey{Namespace: ns, Name: "web"}, placementv1alpha1.ProgressingCondition)
		g.Expect(c.Message).To(ContainSubstring("kept by spec.strategy.disruptionBudget: member-2"))
	}).Should(Succeed())
	g.Consistently(func() error { return errors.Join(on("web-settings")(), on("patient")()) }, 3*time.Second, 500*time.Millisecond).Should(Succeed())

	out, err = hubTool(t, testenv.EventuallyTimeout, lodestar, "drain", member2, "--force-after", "-1s")
	g.Expect(err).To(HaveOccurred())
	g.Expect(out).To(ContainSubstring("a drain cannot be forced before it starts"))

	// Forced at once: both go, and say why.
	out, err = hubTool(t, testenv.EventuallyTimeout, lodestar, "drain", member2, "--force-after", "0s")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(And(ContainSubstring("the drain overrules tenants"), ContainSubstring(ns+"/web: spec.strategy.disruptionBudget.minAvailableClusters 2")))
	g.Eventually(on("web-settings")).Should(Satisfy(apierrors.IsNotFound))
	g.Eventually(on("patient")).Should(Satisfy(apierrors.IsNotFound))
	g.Eventually(func(g Gomega) []string {
		list := &eventsv1.EventList{}
		g.Expect(hubCP.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		var notes []string
		for _, e := range list.Items {
			if e.Reason == placementv1alpha1.ReasonDrainOverruled && e.Regarding.Name == "web" {
				notes = append(notes, e.Note)
			}
		}
		return notes
	}).Should(ContainElement(ContainSubstring("removed the Works of cluster member-2, which a forced drain overruled spec.strategy.disruptionBudget for")))
	g.Eventually(func(g Gomega) {
		p := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "patient"}, p)).To(Succeed())
		g.Expect(p.Status.Scheduling).NotTo(BeNil())
		g.Expect(fmt.Sprintf("%+v", p.Status.Scheduling.Clusters)).To(ContainSubstring("tolerated until the drain overruled tenants"))
	}).Should(Succeed())
	// What the namespace has elsewhere stays.
	g.Expect(members[member1].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-settings"}, &corev1.ConfigMap{})).To(Succeed())
}
