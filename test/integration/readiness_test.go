package integration

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
)

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
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "migrate", Namespace: ns, Labels: map[string]string{"app": "web"}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "migrate", Image: "busybox:1.36"}},
		}}},
	}
	g.Expect(hubCP.Client.Create(ctx, job)).To(Succeed())
	p := webPlacement(ns)
	p.Spec.ResourceSelectors = []placementv1alpha1.ResourceSelector{
		p.Spec.ResourceSelectors[1],
		{Group: "batch", Version: "v1", Kind: "Job", Name: "migrate"},
	}
	p.Spec.Reporting.Feedback = []lodestarworkv1alpha1.FeedbackRule{{Group: "apps", Kind: "Deployment", Fields: []lodestarworkv1alpha1.FeedbackField{
		{Name: "readyReplicas", JSONPath: ".status.readyReplicas"},
		{Name: "percentReady", CEL: "self.status.readyReplicas * 100 / self.spec.replicas"},
	}}}
	p.Spec.Scheduling.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": fullMember}}
	setClusterLabels(t, fullMember, map[string]string{"kubernetes.io/metadata.name": fullMember, "env": "production"})
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())

	workKey := client.ObjectKey{Namespace: names.ClusterNamespace(fullMember), Name: names.Work(ns, p.Name)}
	g.Eventually(func(g Gomega) {
		w := &workv1alpha1.Work{}
		g.Expect(hubCP.Client.Get(ctx, workKey, w)).To(Succeed())
		// Manifests are ordered by group and kind: the Deployment, then the Job.
		g.Expect(manifestCondition(g, w, 0, lodestarworkv1alpha1.ConditionAvailable).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(manifestCondition(g, w, 1, lodestarworkv1alpha1.ConditionAvailable).Reason).To(Equal("JobComplete"))
		g.Expect(manifestCondition(g, w, 0, lodestarworkv1alpha1.ConditionStatusFeedback).Message).To(MatchJSON(`{"values":{"readyReplicas":2,"percentReady":100}}`))
		g.Expect(meta.IsStatusConditionTrue(w.Status.Conditions, lodestarworkv1alpha1.ConditionAvailable)).To(BeTrue())
		g.Expect(meta.IsStatusConditionFalse(w.Status.Conditions, lodestarworkv1alpha1.ConditionProgressing)).To(BeTrue())
		g.Expect(meta.IsStatusConditionFalse(w.Status.Conditions, lodestarworkv1alpha1.ConditionDegraded)).To(BeTrue())

		got := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, placementv1alpha1.AvailableCondition)).To(BeTrue())
		g.Expect(got.Status.AvailableClusters).To(HaveValue(BeEquivalentTo(1)))
		g.Expect(got.Status.Clusters).To(ConsistOf(HaveField("Available", metav1.ConditionTrue)))
	}).Should(Succeed())

	member := &appsv1.Deployment{}
	g.Expect(members[fullMember].Client.Get(ctx, client.ObjectKeyFromObject(deploy), member)).To(Succeed())
	g.Expect(member.Status.AvailableReplicas).To(BeEquivalentTo(2), "the pods really run on the fake node")
	pods := &corev1.PodList{}
	g.Expect(members[fullMember].Client.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
	g.Expect(pods.Items).To(HaveEach(HaveField("Spec.NodeName", "kwok-node-1")))
}

// Feedback rules whose expressions do not compile stop the Placement before any
// Work changes: Rendered is False, naming the rule. (The API server's own rules
// for feedback are tested in test/crdrules.)
func TestStatusFeedbackValidation(t *testing.T) {
	g := NewWithT(t)
	p := webPlacement(newNamespace(t))
	p.Spec.Reporting.Feedback = []lodestarworkv1alpha1.FeedbackRule{{Kind: "ConfigMap", Fields: []lodestarworkv1alpha1.FeedbackField{{Name: "a", CEL: "self.data.("}}}}
	g.Expect(hubCP.Client.Create(t.Context(), p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := placementCondition(g, t, client.ObjectKeyFromObject(p), placementv1alpha1.RenderedCondition)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonInvalidStatusFeedback))
		g.Expect(c.Message).To(ContainSubstring("reporting.feedback[0].fields[0].cel"))
	}).Should(Succeed())
}

// An apply strategy the agents cannot apply, though the API server lets it
// through (an ignored field's path with a bare ~), stops the Placement the same
// way: the hub validates it as the agents do.
func TestApplyStrategyValidation(t *testing.T) {
	g := NewWithT(t)
	p := webPlacement(newNamespace(t))
	p.Spec.ApplyStrategy = &lodestarworkv1alpha1.ApplyStrategy{IgnoreFields: []lodestarworkv1alpha1.IgnoreField{{Kind: "ConfigMap", Paths: []string{"/metadata/a~b"}}}}
	g.Expect(hubCP.Client.Create(t.Context(), p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := placementCondition(g, t, client.ObjectKeyFromObject(p), placementv1alpha1.RenderedCondition)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonInvalidApplyStrategy))
		g.Expect(c.Message).To(ContainSubstring("~ is escaped as ~0"))
	}).Should(Succeed())
}
