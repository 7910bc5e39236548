package placementstatus_test

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/reflection"
)

// A compromised agent reports, beside the Deployment its Work carries, another
// Deployment of the tenant's namespace (at the same ordinal, and at one the Work
// does not have): the hub reflects the carried one only, and writes nothing to
// the other's status.
func TestForgedReportsWriteNoHubStatus(t *testing.T) {
	f := newFixture(t, 1, placementv1alpha1.PlacementSpec{Reporting: placementv1alpha1.Reporting{Reflection: placementv1alpha1.ReflectionAggregate}})
	ctx := t.Context()
	g := f.g
	for _, name := range []string{"web", "payments"} {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1PodTemplate(name)}}
		g.Expect(hubCP.Client.Create(ctx, d)).To(Succeed())
	}
	raw, _ := json.Marshal(map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "web", "namespace": f.ns}})
	w := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: names.Work(f.ns, "web"), Namespace: names.ClusterNamespace(f.clusters[0]),
		Labels: managedBy(lookup.WorkLabels(f.placement)), Annotations: map[string]string{placementv1alpha1.RevisionAnnotation: "r1"}},
		Spec: workv1alpha1.WorkSpec{Workload: workv1alpha1.WorkloadTemplate{Manifests: []workv1alpha1.Manifest{{RawExtension: runtime.RawExtension{Raw: raw}}}}}}
	g.Expect(hubCP.Client.Create(ctx, w)).To(Succeed())
	report := func(name string, ordinal int) workv1alpha1.ManifestCondition {
		fb, _ := json.Marshal(map[string]any{"values": map[string]any{
			reflection.StatusValue:     map[string]any{"replicas": 3, "readyReplicas": 3, "availableReplicas": 3, "updatedReplicas": 3},
			reflection.GenerationValue: 1, reflection.HubGenerationValue: 1}})
		return workv1alpha1.ManifestCondition{
			Identifier: workv1alpha1.ResourceIdentifier{Ordinal: ordinal, Group: "apps", Version: "v1", Kind: "Deployment", Resource: "deployments", Namespace: f.ns, Name: name},
			Conditions: []metav1.Condition{condition(lodestarworkv1alpha1.ConditionApplied, true, "applied", w.Generation),
				condition(lodestarworkv1alpha1.ConditionAvailable, true, "available", w.Generation),
				{Type: lodestarworkv1alpha1.ConditionStatusFeedback, Status: metav1.ConditionTrue, Reason: lodestarworkv1alpha1.ReasonFeedbackReported,
					Message: string(fb), ObservedGeneration: w.Generation, LastTransitionTime: metav1.Now()}}}
	}
	w.Status.ManifestConditions = []workv1alpha1.ManifestCondition{report("payments", 0), report("web", 0), report("payments", 1)}
	w.Status.Conditions = []metav1.Condition{condition(lodestarworkv1alpha1.ConditionApplied, true, "all applied", w.Generation),
		condition(lodestarworkv1alpha1.ConditionAvailable, true, "all available", w.Generation)}
	g.Expect(hubCP.Client.Status().Update(ctx, w)).To(Succeed())

	deployment := func(g Gomega, name string) *appsv1.Deployment {
		d := &appsv1.Deployment{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, d)).To(Succeed())
		return d
	}
	g.Eventually(func(g Gomega) {
		g.Expect(deployment(g, "web").Status.ReadyReplicas).To(BeEquivalentTo(3), "the carried Deployment is reflected")
		st := f.status(g)
		g.Expect(st.Clusters).To(HaveLen(1))
		g.Expect(st.Clusters[0].Objects).NotTo(ContainElement(HaveField("Name", "payments")))
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(deployment(g, "payments").Status.ReadyReplicas).To(BeZero(), "no status written for what the Work does not carry")
	}).Should(Succeed())
}

func corev1PodTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}}}
}
