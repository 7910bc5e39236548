package integration

import (
	"context"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/agent/work"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// CreateOnly, chosen on the Placement: the object is created, and later edits on
// the hub do not reach the member.
func TestCreateOnlyFromPlacement(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, cm, p := configMapPlacement(t)
	p.Spec.ApplyStrategy = &lodestarworkv1alpha1.ApplyStrategy{Type: lodestarworkv1alpha1.ApplyCreateOnly}
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())

	w := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Namespace: names.ClusterNamespace(member1), Name: names.Work(ns, p.Name)}}
	// Created (Applied), or already seen again after creation (ExistsNotUpdated).
	eventuallyManifest(t, w, 0, metav1.ConditionTrue, "")
	g.Expect(memberConfigMap(t, member1, ns, "web-config").Data).To(HaveKeyWithValue("greeting", "hello"))
	g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(w), w)).To(Succeed())
	g.Expect(w.Annotations).To(HaveKeyWithValue(lodestarworkv1alpha1.ApplyStrategyAnnotation, `{"type":"CreateOnly","takeover":"Never","whenDrifted":"Correct","deletionPolicy":"Delete","claims":"Retain"}`))

	g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
	cm.Data["greeting"] = "changed on the hub"
	g.Expect(hubCP.Client.Update(ctx, cm)).To(Succeed())
	eventuallyManifest(t, w, 0, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonCreateOnlyKept)
	g.Expect(memberConfigMap(t, member1, ns, "web-config").Data).To(HaveKeyWithValue("greeting", "hello"))
}

// ReportOnly never writes: it reports a match, a difference (by field path only)
// or an absence.
func TestReportOnly(t *testing.T) {
	g := NewWithT(t)
	ns := "report-" + newNamespace(t)
	createOnMember(t, member2, ns, "same", map[string]string{"k": "v"})
	createOnMember(t, member2, ns, "differs", map[string]string{"k": "hunter2"})
	w := newWork(t, member2, "report-only", &lodestarworkv1alpha1.ApplyStrategy{Type: lodestarworkv1alpha1.ApplyReportOnly},
		cmManifest(t, ns, "same", map[string]any{"k": "v"}),
		cmManifest(t, ns, "differs", map[string]any{"k": "desired", "extra": "x"}),
		cmManifest(t, ns, "absent", map[string]any{"k": "v"}),
	)
	eventuallyManifest(t, w, 0, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonInSync)
	msg := eventuallyManifest(t, w, 1, metav1.ConditionFalse, lodestarworkv1alpha1.ReasonOutOfSync)
	g.Expect(msg).To(ContainSubstring("data.extra, data.k"))
	g.Expect(msg).NotTo(ContainSubstring("hunter2"), "values never appear, only paths")
	g.Expect(msg).NotTo(ContainSubstring("desired"))
	eventuallyManifest(t, w, 2, metav1.ConditionFalse, lodestarworkv1alpha1.ReasonNotFound)

	g.Consistently(func(g Gomega) {
		err := members[member2].Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "absent"}, &corev1.ConfigMap{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}).Should(Succeed())
	differs := memberConfigMap(t, member2, ns, "differs")
	g.Expect(differs.Data).To(Equal(map[string]string{"k": "hunter2"}))
	g.Expect(differs.OwnerReferences).To(BeEmpty())
	g.Expect(differs.ManagedFields).NotTo(ContainElement(HaveField("Manager", work.FieldManager)))
}

// Takeover of objects that exist on the member but no Work created.
func TestTakeover(t *testing.T) {
	g := NewWithT(t)
	ns := "takeover-" + newNamespace(t)
	createOnMember(t, member2, ns, "never", map[string]string{"k": "theirs"})
	createOnMember(t, member2, ns, "same", map[string]string{"k": "v"})
	createOnMember(t, member2, ns, "differs", map[string]string{"k": "theirs"})
	createOnMember(t, member2, ns, "always", map[string]string{"k": "theirs"})

	never := newWork(t, member2, "takeover-never", nil, cmManifest(t, ns, "never", map[string]any{"k": "ours"}))
	ifNoDiff := newWork(t, member2, "takeover-ifnodiff", &lodestarworkv1alpha1.ApplyStrategy{Takeover: lodestarworkv1alpha1.TakeoverIfNoDiff},
		cmManifest(t, ns, "same", map[string]any{"k": "v"}),
		cmManifest(t, ns, "differs", map[string]any{"k": "ours"}),
	)
	always := newWork(t, member2, "takeover-always", &lodestarworkv1alpha1.ApplyStrategy{Takeover: lodestarworkv1alpha1.TakeoverAlways},
		cmManifest(t, ns, "always", map[string]any{"k": "ours"}))

	eventuallyManifest(t, never, 0, metav1.ConditionFalse, lodestarworkv1alpha1.ReasonNotOwned)
	eventuallyManifest(t, ifNoDiff, 0, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)
	g.Expect(eventuallyManifest(t, ifNoDiff, 1, metav1.ConditionFalse, lodestarworkv1alpha1.ReasonTakeoverDiff)).To(ContainSubstring("data.k"))
	eventuallyManifest(t, always, 0, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)

	g.Expect(memberConfigMap(t, member2, ns, "never").Data).To(HaveKeyWithValue("k", "theirs"))
	g.Expect(memberConfigMap(t, member2, ns, "same").OwnerReferences).To(ConsistOf(HaveField("Name", appliedKey(ifNoDiff).Name)))
	g.Expect(memberConfigMap(t, member2, ns, "differs").Data).To(HaveKeyWithValue("k", "theirs"))
	g.Expect(memberConfigMap(t, member2, ns, "differs").OwnerReferences).To(BeEmpty())
	g.Expect(memberConfigMap(t, member2, ns, "always").Data).To(HaveKeyWithValue("k", "ours"))

	// What was taken over was there before the Work: deleting the Work releases it,
	// as the Work last applied it; what was left alone stays as it was.
	g.Expect(hubCP.Client.Delete(t.Context(), always)).To(Succeed())
	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(members[member2].Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "always"}, cm)).To(Succeed())
		g.Expect(cm.OwnerReferences).To(BeEmpty())
		g.Expect(cm.Data).To(HaveKeyWithValue("k", "ours"))
		err := hubCP.Client.Get(t.Context(), client.ObjectKeyFromObject(always), &workv1alpha1.Work{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}).Should(Succeed())
	g.Expect(hubCP.Client.Delete(t.Context(), never)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := hubCP.Client.Get(t.Context(), client.ObjectKeyFromObject(never), &workv1alpha1.Work{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}).Should(Succeed())
	g.Expect(memberConfigMap(t, member2, ns, "never").Data).To(HaveKeyWithValue("k", "theirs"))
}

// Two Placements that place the same object: the second is told so, and neither
// fights the other.
func TestTwoPlacementsOfOneObject(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, _, first := configMapPlacement(t)
	g.Expect(hubCP.Client.Create(ctx, first)).To(Succeed())
	firstWork := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Namespace: names.ClusterNamespace(member1), Name: names.Work(ns, first.Name)}}
	eventuallyManifest(t, firstWork, 0, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)

	second := webPlacement(ns)
	second.Name = "web-again"
	second.Spec.ResourceSelectors = second.Spec.ResourceSelectors[:1]
	second.Spec.ApplyStrategy = &lodestarworkv1alpha1.ApplyStrategy{Takeover: lodestarworkv1alpha1.TakeoverAlways}
	g.Expect(hubCP.Client.Create(ctx, second)).To(Succeed())
	secondWork := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Namespace: names.ClusterNamespace(member1), Name: names.Work(ns, second.Name)}}
	msg := eventuallyManifest(t, secondWork, 0, metav1.ConditionFalse, lodestarworkv1alpha1.ReasonOtherWork)
	g.Expect(msg).To(ContainSubstring(firstWork.Name))

	g.Eventually(func(g Gomega) {
		c := placementCondition(g, t, client.ObjectKeyFromObject(second), placementv1alpha1.AppliedCondition)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonApplyFailed))
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		got := &workv1alpha1.Work{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(firstWork), got)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, lodestarworkv1alpha1.ConditionApplied)).To(BeTrue())
		g.Expect(memberConfigMap(t, member1, ns, "web-config").OwnerReferences).To(ConsistOf(HaveField("Name", appliedKey(firstWork).Name)))
	}).Should(Succeed())
}

// A Work whose apply strategy cannot be read applies nothing and says why.
func TestInvalidStrategyAppliesNothing(t *testing.T) {
	g := NewWithT(t)
	ns := "badstrategy-" + newNamespace(t)
	w := &workv1alpha1.Work{
		ObjectMeta: metav1.ObjectMeta{Name: "bad-strategy", Namespace: names.ClusterNamespace(member2),
			Annotations: map[string]string{lodestarworkv1alpha1.ApplyStrategyAnnotation: `{"type":"Yolo"}`}},
		Spec: workv1alpha1.WorkSpec{Workload: workv1alpha1.WorkloadTemplate{Manifests: []workv1alpha1.Manifest{cmManifest(t, ns, "x", nil)}}},
	}
	g.Expect(hubCP.Client.Create(t.Context(), w)).To(Succeed())
	t.Cleanup(func() { _ = hubCP.Client.Delete(context.Background(), w) })
	g.Eventually(func(g Gomega) {
		got := &workv1alpha1.Work{}
		g.Expect(hubCP.Client.Get(t.Context(), client.ObjectKeyFromObject(w), got)).To(Succeed())
		c := meta.FindStatusCondition(got.Status.Conditions, lodestarworkv1alpha1.ConditionApplied)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(lodestarworkv1alpha1.ReasonInvalidStrategy))
		g.Expect(c.Message).To(ContainSubstring(`"Yolo"`))
	}).Should(Succeed())
	err := members[member2].Client.Get(t.Context(), client.ObjectKey{Name: ns}, &corev1.Namespace{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "nothing was written")
}

// Secret data never appears in a Work's status: a difference is named by path,
// and a refusal by the member names fields, not values.
func TestSecretDataNeverInStatus(t *testing.T) {
	g := NewWithT(t)
	ns := "secret-" + newNamespace(t)
	secret := func(name, typ string, data map[string]any) workv1alpha1.Manifest {
		return manifest(t, map[string]any{"apiVersion": "v1", "kind": "Secret", "type": typ,
			"metadata": map[string]any{"name": name, "namespace": ns}, "stringData": data})
	}
	w := newWork(t, member2, "secrets", nil,
		secret("ok", "Opaque", map[string]any{"password": "s3cr3t-value"}),
		// A TLS Secret without its key is refused by the member's API server.
		secret("bad-tls", "kubernetes.io/tls", map[string]any{"tls.crt": "s3cr3t-cert"}),
	)
	eventuallyManifest(t, w, 0, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)
	msg := eventuallyManifest(t, w, 1, metav1.ConditionFalse, lodestarworkv1alpha1.ReasonApplyFailed)
	g.Expect(msg).To(ContainSubstring("the member refused the Secret: Invalid"))
	g.Expect(msg).To(ContainSubstring("tls.key"))

	got := &workv1alpha1.Work{}
	g.Expect(hubCP.Client.Get(t.Context(), client.ObjectKeyFromObject(w), got)).To(Succeed())
	status, err := json.Marshal(got.Status)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(status)).NotTo(ContainSubstring("s3cr3t"))
	g.Expect(string(status)).NotTo(ContainSubstring("czNjcjN0"), "nor base64 of it")
}

// Neither ReportOnly nor takeover IfNoDiff tells the hub whether a guessed value
// matches a member's Secret, and status feedback never reads an object the Work
// does not own.
func TestNoOracleForMemberSecrets(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := "oracle-" + rand.String(5)
	g.Expect(client.IgnoreAlreadyExists(members[member2].Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
	g.Expect(members[member2].Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns}, StringData: map[string]string{"password": "hunter2"}})).To(Succeed())
	createOnMember(t, member2, ns, "theirs", map[string]string{"k": "v"})
	guess := func(password string) workv1alpha1.Manifest {
		return manifest(t, map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "db", "namespace": ns},
			"stringData": map[string]any{"password": password}})
	}
	for _, password := range []string{"hunter2", "wrong"} {
		report := newWork(t, member2, "report-"+password, &lodestarworkv1alpha1.ApplyStrategy{Type: lodestarworkv1alpha1.ApplyReportOnly}, guess(password))
		msg := eventuallyManifest(t, report, 0, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonNotCompared)
		g.Expect(msg).NotTo(ContainSubstring("password"))
		ifNoDiff := newWork(t, member2, "ifnodiff-"+password, &lodestarworkv1alpha1.ApplyStrategy{Takeover: lodestarworkv1alpha1.TakeoverIfNoDiff}, guess(password))
		eventuallyManifest(t, ifNoDiff, 0, metav1.ConditionFalse, lodestarworkv1alpha1.ReasonNotOwned)
	}
	secret := &corev1.Secret{}
	g.Expect(members[member2].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, secret)).To(Succeed())
	g.Expect(secret.OwnerReferences).To(BeEmpty())
	g.Expect(string(secret.Data["password"])).To(Equal("hunter2"))

	// Feedback on a ReportOnly Work: the object is not the Work's, nothing is read.
	rules, err := json.Marshal([]lodestarworkv1alpha1.FeedbackRule{{Kind: "ConfigMap", Fields: []lodestarworkv1alpha1.FeedbackField{{Name: "value", JSONPath: ".data.k"}}}})
	g.Expect(err).NotTo(HaveOccurred())
	report := newWork(t, member2, "report-feedback", &lodestarworkv1alpha1.ApplyStrategy{Type: lodestarworkv1alpha1.ApplyReportOnly},
		cmManifest(t, ns, "theirs", map[string]any{"k": "v"}))
	g.Expect(updateOnHub(report, func(w *workv1alpha1.Work) {
		w.Annotations[lodestarworkv1alpha1.StatusFeedbackAnnotation] = string(rules)
	})).To(Succeed())
	eventuallyManifest(t, report, 0, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonInSync)
	g.Consistently(func(g Gomega) {
		got := &workv1alpha1.Work{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(report), got)).To(Succeed())
		g.Expect(got.Status.ManifestConditions).To(HaveLen(1))
		g.Expect(got.Status.ManifestConditions[0].Conditions).NotTo(ContainElement(HaveField("Type", lodestarworkv1alpha1.ConditionStatusFeedback)))
	}).Should(Succeed())
}
