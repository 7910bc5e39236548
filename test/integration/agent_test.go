package integration

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/agentidentity"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/scheme"
)

// Each bad manifest fails only itself, with a reason naming it; the rest of the
// Work applies. An object the Work did not create is neither changed nor deleted.
func TestBadManifestsFailOnlyThemselves(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := "agent-" + newNamespace(t)
	member := members[member1].Client

	// Someone else's object on the member, with the name of a manifest.
	createOnMember(t, member1, ns, "theirs", map[string]string{"owner": "someone else"})
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "theirs", Namespace: ns}}

	w := newWork(t, member1, "hand-written", nil,
		configMapManifest(t, ns, "good", nil),
		configMapManifest(t, ns, "", nil),
		configMapManifest(t, ns, "", map[string]any{"generateName": "gen-"}),
		configMapManifest(t, ns, "good", nil),
		manifest(t, map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w", "namespace": ns}}),
		configMapManifest(t, ns, "theirs", nil),
		workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "` + ns + `"}, "data": {"k": 1}}`)}},
	)

	want := []struct {
		status          metav1.ConditionStatus
		reason, message string
	}{
		{metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied, ""},
		{metav1.ConditionFalse, lodestarworkv1alpha1.ReasonInvalidManifest, "metadata.name is required"},
		{metav1.ConditionFalse, lodestarworkv1alpha1.ReasonInvalidManifest, "generateName is not supported"},
		{metav1.ConditionFalse, lodestarworkv1alpha1.ReasonDuplicate, "the same object as manifest 0"},
		{metav1.ConditionFalse, lodestarworkv1alpha1.ReasonUnknownKind, "does not serve example.com/v1, Kind=Widget"},
		{metav1.ConditionFalse, lodestarworkv1alpha1.ReasonNotOwned, "was not created by this Work"},
		{metav1.ConditionFalse, lodestarworkv1alpha1.ReasonApplyFailed, "ConfigMap " + ns + "/x"},
	}
	g.Eventually(func(g Gomega) {
		got := &workv1alpha1.Work{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(w), got)).To(Succeed())
		applied := meta.FindStatusCondition(got.Status.Conditions, lodestarworkv1alpha1.ConditionApplied)
		g.Expect(applied).NotTo(BeNil())
		g.Expect(applied.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(applied.Message).To(ContainSubstring("6 of 7 manifests not applied"))
		g.Expect(got.Status.ManifestConditions).To(HaveLen(len(want)))
		for i, mc := range got.Status.ManifestConditions {
			g.Expect(mc.Identifier.Ordinal).To(Equal(i))
			c := meta.FindStatusCondition(mc.Conditions, lodestarworkv1alpha1.ConditionApplied)
			g.Expect(c).NotTo(BeNil(), "manifest %d", i)
			g.Expect(c.Status).To(Equal(want[i].status), "manifest %d: %s", i, c.Message)
			g.Expect(c.Reason).To(Equal(want[i].reason), "manifest %d: %s", i, c.Message)
			g.Expect(c.Message).To(ContainSubstring(want[i].message), "manifest %d", i)
			if want[i].status == metav1.ConditionFalse {
				g.Expect(c.Message).To(HavePrefix("manifest %d", i), "a failure names its manifest")
			}
		}
	}).Should(Succeed())

	good := &corev1.ConfigMap{}
	g.Expect(member.Get(ctx, client.ObjectKey{Namespace: ns, Name: "good"}, good)).To(Succeed())
	g.Expect(good.Data).To(Equal(map[string]string{"from": "work"}))
	g.Expect(member.Get(ctx, client.ObjectKeyFromObject(theirs), theirs)).To(Succeed())
	g.Expect(theirs.Data).To(Equal(map[string]string{"owner": "someone else"}), "an object the Work did not create is not changed")

	// Deleting the Work removes exactly what it created.
	g.Expect(hubCP.Client.Delete(ctx, w)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := hubCP.Client.Get(ctx, client.ObjectKeyFromObject(w), &workv1alpha1.Work{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Work is released once the member is clean")
	}).Should(Succeed())
	err := member.Get(ctx, client.ObjectKey{Namespace: ns, Name: "good"}, &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	err = member.Get(ctx, appliedKey(w), &lodestarworkv1alpha1.AppliedWork{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	g.Expect(member.Get(ctx, client.ObjectKeyFromObject(theirs), theirs)).To(Succeed())
	g.Expect(theirs.Data).To(Equal(map[string]string{"owner": "someone else"}))
}

// Removing a manifest deletes its object, but not one that someone recreated
// after the agent created it. (The Work reports drift rather than correcting it:
// under Correct the agent may create the deleted object again before the test
// does, which is drift correction, not what this test is about.)
func TestRemovedManifestDeletesOnlyWhatItCreated(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := "agent-" + newNamespace(t)
	member := members[member2].Client
	w := newWork(t, member2, "removal", &lodestarworkv1alpha1.ApplyStrategy{WhenDrifted: lodestarworkv1alpha1.DriftReport},
		configMapManifest(t, ns, "keep", nil),
		configMapManifest(t, ns, "drop", nil),
		configMapManifest(t, ns, "recreated", nil),
	)
	g.Eventually(func(g Gomega) {
		applied := &lodestarworkv1alpha1.AppliedWork{}
		g.Expect(member.Get(ctx, appliedKey(w), applied)).To(Succeed())
		g.Expect(applied.Status.AppliedResources).To(HaveLen(3))
	}).Should(Succeed())

	// Someone deletes and recreates one of the objects on the member.
	recreated := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "recreated", Namespace: ns}}
	g.Expect(member.Delete(ctx, recreated)).To(Succeed())
	recreated = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "recreated", Namespace: ns}, Data: map[string]string{"mine": "now"}}
	g.Expect(member.Create(ctx, recreated)).To(Succeed())

	g.Expect(updateOnHub(w, func(w *workv1alpha1.Work) { w.Spec.Workload.Manifests = w.Spec.Workload.Manifests[:1] })).To(Succeed())

	g.Eventually(func(g Gomega) {
		err := member.Get(ctx, client.ObjectKey{Namespace: ns, Name: "drop"}, &corev1.ConfigMap{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		applied := &lodestarworkv1alpha1.AppliedWork{}
		g.Expect(member.Get(ctx, appliedKey(w), applied)).To(Succeed())
		g.Expect(applied.Status.AppliedResources).To(ConsistOf(HaveField("Name", "keep")))
	}).Should(Succeed())
	g.Expect(member.Get(ctx, client.ObjectKey{Namespace: ns, Name: "keep"}, &corev1.ConfigMap{})).To(Succeed())
	got := &corev1.ConfigMap{}
	g.Expect(member.Get(ctx, client.ObjectKeyFromObject(recreated), got)).To(Succeed())
	g.Expect(got.Data).To(Equal(map[string]string{"mine": "now"}), "an object recreated by someone else is not deleted")

	g.Expect(hubCP.Client.Delete(ctx, w)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := member.Get(ctx, client.ObjectKey{Namespace: ns, Name: "keep"}, &corev1.ConfigMap{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}).Should(Succeed())
}

// The agent's identity on the hub reaches its own namespace's Works (read, status,
// its finalizer), its Lease and its own ClusterProfile's status, and nothing else.
func TestAgentIdentityIsLeastPrivilege(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c, err := client.New(agentConfigs[member1], client.Options{Scheme: scheme.Agent()})
	g.Expect(err).NotTo(HaveOccurred())
	cs, err := kubernetes.NewForConfig(agentConfigs[member1])
	g.Expect(err).NotTo(HaveOccurred())
	own, other := names.ClusterNamespace(member1), names.ClusterNamespace(member2)

	// A Work in its namespace, written by an admin (the agent applies it).
	ns := newNamespace(t)
	w := newWork(t, member1, "least-privilege", nil, cmManifest(t, ns, "lp", map[string]any{"k": "v"}))
	eventuallyManifest(t, w, 0, metav1.ConditionTrue, "Applied")

	g.Expect(c.List(ctx, &workv1alpha1.WorkList{}, client.InNamespace(own))).To(Succeed())
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: placementv1alpha1.DefaultClusterSet, Name: member1}, &cpv1alpha1.ClusterProfile{})).To(Succeed())

	// Read and update as the agent, again when the agent's status writes race it.
	edit := func(mutate func(*workv1alpha1.Work)) error { return updateWith(c, w.DeepCopy(), mutate) }
	otherProfile := &cpv1alpha1.ClusterProfile{}
	g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: placementv1alpha1.DefaultClusterSet, Name: member2}, otherProfile)).To(Succeed())
	_, tokenErr := cs.CoreV1().ServiceAccounts(own).CreateToken(ctx, "default", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})

	forbidden := map[string]error{
		"Works of another cluster": c.List(ctx, &workv1alpha1.WorkList{}, client.InNamespace(other)),
		"Works of every namespace": c.List(ctx, &workv1alpha1.WorkList{}),
		"Secrets of its namespace": c.List(ctx, &corev1.SecretList{}, client.InNamespace(own)),
		"creating a Work":          c.Create(ctx, &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: own}}),
		"deleting a Work":          c.Delete(ctx, &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: own}}),
		"a Work's spec": edit(func(w *workv1alpha1.Work) {
			w.Spec.Workload.Manifests = append(w.Spec.Workload.Manifests, w.Spec.Workload.Manifests[0])
		}),
		"a Work's labels":                    edit(func(w *workv1alpha1.Work) { w.Labels = map[string]string{"x": "y"} }),
		"another finalizer":                  edit(func(w *workv1alpha1.Work) { w.Finalizers = append(w.Finalizers, "example.com/keep") }),
		"listing ClusterProfiles":            c.List(ctx, &cpv1alpha1.ClusterProfileList{}, client.InNamespace(placementv1alpha1.DefaultClusterSet)),
		"another ClusterProfile":             c.Get(ctx, client.ObjectKeyFromObject(otherProfile), &cpv1alpha1.ClusterProfile{}),
		"another ClusterProfile's status":    c.Status().Update(ctx, otherProfile),
		"another cluster's Lease":            c.Get(ctx, client.ObjectKey{Namespace: other, Name: placementv1alpha1.AgentLeaseName}, &coordinationv1.Lease{}),
		"another Lease of its namespace":     c.Get(ctx, client.ObjectKey{Namespace: own, Name: "someone-else"}, &coordinationv1.Lease{}),
		"a token for another ServiceAccount": tokenErr,
	}
	for what, err := range forbidden {
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s: want Forbidden, got %v", what, err)
	}

	// Its own finalizer it may remove and add back.
	g.Expect(edit(func(w *workv1alpha1.Work) { w.Finalizers = nil })).To(Succeed())
	g.Expect(edit(func(w *workv1alpha1.Work) { w.Finalizers = []string{lodestarworkv1alpha1.WorkFinalizer} })).To(Succeed())
}

// The hub bounds the lifetime of the tokens an agent renews itself: 24 hours.
func TestAgentTokenLifetimeIsBoundedByTheHub(t *testing.T) {
	g := NewWithT(t)
	cs, err := kubernetes.NewForConfig(agentConfigs[member1])
	g.Expect(err).NotTo(HaveOccurred())
	request := func(d time.Duration) error {
		_, err := cs.CoreV1().ServiceAccounts(names.ClusterNamespace(member1)).CreateToken(t.Context(), agentidentity.ServiceAccount,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(d.Seconds()))}}, metav1.CreateOptions{})
		return err
	}
	g.Expect(request(time.Hour)).To(Succeed())
	err = request(48 * time.Hour)
	g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("at most 24 hours"))
}
