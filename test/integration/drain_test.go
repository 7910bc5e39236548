package integration

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/clusterworks"
	"github.com/lodestar-dev/lodestar/internal/fleet"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// onOneThenEither creates p (numberOfClusters 1) on the production member first,
// waits until its objects are available there, then widens it to either member:
// it stays on member-1, which the test then drains.
func onOneThenEither(t *testing.T, p *placementv1alpha1.Placement) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	p.Spec.Scheduling.NumberOfClusters = ptr.To[int32](1)
	p.Spec.Scheduling.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "production"}}
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		w := workOf(g, p, member1)
		g.Expect(w).NotTo(BeNil())
		g.Expect(workAvailable(w)).To(BeTrue())
	}).Should(Succeed())
	g.Expect(updateOnHub(p, func(p *placementv1alpha1.Placement) {
		p.Spec.Scheduling.ClusterSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"production", "staging"}},
		}}
	})).To(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(workOf(g, p, member2)).To(BeNil(), "one cluster is enough: the Placement stays where it is")
	}).Should(Succeed())

	g.Expect(fleet.Drain(ctx, hubCP.Client, "", member1, time.Now())).To(Succeed())
	t.Cleanup(func() { _ = fleet.Uncordon(context.Background(), hubCP.Client, "", member1) })
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

// Draining moves a Placement away make-before-break: the drained cluster keeps its
// copy until the replacement's copy is Available, and not a moment less.
func TestDrainIsMakeBeforeBreak(t *testing.T) {
	g := NewWithT(t)
	_, _, p := configMapPlacement(t)
	onOneThenEither(t, p)

	// Until member-1's copy is gone, whenever it is gone or going, member-2's is Available.
	g.Eventually(func(g Gomega) {
		old, replacement := workOf(g, p, member1), workOf(g, p, member2)
		if old == nil || !old.DeletionTimestamp.IsZero() {
			g.Expect(replacement).NotTo(BeNil(), "member-1 left before a replacement existed")
			g.Expect(workAvailable(replacement)).To(BeTrue(), "member-1 left before member-2 was Available")
		}
		g.Expect(old).To(BeNil())
	}).WithPolling(20 * time.Millisecond).Should(Succeed())
	expectAbsentFrom(g, t, member1, p.Namespace)
}

// A replacement that never becomes Available keeps the drained cluster chosen.
func TestDrainKeepsTheClusterUntilTheReplacementIsAvailable(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	createWebApp(t, ns, nil)
	// member-2 has no controller manager: its Deployment never becomes Available.
	p := webPlacement(ns)
	onOneThenEither(t, p)

	g.Eventually(func(g Gomega) {
		g.Expect(workOf(g, p, member2)).NotTo(BeNil(), "the replacement is placed")
		got := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(got.Status.Rollout).NotTo(BeNil())
		g.Expect(got.Status.Rollout.Clusters).To(ContainElement(And(
			HaveField("Name", member1), HaveField("State", placementv1alpha1.ClusterSkipped))))
		progressing := meta.FindStatusCondition(got.Status.Conditions, placementv1alpha1.ProgressingCondition)
		g.Expect(progressing).NotTo(BeNil())
		g.Expect(progressing.Reason).To(Equal(placementv1alpha1.ReasonRolloutInProgress))
		g.Expect(progressing.Message).To(ContainSubstring("keeping " + member1))
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		old := workOf(g, p, member1)
		g.Expect(old).NotTo(BeNil())
		g.Expect(old.DeletionTimestamp.IsZero()).To(BeTrue())
	}).WithTimeout(5 * time.Second).Should(Succeed())
	expectPlacedOn(g, t, member1, ns, "hello")
}
