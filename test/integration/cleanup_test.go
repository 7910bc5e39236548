package integration

import (
	"context"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
)

const holdFinalizer = "example.com/hold"

// hold puts a member controller's finalizer on a ConfigMap, and takes it away
// when the test ends.
func hold(t *testing.T, cluster string, key client.ObjectKey) {
	t.Helper()
	editOnMember(t, cluster, key, func(cm *corev1.ConfigMap) { cm.Finalizers = append(cm.Finalizers, holdFinalizer) })
	t.Cleanup(func() { release(t, cluster, key) })
}

// release takes the finalizer away (the object may be gone already).
func release(t *testing.T, cluster string, key client.ObjectKey) {
	ctx := context.Background() // Also when the test has ended.
	NewWithT(t).Eventually(func() error {
		cm := &corev1.ConfigMap{}
		if err := members[cluster].Client.Get(ctx, key, cm); err != nil {
			return client.IgnoreNotFound(err)
		}
		cm.Finalizers = slices.DeleteFunc(cm.Finalizers, func(f string) bool { return f == holdFinalizer })
		return client.IgnoreNotFound(members[cluster].Client.Update(ctx, cm))
	}).Should(Succeed())
}

// cleanupBlockedCondition is the Work's CleanupBlocked condition as the hub has it.
func cleanupBlockedCondition(g Gomega, w *workv1alpha1.Work) *metav1.Condition {
	got := &workv1alpha1.Work{}
	g.Expect(hubCP.Client.Get(context.Background(), client.ObjectKeyFromObject(w), got)).To(Succeed())
	return meta.FindStatusCondition(got.Status.Conditions, lodestarworkv1alpha1.ConditionCleanupBlocked)
}

// An object held on the member by someone else's finalizer is visible on the hub
// (CleanupBlocked); the Work keeps its finalizer until the object is gone, or until
// the cleanup is given up explicitly (deletion policy Orphan).
func TestBlockedCleanupIsVisibleAndCanBeGivenUp(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := "held-" + newNamespace(t)
	member := members[member2].Client
	w := newWork(t, member2, "held", nil, cmManifest(t, ns, "held", map[string]any{"k": "v"}), cmManifest(t, ns, "free", map[string]any{"k": "v"}))
	eventuallyManifest(t, w, 1, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)
	heldKey, freeKey := client.ObjectKey{Namespace: ns, Name: "held"}, client.ObjectKey{Namespace: ns, Name: "free"}
	hold(t, member2, heldKey)

	// A manifest removed: its object is deleted, and held.
	g.Expect(updateOnHub(w, func(w *workv1alpha1.Work) { w.Spec.Workload.Manifests = w.Spec.Workload.Manifests[1:] })).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := cleanupBlockedCondition(g, w)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(ContainSubstring("ConfigMap " + ns + "/held (finalizers " + holdFinalizer + ")"))
	}).Should(Succeed())
	cm := &corev1.ConfigMap{}
	g.Expect(member.Get(ctx, heldKey, cm)).To(Succeed())
	g.Expect(cm.DeletionTimestamp).NotTo(BeNil())

	// The member lets go: the condition goes with the object.
	release(t, member2, heldKey)
	g.Eventually(func(g Gomega) {
		g.Expect(cleanupBlockedCondition(g, w)).To(BeNil())
		g.Expect(apierrors.IsNotFound(member.Get(ctx, heldKey, &corev1.ConfigMap{}))).To(BeTrue())
	}).Should(Succeed())

	// The Work deleted while an object is held: it stays on the hub and says why.
	hold(t, member2, freeKey)
	g.Expect(hubCP.Client.Delete(ctx, w)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := cleanupBlockedCondition(g, w)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Message).To(ContainSubstring(holdFinalizer))
	}).Should(Succeed())

	// Giving up: the Work's deletion policy set to Orphan releases it, and the
	// member keeps the object (with its own finalizer), no longer owned.
	g.Expect(updateOnHub(w, func(w *workv1alpha1.Work) {
		w.Annotations = map[string]string{lodestarworkv1alpha1.DeletionPolicyAnnotation: lodestarworkv1alpha1.DeletionPolicyOrphan}
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := hubCP.Client.Get(ctx, client.ObjectKeyFromObject(w), &workv1alpha1.Work{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Work is released, got %v", err)
	}).Should(Succeed())
	err := member.Get(ctx, appliedKey(w), &lodestarworkv1alpha1.AppliedWork{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the AppliedWork is gone, got %v", err)
	g.Expect(member.Get(ctx, freeKey, cm)).To(Succeed())
	g.Expect(cm.OwnerReferences).To(BeEmpty())
}

// A Placement whose deletion policy is Orphan leaves its objects on the members
// when it goes, released.
func TestOrphanDeletionPolicyFromThePlacement(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, _, p := configMapPlacement(t)
	p.Spec.Scheduling.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "staging"}}
	p.Spec.ApplyStrategy = &lodestarworkv1alpha1.ApplyStrategy{DeletionPolicy: lodestarworkv1alpha1.DeletionOrphan}
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	key := client.ObjectKey{Namespace: ns, Name: "web-config"}
	var placed corev1.ConfigMap
	g.Eventually(func(g Gomega) {
		g.Expect(members[member2].Client.Get(ctx, key, &placed)).To(Succeed())
		g.Expect(placed.OwnerReferences).To(HaveLen(1))
	}).Should(Succeed())

	g.Expect(hubCP.Client.Delete(ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := hubCP.Client.Get(ctx, client.ObjectKey{Namespace: names.ClusterNamespace(member2), Name: names.Work(ns, p.Name)}, &workv1alpha1.Work{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
	}).Should(Succeed())
	got := &corev1.ConfigMap{}
	g.Expect(members[member2].Client.Get(ctx, key, got)).To(Succeed())
	g.Expect(got.UID).To(Equal(placed.UID))
	g.Expect(got.OwnerReferences).To(BeEmpty(), "released")
	g.Expect(got.DeletionTimestamp).To(BeNil())
}

// An AppliedWork deleted by hand on the member is kept by its finalizer while its
// Work lives, so the member's garbage collector does not delete the objects it
// owns; the Work still applies, and its deletion cleans up as usual.
func TestAppliedWorkDeletedByHandKeepsTheObjects(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := "handdel-" + newNamespace(t)
	member := members[fullMember].Client
	w := newWork(t, fullMember, "hand-deleted", nil, cmManifest(t, ns, "kept", map[string]any{"k": "v"}))
	eventuallyManifest(t, w, 0, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)
	keptKey := client.ObjectKey{Namespace: ns, Name: "kept"}

	// A control pair shows the member's garbage collector at work.
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "control-owner"}}
	g.Expect(member.Create(ctx, owner)).To(Succeed())
	dependent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "control-dependent", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID},
	}}}
	g.Expect(member.Create(ctx, dependent)).To(Succeed())

	g.Expect(member.Delete(ctx, &lodestarworkv1alpha1.AppliedWork{ObjectMeta: metav1.ObjectMeta{Name: appliedKey(w).Name}})).To(Succeed())
	g.Expect(member.Delete(ctx, owner)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(apierrors.IsNotFound(member.Get(ctx, client.ObjectKeyFromObject(dependent), &corev1.ConfigMap{}))).To(BeTrue(), "the garbage collector ran")
	}).Should(Succeed())
	applied := &lodestarworkv1alpha1.AppliedWork{}
	g.Expect(member.Get(ctx, appliedKey(w), applied)).To(Succeed())
	g.Expect(applied.DeletionTimestamp).NotTo(BeNil())
	kept := &corev1.ConfigMap{}
	g.Expect(member.Get(ctx, keptKey, kept)).To(Succeed())
	g.Expect(kept.DeletionTimestamp).To(BeNil(), "the placed object stays")

	// The Work still applies.
	g.Expect(updateOnHub(w, func(w *workv1alpha1.Work) {
		w.Spec.Workload.Manifests[0] = cmManifest(t, ns, "kept", map[string]any{"k": "changed"})
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(member.Get(ctx, keptKey, kept)).To(Succeed())
		g.Expect(kept.Data).To(HaveKeyWithValue("k", "changed"))
	}).Should(Succeed())

	// The Work's deletion removes the object, then lets the AppliedWork go.
	g.Expect(hubCP.Client.Delete(ctx, w)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(apierrors.IsNotFound(member.Get(ctx, keptKey, &corev1.ConfigMap{}))).To(BeTrue())
		g.Expect(apierrors.IsNotFound(member.Get(ctx, appliedKey(w), &lodestarworkv1alpha1.AppliedWork{}))).To(BeTrue())
	}).Should(Succeed())
}
