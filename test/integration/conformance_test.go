package integration

// Behaviour the upstream Work API (sigs.k8s.io/work-api) and OCM's work agent
// test, checked on real API servers.

import (
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
)

// Two Works name the same object: the first places it, the second waits. When the
// first goes, the object passes to the second without being deleted: same UID,
// never absent, now with the second Work's content and owner.
func TestOwnershipPassesToAnotherWorkWithoutDeletion(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := "handover-" + newNamespace(t)
	member := members[member2].Client
	key := client.ObjectKey{Namespace: ns, Name: "shared"}

	first := newWork(t, member2, "first-"+rand.String(5), nil, cmManifest(t, ns, "shared", map[string]any{"from": "first"}))
	eventuallyManifest(t, first, 0, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)
	original := &corev1.ConfigMap{}
	g.Expect(member.Get(ctx, key, original)).To(Succeed())

	// Watch the object from here on: it must never be deleted.
	watcher, err := client.NewWithWatch(members[member2].Config, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	w, err := watcher.Watch(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns), client.MatchingFields{"metadata.name": "shared"})
	g.Expect(err).NotTo(HaveOccurred())
	var deleted atomic.Bool
	go func() {
		for e := range w.ResultChan() {
			if e.Type == watch.Deleted {
				deleted.Store(true)
			}
		}
	}()

	second := newWork(t, member2, "second-"+rand.String(5), nil,
		cmManifest(t, ns, "shared", map[string]any{"from": "second"}), cmManifest(t, ns, "own", map[string]any{"k": "v"}))
	msg := eventuallyManifest(t, second, 0, metav1.ConditionFalse, lodestarworkv1alpha1.ReasonOtherWork)
	g.Expect(msg).To(ContainSubstring(appliedName(first.Namespace, first.Name)))
	eventuallyManifest(t, second, 1, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)
	got := &corev1.ConfigMap{}
	g.Expect(member.Get(ctx, key, got)).To(Succeed())
	g.Expect(got.Data).To(HaveKeyWithValue("from", "first"), "left to the Work that placed it")

	g.Expect(hubCP.Client.Delete(ctx, first)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := hubCP.Client.Get(ctx, client.ObjectKeyFromObject(first), &workv1alpha1.Work{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the first Work is cleaned up, got %v", err)
		got := &corev1.ConfigMap{}
		g.Expect(member.Get(ctx, key, got)).To(Succeed())
		g.Expect(got.UID).To(Equal(original.UID), "the same object, not a new one")
		g.Expect(got.Data).To(HaveKeyWithValue("from", "second"))
		g.Expect(got.OwnerReferences).To(ConsistOf(HaveField("Name", appliedName(second.Namespace, second.Name))))
	}).Should(Succeed())
	eventuallyManifest(t, second, 0, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)

	// The second Work says so in an event.
	g.Eventually(func(g Gomega) {
		events := &eventsv1.EventList{}
		g.Expect(hubCP.Client.List(ctx, events, client.InNamespace(second.Namespace))).To(Succeed())
		g.Expect(events.Items).To(ContainElement(And(
			HaveField("Regarding.Name", second.Name), HaveField("Reason", lodestarworkv1alpha1.EventOwnershipPassed))))
	}).Should(Succeed())

	// Not once deleted while it passed from one Work to the other.
	w.Stop()
	g.Expect(deleted.Load()).To(BeFalse(), "the shared object was deleted on the way")

	// The second Work now answers for it: removing it removes the object.
	g.Expect(hubCP.Client.Delete(ctx, second)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := member.Get(ctx, key, &corev1.ConfigMap{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
	}).Should(Succeed())
}

// A Work whose manifests are replaced by one of a kind the member does not serve:
// what the old manifests placed is still removed, and the new manifest says why it
// is not applied.
func TestManifestsReplacedByAnUnservedKind(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := "unserved-" + newNamespace(t)
	member := members[member2].Client
	w := newWork(t, member2, "unserved", nil, cmManifest(t, ns, "old", map[string]any{"k": "v"}))
	eventuallyManifest(t, w, 0, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)

	g.Expect(updateOnHub(w, func(w *workv1alpha1.Work) {
		w.Spec.Workload.Manifests = []workv1alpha1.Manifest{manifest(t, map[string]any{
			"apiVersion": "nowhere.example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w1", "namespace": ns},
		})}
	})).To(Succeed())
	msg := eventuallyManifest(t, w, 0, metav1.ConditionFalse, lodestarworkv1alpha1.ReasonUnknownKind)
	g.Expect(msg).To(ContainSubstring("does not serve"))
	g.Eventually(func(g Gomega) {
		err := member.Get(ctx, client.ObjectKey{Namespace: ns, Name: "old"}, &corev1.ConfigMap{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the old manifest's object is removed, got %v", err)
		g.Expect(cleanupBlockedCondition(g, w)).To(BeNil())
	}).Should(Succeed())
}

// An object whose kind's CRD was removed from the member (taking the object with
// it) does not hold the Work's cleanup forever.
func TestRecordOfARemovedCRDIsForgotten(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := "gone-crd-" + newNamespace(t)
	member := members[member2].Client
	group, crd := widgetCRD(t, member2, "v1")

	widget := manifest(t, map[string]any{"apiVersion": group + "/v1", "kind": "Widget", "metadata": map[string]any{"name": "w1", "namespace": ns}})
	w := newWork(t, member2, "gone-crd", nil, widget, cmManifest(t, ns, "plain", map[string]any{"k": "v"}))
	eventuallyManifest(t, w, 0, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)

	g.Expect(member.Delete(ctx, crd)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := member.Get(ctx, client.ObjectKeyFromObject(crd), crd.DeepCopy())
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
	}).Should(Succeed())

	g.Expect(updateOnHub(w, func(w *workv1alpha1.Work) {
		w.Spec.Workload.Manifests = w.Spec.Workload.Manifests[1:]
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(cleanupBlockedCondition(g, w)).To(BeNil())
		applied := &lodestarworkv1alpha1.AppliedWork{}
		g.Expect(member.Get(ctx, client.ObjectKey{Name: appliedName(w.Namespace, w.Name)}, applied)).To(Succeed())
		g.Expect(applied.Status.AppliedResources).To(ConsistOf(HaveField("Name", "plain")), "the widget is no longer recorded")
	}).Should(Succeed())
	eventuallyManifest(t, w, 0, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)
}

// status.manifestConditions[].identifier.ordinal is written for the first manifest
// too (upstream's newer CRD requires it), as the hub's API server stores it.
func TestManifestOrdinalZeroIsWritten(t *testing.T) {
	g := NewWithT(t)
	ns := "ordinal-" + newNamespace(t)
	w := newWork(t, member2, "ordinal", nil, cmManifest(t, ns, "a", nil), cmManifest(t, ns, "b", nil))
	eventuallyManifest(t, w, 1, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)
	got := &unstructured.Unstructured{}
	got.SetAPIVersion(workv1alpha1.GroupVersion.String())
	got.SetKind("Work")
	g.Expect(hubCP.Client.Get(t.Context(), client.ObjectKeyFromObject(w), got)).To(Succeed())
	mcs, _, err := unstructured.NestedSlice(got.Object, "status", "manifestConditions")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mcs).To(HaveLen(2))
	for i, mc := range mcs {
		ordinal, found, err := unstructured.NestedInt64(mc.(map[string]any), "identifier", "ordinal")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(found).To(BeTrue(), "manifest %d has an ordinal", i)
		g.Expect(ordinal).To(BeEquivalentTo(i))
	}
}
