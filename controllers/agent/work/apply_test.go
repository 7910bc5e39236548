package work

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/diff"
)

func deployment(replicas int64, image string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "demo"},
		"spec": map[string]any{"replicas": replicas, "template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "web", "image": image}},
		}}},
	}}
}

func TestWithIgnored(t *testing.T) {
	g := NewWithT(t)
	replicas, _ := diff.ParsePointer("/spec/replicas")
	labels, _ := diff.ParsePointer("/metadata/labels/team")
	manifest, live := deployment(2, "nginx:1"), deployment(5, "nginx:0")

	out := withIgnored(manifest, live, []diff.Pointer{replicas, labels})
	g.Expect(out.Object["spec"].(map[string]any)["replicas"]).To(BeEquivalentTo(5), "the member's value")
	g.Expect(out.GetLabels()).To(BeEmpty(), "absent on the member: not set")
	g.Expect(manifest.Object["spec"].(map[string]any)["replicas"]).To(BeEquivalentTo(2), "the manifest itself is not changed")
	g.Expect(withIgnored(manifest, nil, []diff.Pointer{replicas})).To(BeIdenticalTo(manifest), "on creation the manifest's value is used")

	live.SetResourceVersion("42")
	g.Expect(at(out, live).GetResourceVersion()).To(Equal("42"))
}

func TestManifestHash(t *testing.T) {
	g := NewWithT(t)
	a, b := deployment(2, "nginx:1"), deployment(2, "nginx:1")
	g.Expect(manifestHash(a)).To(HaveLen(32))
	g.Expect(manifestHash(a)).To(Equal(manifestHash(b)), "the same content, the same hash")
	g.Expect(manifestHash(a)).NotTo(Equal(manifestHash(deployment(3, "nginx:1"))))
}

func TestOwnership(t *testing.T) {
	g := NewWithT(t)
	applied := &lodestarworkv1alpha1.AppliedWork{ObjectMeta: metav1.ObjectMeta{Name: "w", UID: "applied-uid"}}
	obj := func(uid types.UID, owners ...metav1.OwnerReference) *unstructured.Unstructured {
		u := deployment(1, "x")
		u.SetUID(uid)
		u.SetOwnerReferences(owners)
		return u
	}
	rec := &lodestarworkv1alpha1.AppliedResource{UID: "obj-uid"}
	other := metav1.OwnerReference{APIVersion: lodestarworkv1alpha1.GroupVersion.String(), Kind: "AppliedWork", Name: "other", UID: "other-uid"}

	g.Expect(ownership(nil, applied, rec)).To(Equal(ownerNone))
	g.Expect(ownership(obj("obj-uid", ownerReference(applied)), applied, nil)).To(Equal(ownerThisWork))
	g.Expect(ownership(obj("obj-uid"), applied, rec)).To(Equal(ownerThisWork), "recorded UID, owner reference lost")
	g.Expect(ownership(obj("new-uid"), applied, rec)).To(Equal(ownerForeign), "recreated by someone else")
	g.Expect(ownership(obj("obj-uid", other), applied, rec)).To(Equal(ownerOtherWork))
}

func TestPlanReadsDriftAndDeletionPolicies(t *testing.T) {
	g := NewWithT(t)
	w := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}
	p, err := planFor(w)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.strategy.WhenDrifted).To(Equal(lodestarworkv1alpha1.DriftCorrect))
	g.Expect(p.deletionPolicy(w)).To(Equal(lodestarworkv1alpha1.DeletionDelete))

	w.Annotations[lodestarworkv1alpha1.ApplyStrategyAnnotation] = `{"whenDrifted":"Report","deletionPolicy":"Orphan","ignoreFields":[{"group":"apps","kind":"Deployment","paths":["/spec/replicas"]}]}`
	p, err = planFor(w)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.deletionPolicy(w)).To(Equal(lodestarworkv1alpha1.DeletionOrphan))
	w.Annotations[lodestarworkv1alpha1.ApplyStrategyAnnotation] = `{"deletionPolicy":"DeleteTakenOver"}`
	p, err = planFor(w)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.deletionPolicy(w)).To(Equal(lodestarworkv1alpha1.DeletionDeleteTakenOver))
	w.Annotations[lodestarworkv1alpha1.DeletionPolicyAnnotation] = lodestarworkv1alpha1.DeletionPolicyOrphan
	g.Expect(p.deletionPolicy(w)).To(Equal(lodestarworkv1alpha1.DeletionOrphan), "unjoin --orphan wins")
	delete(w.Annotations, lodestarworkv1alpha1.DeletionPolicyAnnotation)
	w.Annotations[lodestarworkv1alpha1.ApplyStrategyAnnotation] = `{"whenDrifted":"Report","deletionPolicy":"Orphan","ignoreFields":[{"group":"apps","kind":"Deployment","paths":["/spec/replicas"]}]}`
	p, err = planFor(w)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.ignored(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "web")).To(HaveLen(1))
	g.Expect(p.ignored(schema.GroupKind{Kind: "ConfigMap"}, "web")).To(BeEmpty())

	for _, bad := range []string{`{"whenDrifted":"Sometimes"}`, `{"deletionPolicy":"Shred"}`, `{"ignoreFields":[{"kind":"Deployment","paths":["spec.replicas"]}]}`} {
		w.Annotations[lodestarworkv1alpha1.ApplyStrategyAnnotation] = bad
		_, err = planFor(w)
		g.Expect(err).To(HaveOccurred(), bad)
	}
}

func TestRunsOnce(t *testing.T) {
	g := NewWithT(t)
	g.Expect(runsOnce(schema.GroupKind{Group: "batch", Kind: "Job"})).To(BeTrue())
	g.Expect(runsOnce(schema.GroupKind{Group: "apps", Kind: "Deployment"})).To(BeFalse())
}

func TestMergeRecords(t *testing.T) {
	g := NewWithT(t)
	rec := func(name string, uid types.UID) lodestarworkv1alpha1.AppliedResource {
		return lodestarworkv1alpha1.AppliedResource{Version: "v1", Kind: "ConfigMap", Namespace: "ns", Name: name, UID: uid}
	}
	res := func(r lodestarworkv1alpha1.AppliedResource) result {
		return result{key: recordKey(r), record: &r}
	}
	prev := []lodestarworkv1alpha1.AppliedResource{rec("a", "1"), rec("b", "2")}
	out := mergeRecords(prev, []result{res(rec("b", "3")), res(rec("c", "4")), {key: "not-applied"}})
	g.Expect(out).To(Equal([]lodestarworkv1alpha1.AppliedResource{rec("a", "1"), rec("b", "3"), rec("c", "4")}))
	g.Expect(prev[1].UID).To(BeEquivalentTo("2"), "the previous records are not changed")
}

// An apply meant to create an object that someone else created first returns
// their managedFields entry too: such an object is not the agent's creation.
func TestCreatedBy(t *testing.T) {
	g := NewWithT(t)
	live := &unstructured.Unstructured{}
	live.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply}})
	g.Expect(createdBy(live)).To(BeEmpty(), "created by the agent's apply alone")
	live.SetManagedFields(append(live.GetManagedFields(), metav1.ManagedFieldsEntry{Manager: "kubectl-create", Operation: metav1.ManagedFieldsOperationUpdate}))
	g.Expect(createdBy(live)).To(Equal("kubectl-create"))
	g.Expect(createdBy(&unstructured.Unstructured{})).To(BeEmpty())
}
