package integration

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

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
