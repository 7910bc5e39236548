package charts

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// The agent binary run with no configuration file (as runFleet runs it) enforces
// the default member policy: a ClusterRoleBinding to a control-plane role that
// creates pods in every namespace is refused, and the namespaces it creates, or
// applies from a manifest that asks for less, enforce the baseline Pod Security
// Standard.
func TestAgentWithoutConfigProtectsTheMember(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	f := runFleet(t, testenv.StartEmptyHub)
	manifests := []workv1alpha1.Manifest{}
	for _, obj := range []map[string]any{
		{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": map[string]any{"name": "daemons"},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:controller:daemon-set-controller"},
			"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "default", "namespace": "made"}}},
		{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": "made"}},
		{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "placed",
			"labels": map[string]any{"pod-security.kubernetes.io/enforce": "privileged"}}},
	} {
		raw, err := json.Marshal(obj)
		g.Expect(err).NotTo(HaveOccurred())
		manifests = append(manifests, workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}})
	}
	w := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: "policy", Namespace: names.ClusterNamespace("edge-1")},
		Spec: workv1alpha1.WorkSpec{Workload: workv1alpha1.WorkloadTemplate{Manifests: manifests}}}
	g.Expect(f.hub.Client.Create(ctx, w)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &workv1alpha1.Work{}
		g.Expect(f.hub.Client.Get(ctx, client.ObjectKeyFromObject(w), got)).To(Succeed())
		g.Expect(got.Status.ManifestConditions).To(HaveLen(3))
		for _, mc := range got.Status.ManifestConditions {
			applied := meta.FindStatusCondition(mc.Conditions, lodestarworkv1alpha1.ConditionApplied)
			g.Expect(applied).NotTo(BeNil(), mc.Identifier.Name)
			if mc.Identifier.Kind == "ClusterRoleBinding" {
				g.Expect(applied.Reason).To(Equal(lodestarworkv1alpha1.ReasonDeniedByPolicy), applied.Message)
				g.Expect(applied.Message).To(ContainSubstring("binds system:controller:daemon-set-controller"))
			} else {
				g.Expect(applied.Status).To(Equal(metav1.ConditionTrue), "%s: %s", mc.Identifier.Name, applied.Message)
			}
		}
		for _, name := range []string{"made", "placed"} {
			ns := &corev1.Namespace{}
			g.Expect(f.member.Client.Get(ctx, client.ObjectKey{Name: name}, ns)).To(Succeed())
			g.Expect(ns.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "baseline"), name)
		}
	}).WithTimeout(2 * testenv.EventuallyTimeout).Should(Succeed())
	err := f.member.Client.Get(ctx, client.ObjectKey{Name: "daemons"}, &rbacv1.ClusterRoleBinding{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the binding is not on the member: %v", err)
}
