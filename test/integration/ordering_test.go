package integration

import (
	"encoding/json"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/workapply"
)

// A CRD and its custom resource in one Work, the resource listed first: the CRD is
// applied first, the resource waits for it to be established without failing the
// rest of the Work, and then applies. Its readiness follows the CEL rule of the
// agent's configuration.
func TestCRDAndCustomResourceInOneWork(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := "crd-" + newNamespace(t)
	plural := "gadgets" + rand.String(4)
	gadget := manifest(t, map[string]any{
		"apiVersion": gadgetGroup + "/v1", "kind": "Gadget",
		"metadata": map[string]any{"name": "g1", "namespace": ns},
		"spec":     map[string]any{"size": int64(3)},
	})
	w := newWork(t, member2, "crd-and-cr", nil, gadget, gadgetCRD(t, plural), cmManifest(t, ns, "plain", nil))

	eventuallyManifest(t, w, 1, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)
	eventuallyManifest(t, w, 2, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)
	eventuallyManifest(t, w, 0, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)
	g.Eventually(func(g Gomega) {
		got := &workv1alpha1.Work{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(w), got)).To(Succeed())
		g.Expect(manifestCondition(g, got, 1, lodestarworkv1alpha1.ConditionAvailable).Reason).To(Equal("Established"))
		c := manifestCondition(g, got, 0, lodestarworkv1alpha1.ConditionAvailable)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal("RuleNotAvailable"))
		g.Expect(meta.IsStatusConditionFalse(got.Status.Conditions, lodestarworkv1alpha1.ConditionAvailable)).To(BeTrue())
	}).Should(Succeed())

	// The gadget's own controller (here: the test) reports it ready on the member; the
	// agent sees the change through its watch and reports it available.
	// The agent writes the gadget too: the update is retried on a conflict.
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(gadgetGroup + "/v1")
	u.SetKind("Gadget")
	u.SetNamespace(ns)
	u.SetName("g1")
	setPhase := func(phase string) func(*unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, phase, "status", "phase")
		}
	}
	g.Expect(updateWith(members[member2].Client, u, setPhase("Ready"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &workv1alpha1.Work{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(w), got)).To(Succeed())
		g.Expect(manifestCondition(g, got, 0, lodestarworkv1alpha1.ConditionAvailable).Reason).To(Equal("RuleAvailable"))
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, lodestarworkv1alpha1.ConditionAvailable)).To(BeTrue())
	}).Should(Succeed())

	g.Expect(updateWith(members[member2].Client, u, setPhase("Broken"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &workv1alpha1.Work{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(w), got)).To(Succeed())
		g.Expect(manifestCondition(g, got, 0, lodestarworkv1alpha1.ConditionDegraded).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, lodestarworkv1alpha1.ConditionDegraded)).To(BeTrue())
	}).Should(Succeed())
}

// A custom resource whose CRD never arrives fails only itself, says why, and is
// retried.
func TestCustomResourceWithoutCRD(t *testing.T) {
	ns := "nocrd-" + newNamespace(t)
	w := newWork(t, member2, "no-crd", nil,
		manifest(t, map[string]any{"apiVersion": "nowhere.example.com/v1", "kind": "Ghost", "metadata": map[string]any{"name": "g", "namespace": ns}}),
		cmManifest(t, ns, "plain", nil))
	msg := eventuallyManifest(t, w, 0, metav1.ConditionFalse, lodestarworkv1alpha1.ReasonUnknownKind)
	NewWithT(t).Expect(msg).To(ContainSubstring("does not serve nowhere.example.com/v1, Kind=Ghost"))
	eventuallyManifest(t, w, 1, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)
}

// A Work with so many manifests that its full status would be too large: the
// status is trimmed, says so, and is still written.
func TestLargeWorkStatusIsTrimmed(t *testing.T) {
	g := NewWithT(t)
	ns := "large-" + newNamespace(t)
	var manifests []workv1alpha1.Manifest
	for i := range 600 {
		manifests = append(manifests, cmManifest(t, ns, fmt.Sprintf("cm-%03d", i), map[string]any{"i": fmt.Sprint(i)}))
	}
	w := newWork(t, member2, "large", nil, manifests...)
	g.Eventually(func(g Gomega) {
		got := &workv1alpha1.Work{}
		g.Expect(hubCP.Client.Get(t.Context(), client.ObjectKeyFromObject(w), got)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, lodestarworkv1alpha1.ConditionApplied)).To(BeTrue())
		trimmed := meta.FindStatusCondition(got.Status.Conditions, lodestarworkv1alpha1.ConditionStatusTrimmed)
		g.Expect(trimmed).NotTo(BeNil())
		g.Expect(trimmed.Status).To(Equal(metav1.ConditionTrue))
		b, err := json.Marshal(got.Status)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(len(b)).To(BeNumerically("<=", workapply.MaxStatusBytes+4096))
	}).Should(Succeed())
}

// Feedback rules on a Work: values come back in the StatusFeedback condition.
func TestStatusFeedbackOnWork(t *testing.T) {
	g := NewWithT(t)
	ns := "feedback-" + newNamespace(t)
	rules, err := json.Marshal([]lodestarworkv1alpha1.FeedbackRule{{Kind: "ConfigMap", Fields: []lodestarworkv1alpha1.FeedbackField{
		{Name: "greeting", JSONPath: ".data.greeting"},
		{Name: "keys", CEL: "size(self.data)"},
	}}})
	g.Expect(err).NotTo(HaveOccurred())
	w := &workv1alpha1.Work{
		ObjectMeta: metav1.ObjectMeta{Name: "feedback", Namespace: "lodestar-cluster-" + member2,
			Annotations: map[string]string{lodestarworkv1alpha1.StatusFeedbackAnnotation: string(rules)}},
		Spec: workv1alpha1.WorkSpec{Workload: workv1alpha1.WorkloadTemplate{Manifests: []workv1alpha1.Manifest{
			cmManifest(t, ns, "c", map[string]any{"greeting": "hi", "other": "x"}),
		}}},
	}
	g.Expect(hubCP.Client.Create(t.Context(), w)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &workv1alpha1.Work{}
		g.Expect(hubCP.Client.Get(t.Context(), client.ObjectKeyFromObject(w), got)).To(Succeed())
		c := manifestCondition(g, got, 0, lodestarworkv1alpha1.ConditionStatusFeedback)
		g.Expect(c.Reason).To(Equal(lodestarworkv1alpha1.ReasonFeedbackReported))
		g.Expect(c.Message).To(MatchJSON(`{"values":{"greeting":"hi","keys":2}}`))
	}).Should(Succeed())
}
