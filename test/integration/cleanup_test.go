package integration

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/agent"
	"github.com/lodestar-dev/lodestar/internal/names"
)

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

// The missing-Work sweeper judges only its own hub's records and honours Orphan:
// an AppliedWork of another hub (same cluster name, a Work this hub never had)
// and its object survive the grace period; the objects of an Orphan Work removed
// from the hub while the agent was away are released, not deleted.
func TestSweeperLeavesAnotherHubsAndOrphanWorks(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	member := members[member2].Client
	name, opts, stop := runAux(t, "sweep", func(o *agent.Options) { o.MissingWorkGracePeriod = 2 * time.Second })
	ns := "sweep-" + rand.String(5)

	// Another hub's record, for a cluster of the same name.
	createOnMember(t, member2, ns, "foreign", map[string]string{"k": "v"})
	foreignCM := memberConfigMap(t, member2, ns, "foreign")
	foreign := &lodestarworkv1alpha1.AppliedWork{
		ObjectMeta: metav1.ObjectMeta{
			Name:   names.AppliedWork("other-hub", names.ClusterNamespace(name), "gone"),
			Labels: map[string]string{lodestarworkv1alpha1.HubLabel: "other-hub"},
		},
		Spec: lodestarworkv1alpha1.AppliedWorkSpec{WorkNamespace: names.ClusterNamespace(name), WorkName: "gone"},
	}
	g.Expect(member.Create(ctx, foreign)).To(Succeed())
	foreign.Status.AppliedResources = []lodestarworkv1alpha1.AppliedResource{{
		Version: "v1", Kind: "ConfigMap", Resource: "configmaps", Namespace: ns, Name: "foreign", UID: foreignCM.UID,
	}}
	g.Expect(member.Status().Update(ctx, foreign)).To(Succeed())
	g.Expect(updateWith(member, foreignCM, func(cm *corev1.ConfigMap) {
		cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: lodestarworkv1alpha1.GroupVersion.String(), Kind: "AppliedWork", Name: foreign.Name, UID: foreign.UID}}
	})).To(Succeed())

	// An Orphan Work, removed from the hub while its agent is away.
	orphan := newWork(t, name, "orphan", &lodestarworkv1alpha1.ApplyStrategy{DeletionPolicy: lodestarworkv1alpha1.DeletionOrphan},
		cmManifest(t, ns, "kept", map[string]any{"k": "v"}))
	eventuallyManifest(t, orphan, 0, metav1.ConditionTrue, "")
	applied := &lodestarworkv1alpha1.AppliedWork{}
	g.Eventually(func(g Gomega) {
		g.Expect(member.Get(ctx, client.ObjectKey{Name: names.AppliedWork(testHubID(), orphan.Namespace, orphan.Name)}, applied)).To(Succeed())
		g.Expect(applied.Labels).To(HaveKeyWithValue(lodestarworkv1alpha1.HubLabel, testHubID()))
		g.Expect(applied.Annotations).To(HaveKeyWithValue(lodestarworkv1alpha1.RecordedDeletionPolicyAnnotation, lodestarworkv1alpha1.DeletionPolicyOrphan))
	}).Should(Succeed())
	stop()
	forceRemove(t, orphan)
	startAgent(t, opts)

	g.Eventually(func(g Gomega) {
		err := member.Get(ctx, client.ObjectKeyFromObject(applied), &lodestarworkv1alpha1.AppliedWork{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Orphan Work's record is swept: %v", err)
		kept := memberConfigMap(t, member2, ns, "kept")
		g.Expect(kept.OwnerReferences).To(BeEmpty(), "released")
		g.Expect(kept.DeletionTimestamp.IsZero()).To(BeTrue())
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		got := &lodestarworkv1alpha1.AppliedWork{}
		g.Expect(member.Get(ctx, client.ObjectKeyFromObject(foreign), got)).To(Succeed())
		g.Expect(got.Annotations).NotTo(HaveKey(lodestarworkv1alpha1.WorkMissingSinceAnnotation), "another hub's record is not judged")
		cm := memberConfigMap(t, member2, ns, "foreign")
		g.Expect(cm.UID).To(Equal(foreignCM.UID))
		g.Expect(cm.DeletionTimestamp.IsZero()).To(BeTrue())
	}).WithTimeout(3 * opts.MissingWorkGracePeriod).Should(Succeed())
}

// An object the Work took over (it was on the member before) is released, not
// deleted, when its manifest or its Work goes; what the agent created is deleted.
func TestTakenOverObjectsAreReleased(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := "takeover-" + rand.String(5)
	createOnMember(t, member2, ns, "before", map[string]string{"k": "v"})
	createOnMember(t, member2, ns, "also-before", map[string]string{"k": "v"})
	always := &lodestarworkv1alpha1.ApplyStrategy{Takeover: lodestarworkv1alpha1.TakeoverAlways}
	w := newWork(t, member2, "takeover-"+rand.String(5), always,
		cmManifest(t, ns, "before", map[string]any{"k": "hub"}),
		cmManifest(t, ns, "also-before", map[string]any{"k": "hub"}),
		cmManifest(t, ns, "created", map[string]any{"k": "hub"}))
	for i := range 3 {
		eventuallyManifest(t, w, i, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)
	}
	g.Eventually(func(g Gomega) {
		applied := &lodestarworkv1alpha1.AppliedWork{}
		g.Expect(members[member2].Client.Get(ctx, appliedKey(w), applied)).To(Succeed())
		g.Expect(applied.Status.AppliedResources).To(ConsistOf(
			And(HaveField("Name", "before"), HaveField("TakenOver", true)),
			And(HaveField("Name", "also-before"), HaveField("TakenOver", true)),
			And(HaveField("Name", "created"), HaveField("TakenOver", false))))
	}).Should(Succeed())

	// The manifest goes: released.
	g.Expect(updateOnHub(w, func(w *workv1alpha1.Work) { w.Spec.Workload.Manifests = w.Spec.Workload.Manifests[1:] })).To(Succeed())
	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(members[member2].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "before"}, cm)).To(Succeed())
		g.Expect(cm.OwnerReferences).To(BeEmpty())
		g.Expect(cm.Data).To(HaveKeyWithValue("k", "hub"), "left as the Work last applied it")
	}).Should(Succeed())

	// Asked for explicitly, a taken-over object is deleted with its Work.
	createOnMember(t, member2, ns, "asked-for", map[string]string{"k": "v"})
	deleting := newWork(t, member2, "takeover-delete-"+rand.String(5), &lodestarworkv1alpha1.ApplyStrategy{
		Takeover: lodestarworkv1alpha1.TakeoverAlways, DeletionPolicy: lodestarworkv1alpha1.DeletionDeleteTakenOver,
	}, cmManifest(t, ns, "asked-for", map[string]any{"k": "hub"}))
	eventuallyManifest(t, deleting, 0, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)
	g.Expect(hubCP.Client.Delete(ctx, deleting)).To(Succeed())

	// The Work goes: the taken-over object is released, the created one deleted.
	g.Expect(hubCP.Client.Delete(ctx, w)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := members[member2].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "created"}, &corev1.ConfigMap{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "created by the agent: deleted (%v)", err)
		cm := &corev1.ConfigMap{}
		g.Expect(members[member2].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "also-before"}, cm)).To(Succeed())
		g.Expect(cm.OwnerReferences).To(BeEmpty())
		g.Expect(cm.DeletionTimestamp.IsZero()).To(BeTrue())
		err = members[member2].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "asked-for"}, &corev1.ConfigMap{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "DeleteTakenOver: deleted (%v)", err)
	}).Should(Succeed())
}

// Cleanup is never stuck on a kind the member stopped serving: an object whose
// recorded version is no longer served is deleted through a version that is; one
// whose kind is served in no version holds the cleanup, says so and until when,
// and is released after the agent's bounded wait.
func TestCleanupOfUnservedKindsIsBounded(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	member := members[member2].Client
	name, _, _ := runAux(t, "unserved", func(o *agent.Options) { o.UnservedKindGracePeriod = 3 * time.Second })
	ns := "unserved-" + rand.String(5)
	moved, movedCRD := widgetCRD(t, member2, "v1", "v2")
	gone, goneCRD := widgetCRD(t, member2, "v1")
	w := newWork(t, name, "unserved", nil,
		manifest(t, map[string]any{"apiVersion": moved + "/v1", "kind": "Widget", "metadata": map[string]any{"name": "moved", "namespace": ns}}),
		manifest(t, map[string]any{"apiVersion": gone + "/v1", "kind": "Widget", "metadata": map[string]any{"name": "gone", "namespace": ns}}))
	eventuallyManifest(t, w, 0, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)
	eventuallyManifest(t, w, 1, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)

	setServedVersions(t, member2, movedCRD, map[string]bool{"v2": true}, "v2")
	setServedVersions(t, member2, goneCRD, map[string]bool{}, "v1")
	g.Expect(hubCP.Client.Delete(ctx, w)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := cleanupBlockedCondition(g, w)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(lodestarworkv1alpha1.ReasonKindNotServed))
		g.Expect(c.Message).To(And(ContainSubstring("Widget "+ns+"/gone"), ContainSubstring("released at")))
		g.Expect(c.Message).NotTo(ContainSubstring("moved"))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		err := hubCP.Client.Get(ctx, client.ObjectKeyFromObject(w), &workv1alpha1.Work{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Work's cleanup ends: %v", err)
	}).Should(Succeed())
	widget := &unstructured.Unstructured{}
	widget.SetAPIVersion(moved + "/v2")
	widget.SetKind("Widget")
	err := member.Get(ctx, client.ObjectKey{Namespace: ns, Name: "moved"}, widget)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "deleted through the version still served: %v", err)
}
