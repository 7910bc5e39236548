package integration

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/policy"
)

// The member's own policy refuses what it does not allow, whatever the hub sends:
// each such manifest fails alone, with the rule that denied it.
func TestMemberPolicyDeniesOnlyWhatItForbids(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	w := newWork(t, member1, "policy", nil,
		cmManifest(t, "kube-system", "placed-in-kube-system", map[string]any{"k": "v"}),
		cmManifest(t, "lodestar-system", "placed-in-agent-namespace", map[string]any{"k": "v"}),
		manifest(t, map[string]any{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
			"metadata": map[string]any{"name": "placed-cluster-admin"},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
			"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "default", "namespace": "default"}},
		}),
		cmManifest(t, ns, "fine", map[string]any{"k": "v"}),
	)
	g.Expect(eventuallyManifest(t, w, 0, metav1.ConditionFalse, lodestarworkv1alpha1.ReasonDeniedByPolicy)).To(ContainSubstring("denies namespace kube-system"))
	g.Expect(eventuallyManifest(t, w, 1, metav1.ConditionFalse, lodestarworkv1alpha1.ReasonDeniedByPolicy)).To(ContainSubstring("denies namespace lodestar-system"))
	g.Expect(eventuallyManifest(t, w, 2, metav1.ConditionFalse, lodestarworkv1alpha1.ReasonDeniedByPolicy)).To(ContainSubstring("binds cluster-admin"))
	eventuallyManifest(t, w, 3, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)

	member := members[member1].Client
	err := member.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "placed-in-kube-system"}, &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
	err = member.Get(ctx, client.ObjectKey{Name: "placed-cluster-admin"}, &rbacv1.ClusterRoleBinding{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
	g.Expect(member.Get(ctx, client.ObjectKey{Namespace: ns, Name: "fine"}, &corev1.ConfigMap{})).To(Succeed())
}

// A policy tightened after an object was applied leaves the object in place.
func TestTightenedPolicyDeletesNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	name, cfg := joinAux(t, "tightened", time.Hour)
	opts := auxAgent(name, cfg, member2)
	stop := startAgent(t, opts)
	ns, cm := placeOnAux(t, name)
	stop()

	opts.Config.Policy = policy.Policy{DeniedKinds: []string{"ConfigMap"}}
	startAgent(t, opts)
	// The restarted agent reports the Work again, under the new policy.
	w := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: "leaving", Namespace: names.ClusterNamespace(name)}}
	g.Expect(eventuallyManifest(t, w, 0, metav1.ConditionFalse, lodestarworkv1alpha1.ReasonDeniedByPolicy)).To(ContainSubstring("denies kind ConfigMap"))
	got := &corev1.ConfigMap{}
	g.Expect(members[member2].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "left-behind"}, got)).To(Succeed())
	g.Expect(got.UID).To(Equal(cm.UID))
}

// Namespaces the agent creates for manifests enforce the member policy's Pod
// Security Standard: a tenant's privileged hostPath pod is rejected there.
func TestCreatedNamespacesEnforcePodSecurity(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := "psa-" + rand.String(5)
	w := newWork(t, member2, "psa", nil, cmManifest(t, ns, "settings", map[string]any{"k": "v"}))
	eventuallyManifest(t, w, 0, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)
	created := &corev1.Namespace{}
	g.Expect(members[member2].Client.Get(ctx, client.ObjectKey{Name: ns}, created)).To(Succeed())
	g.Expect(created.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "baseline"))

	privileged := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "root", Namespace: ns},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "busybox", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
				VolumeMounts: []corev1.VolumeMount{{Name: "host", MountPath: "/host"}}}},
			Volumes: []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}},
		},
	}
	err := members[member2].Client.Create(ctx, privileged)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("PodSecurity"))
}
