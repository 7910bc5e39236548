package integration

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/agent/work"
	"github.com/lodestar-dev/lodestar/internal/names"
)

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

// A Deployment placed on a member with a controller manager, a scheduler and a
// fake node becomes Available, is reported Available on the Work and, aggregated,
// on the Placement; scaling it up on the hub shows Progressing until it is
// available again.
func TestDeploymentBecomesAvailable(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	_, deploy, _ := webObjects(ns)
	g.Expect(hubCP.Client.Create(ctx, deploy)).To(Succeed())
	p := webPlacement(ns)
	p.Spec.ResourceSelectors = p.Spec.ResourceSelectors[1:]
	p.Spec.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": fullMember}}
	setClusterLabels(t, fullMember, map[string]string{"kubernetes.io/metadata.name": fullMember, "env": "production"})
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())

	workKey := client.ObjectKey{Namespace: names.ClusterNamespace(fullMember), Name: names.Work(ns, p.Name)}
	g.Eventually(func(g Gomega) {
		w := &workv1alpha1.Work{}
		g.Expect(hubCP.Client.Get(ctx, workKey, w)).To(Succeed())
		g.Expect(manifestCondition(g, w, 0, work.ConditionAvailable).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(meta.IsStatusConditionTrue(w.Status.Conditions, work.ConditionAvailable)).To(BeTrue())
		g.Expect(meta.IsStatusConditionFalse(w.Status.Conditions, work.ConditionProgressing)).To(BeTrue())
		g.Expect(meta.IsStatusConditionFalse(w.Status.Conditions, work.ConditionDegraded)).To(BeTrue())

		got := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, placementv1alpha1.AvailableCondition)).To(BeTrue())
		g.Expect(got.Status.AvailableClusters).To(BeEquivalentTo(1))
		g.Expect(got.Status.Clusters).To(ConsistOf(HaveField("Available", metav1.ConditionTrue)))
	}).Should(Succeed())

	member := &appsv1.Deployment{}
	g.Expect(members[fullMember].Client.Get(ctx, client.ObjectKeyFromObject(deploy), member)).To(Succeed())
	g.Expect(member.Status.AvailableReplicas).To(BeEquivalentTo(2), "the pods really run on the fake node")
	pods := &corev1.PodList{}
	g.Expect(members[fullMember].Client.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
	g.Expect(pods.Items).To(HaveEach(HaveField("Spec.NodeName", "kwok-node-1")))
}
