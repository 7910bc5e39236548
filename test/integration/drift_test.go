package integration

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// A change made on the member is set back promptly (the agent watches what it
// placed), with an event on the Work; what the manifest does not set is left.
func TestDriftIsCorrected(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := "drift-" + newNamespace(t)
	w := newWork(t, member2, "drift-correct", nil, cmManifest(t, ns, "settings", map[string]any{"mode": "safe"}))
	eventuallyManifest(t, w, 0, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)

	key := client.ObjectKey{Namespace: ns, Name: "settings"}
	editOnMember(t, member2, key, func(cm *corev1.ConfigMap) {
		cm.Data["mode"] = "reckless"
		cm.Labels = map[string]string{"added-on-member": "yes"}
	})
	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(members[member2].Client.Get(ctx, key, cm)).To(Succeed())
		g.Expect(cm.Data).To(HaveKeyWithValue("mode", "safe"), "set back to the manifest")
		g.Expect(cm.Labels).To(HaveKeyWithValue("added-on-member", "yes"), "what the manifest does not set is the member's")
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		events := &eventsv1.EventList{}
		g.Expect(hubCP.Client.List(ctx, events, client.InNamespace(w.Namespace))).To(Succeed())
		var notes []string
		for _, e := range events.Items {
			if e.Regarding.Name == w.Name && e.Reason == lodestarworkv1alpha1.EventDriftCorrected {
				notes = append(notes, e.Note)
			}
		}
		g.Expect(notes).To(ContainElement(ContainSubstring("data.mode")))
	}).Should(Succeed())

	// The record carries the hash of the manifest it applied.
	applied := &lodestarworkv1alpha1.AppliedWork{}
	g.Expect(members[member2].Client.Get(ctx, appliedKey(w), applied)).To(Succeed())
	g.Expect(applied.Status.AppliedResources).To(ConsistOf(HaveField("ManifestHash", HaveLen(32))))
	g.Expect(applied.Finalizers).To(ContainElement(lodestarworkv1alpha1.AppliedWorkFinalizer))
}

// With whenDrifted: Report a change made on the member stays and is reported, on
// the Work and on the Placement; a change of the manifest on the hub is still
// applied; an object deleted on the member is reported, not recreated.
func TestDriftIsReported(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, cm, p := configMapPlacement(t)
	p.Spec.Scheduling.ClusterSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"production", "staging"}},
	}}
	p.Spec.ApplyStrategy = &lodestarworkv1alpha1.ApplyStrategy{WhenDrifted: lodestarworkv1alpha1.DriftReport}
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	// inSyncEverywhere waits for greeting on both members and no drift reported.
	inSyncEverywhere := func(greeting string) {
		g.Eventually(func(g Gomega) {
			expectGreeting(g, t, member1, ns, greeting)
			expectGreeting(g, t, member2, ns, greeting)
			c := placementCondition(g, t, client.ObjectKeyFromObject(p), placementv1alpha1.DriftedCondition)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		}).Should(Succeed())
	}
	inSyncEverywhere("hello")

	key := client.ObjectKey{Namespace: ns, Name: "web-config"}
	editOnMember(t, member2, key, func(cm *corev1.ConfigMap) { cm.Data["greeting"] = "changed on the member" })
	w := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Namespace: names.ClusterNamespace(member2), Name: names.Work(ns, p.Name)}}
	g.Eventually(func(g Gomega) {
		got := &workv1alpha1.Work{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(w), got)).To(Succeed())
		c := manifestCondition(g, got, 0, lodestarworkv1alpha1.ConditionDrifted)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(ContainSubstring("data.greeting"))
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, lodestarworkv1alpha1.ConditionDrifted)).To(BeTrue())

		placed := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(p), placed)).To(Succeed())
		g.Expect(placed.Status.DriftedClusters).To(HaveValue(BeEquivalentTo(1)))
		c = placementCondition(g, t, client.ObjectKeyFromObject(p), placementv1alpha1.DriftedCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(ContainSubstring(member2))
		g.Expect(placed.Status.Clusters).To(ContainElement(And(HaveField("Name", member2), HaveField("Drift", ContainSubstring("data.greeting")))))
	}).Should(Succeed())
	g.Expect(memberConfigMap(t, member2, ns, "web-config").Data).To(HaveKeyWithValue("greeting", "changed on the member"), "left as the member has it")

	// A new manifest from the hub is applied, drift or not.
	g.Expect(updateOnHub(cm, func(cm *corev1.ConfigMap) { cm.Data["greeting"] = "new from the hub" })).To(Succeed())
	inSyncEverywhere("new from the hub")

	// Deleted on the member: reported, and not created again.
	g.Expect(members[member2].Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-config"}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(firstManifestCondition(g, w, lodestarworkv1alpha1.ConditionDrifted).Message).To(ContainSubstring("(deleted)"))
		g.Expect(firstManifestCondition(g, w, lodestarworkv1alpha1.ConditionAvailable).Reason).To(Equal(lodestarworkv1alpha1.ReasonNotFound))
	}).Should(Succeed())
	err := members[member2].Client.Get(ctx, key, &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "not created again, got %v", err)
}

// Ignored fields (an HPA's replicas) keep the member's value: neither corrected,
// nor reported as drift, nor overwritten when the manifest changes on the hub.
func TestIgnoredFieldsAreLeftToTheMember(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := "ignore-" + newNamespace(t)
	deploy := func(annotation string) workv1alpha1.Manifest {
		labels := map[string]any{"app": "scaled"}
		return manifest(t, map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "scaled", "namespace": ns, "annotations": map[string]any{"example.com/rev": annotation}},
			"spec": map[string]any{
				"replicas": int64(2),
				"selector": map[string]any{"matchLabels": labels},
				"template": map[string]any{"metadata": map[string]any{"labels": labels},
					"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "nginx:1.27"}}}},
			},
		})
	}
	strategy := &lodestarworkv1alpha1.ApplyStrategy{
		WhenDrifted:  lodestarworkv1alpha1.DriftReport,
		IgnoreFields: []lodestarworkv1alpha1.IgnoreField{{Group: "apps", Kind: "Deployment", Paths: []string{"/spec/replicas"}}},
	}
	w := newWork(t, member2, "ignore-replicas", strategy, deploy("1"))
	eventuallyManifest(t, w, 0, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)
	key := client.ObjectKey{Namespace: ns, Name: "scaled"}
	member := members[member2].Client
	got := &appsv1.Deployment{}
	g.Expect(member.Get(ctx, key, got)).To(Succeed())
	g.Expect(got.Spec.Replicas).To(HaveValue(BeEquivalentTo(2)), "created with the manifest's value")

	// An autoscaler on the member scales it, through the scale subresource.
	scaled := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scaled"}}
	g.Expect(member.SubResource("scale").Patch(ctx, scaled, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":5}}`)),
		client.FieldOwner("horizontal-pod-autoscaler"))).To(Succeed())
	// Someone also changes a field that is not ignored: that is the drift reported.
	g.Eventually(func() error {
		d := &appsv1.Deployment{}
		if err := member.Get(ctx, key, d); err != nil {
			return err
		}
		d.Annotations["example.com/rev"] = "edited"
		return member.Update(ctx, d)
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		c := firstManifestCondition(g, w, lodestarworkv1alpha1.ConditionDrifted)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(ContainSubstring("example.com/rev"))
		g.Expect(c.Message).NotTo(ContainSubstring("replicas"), "an ignored field is not drift")
	}).Should(Succeed())

	// The manifest changes on the hub: applied, but the replicas stay the member's.
	g.Expect(updateOnHub(w, func(w *workv1alpha1.Work) { w.Spec.Workload.Manifests[0] = deploy("2") })).To(Succeed())
	g.Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(member.Get(ctx, key, d)).To(Succeed())
		g.Expect(d.Annotations).To(HaveKeyWithValue("example.com/rev", "2"))
		g.Expect(d.Spec.Replicas).To(HaveValue(BeEquivalentTo(5)), "the autoscaler's value stays")
	}).Should(Succeed())
	eventuallyManifest(t, w, 0, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)
}
