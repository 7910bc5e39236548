package workapply

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
)

func TestPlanReadsDriftAndDeletionPolicies(t *testing.T) {
	g := NewWithT(t)
	w := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}
	p, err := For(w)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Strategy.WhenDrifted).To(Equal(lodestarworkv1alpha1.DriftCorrect))
	g.Expect(p.DeletionPolicy(w)).To(Equal(lodestarworkv1alpha1.DeletionDelete))

	w.Annotations[lodestarworkv1alpha1.ApplyStrategyAnnotation] = `{"whenDrifted":"Report","deletionPolicy":"Orphan","ignoreFields":[{"group":"apps","kind":"Deployment","paths":["/spec/replicas"]}]}`
	p, err = For(w)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.DeletionPolicy(w)).To(Equal(lodestarworkv1alpha1.DeletionOrphan))
	w.Annotations[lodestarworkv1alpha1.ApplyStrategyAnnotation] = `{"deletionPolicy":"DeleteTakenOver"}`
	p, err = For(w)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.DeletionPolicy(w)).To(Equal(lodestarworkv1alpha1.DeletionDeleteTakenOver))
	w.Annotations[lodestarworkv1alpha1.DeletionPolicyAnnotation] = lodestarworkv1alpha1.DeletionPolicyOrphan
	g.Expect(p.DeletionPolicy(w)).To(Equal(lodestarworkv1alpha1.DeletionOrphan), "unjoin --orphan wins")
	delete(w.Annotations, lodestarworkv1alpha1.DeletionPolicyAnnotation)
	w.Annotations[lodestarworkv1alpha1.ApplyStrategyAnnotation] = `{"whenDrifted":"Report","deletionPolicy":"Orphan","ignoreFields":[{"group":"apps","kind":"Deployment","paths":["/spec/replicas"]}]}`
	p, err = For(w)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Ignored(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "web")).To(HaveLen(1))
	g.Expect(p.Ignored(schema.GroupKind{Kind: "ConfigMap"}, "web")).To(BeEmpty())

	for _, bad := range []string{`{"whenDrifted":"Sometimes"}`, `{"deletionPolicy":"Shred"}`, `{"ignoreFields":[{"kind":"Deployment","paths":["spec.replicas"]}]}`} {
		w.Annotations[lodestarworkv1alpha1.ApplyStrategyAnnotation] = bad
		_, err = For(w)
		g.Expect(err).To(HaveOccurred(), bad)
	}
}
