package integration

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
)

// The hub's own claims are never shipped: on a hub that runs controllers the
// StatefulSet controller makes data-<statefulset>-<n> with the workload's labels
// and no owner (made here as it makes them). A selector by labels places the
// StatefulSet and neither claim; a selector naming kind PersistentVolumeClaim
// places the standalone claim, not the StatefulSet's.
func TestHubClaimsAreNeverShipped(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	labels := map[string]string{"app": "db"}
	claim := func(name string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns, Labels: labels},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels}, ServiceName: "db",
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "postgres:17"}}}},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: claim("").Spec}}}}
	for _, obj := range []client.Object{sts, claim("data-db-0"), claim("data-db-1"), claim("uploads")} {
		g.Expect(hubCP.Client.Create(ctx, obj)).To(Succeed())
	}

	byLabels := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "by-labels", Namespace: ns},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{{LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}},
			Scheduling:        placementv1alpha1.Scheduling{ClusterNames: []string{member2}},
		}}
	byKind := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "claims", Namespace: ns},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{{Version: "v1", Kind: "PersistentVolumeClaim", LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}},
			Scheduling:        placementv1alpha1.Scheduling{ClusterNames: []string{member2}},
		}}
	for _, p := range []*placementv1alpha1.Placement{byLabels, byKind} {
		g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	}
	member := members[member2].Client
	g.Eventually(func(g Gomega) {
		g.Expect(member.Get(ctx, client.ObjectKeyFromObject(sts), &appsv1.StatefulSet{})).To(Succeed())
		g.Expect(member.Get(ctx, client.ObjectKey{Namespace: ns, Name: "uploads"}, &corev1.PersistentVolumeClaim{})).To(Succeed())
		for _, p := range []*placementv1alpha1.Placement{byLabels, byKind} {
			w := workOf(g, p, member2)
			g.Expect(w).NotTo(BeNil())
			g.Expect(w.Spec.Workload.Manifests).To(HaveLen(1), "%s places one object", p.Name)
		}
	}).Should(Succeed())
	for _, name := range []string{"data-db-0", "data-db-1"} {
		err := member.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.PersistentVolumeClaim{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the hub's claim %s stays on the hub: %v", name, err)
	}
}

// Deleting does not destroy data by default: a placed claim stays on the member
// (released) when its Placement goes, and a placed StatefulSet keeps its claims
// (retention policy Retain on the member) unless the Placement asks
// applyStrategy.claims: Delete.
func TestClaimsAreRetainedByDefault(t *testing.T) {
	for _, claims := range []lodestarworkv1alpha1.ClaimPolicy{"", lodestarworkv1alpha1.ClaimsDelete} {
		t.Run(string(claims)+"-claims", func(t *testing.T) {
			g := NewWithT(t)
			ctx := t.Context()
			ns := newNamespace(t)
			labels := map[string]string{"app": "db"}
			pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "uploads", Namespace: ns},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
			sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns, Labels: labels},
				Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels}, ServiceName: "db",
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "postgres:17"}}}},
					PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
						WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.DeletePersistentVolumeClaimRetentionPolicyType}}}
			for _, obj := range []client.Object{pvc, sts} {
				g.Expect(hubCP.Client.Create(ctx, obj)).To(Succeed())
			}
			p := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
				Spec: placementv1alpha1.PlacementSpec{
					ResourceSelectors: []placementv1alpha1.ResourceSelector{
						{Version: "v1", Kind: "PersistentVolumeClaim", Name: "uploads"}, {Group: "apps", Version: "v1", Kind: "StatefulSet", Name: "db"}},
					Scheduling: placementv1alpha1.Scheduling{ClusterNames: []string{member2}},
				}}
			if claims != "" {
				p.Spec.ApplyStrategy = &lodestarworkv1alpha1.ApplyStrategy{Claims: claims}
			}
			g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
			member := members[member2].Client
			want := appsv1.RetainPersistentVolumeClaimRetentionPolicyType
			if claims == lodestarworkv1alpha1.ClaimsDelete {
				want = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
			}
			g.Eventually(func(g Gomega) {
				got := &appsv1.StatefulSet{}
				g.Expect(member.Get(ctx, client.ObjectKeyFromObject(sts), got)).To(Succeed())
				g.Expect(got.Spec.PersistentVolumeClaimRetentionPolicy).NotTo(BeNil())
				g.Expect(got.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted).To(Equal(want))
				g.Expect(got.Spec.PersistentVolumeClaimRetentionPolicy.WhenScaled).To(Equal(want))
				g.Expect(member.Get(ctx, client.ObjectKeyFromObject(pvc), &corev1.PersistentVolumeClaim{})).To(Succeed())
			}).Should(Succeed())

			g.Expect(hubCP.Client.Delete(ctx, p)).To(Succeed())
			gone := func(g Gomega) {
				err := hubCP.Client.Get(ctx, client.ObjectKeyFromObject(p), &placementv1alpha1.Placement{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Placement is gone: %v", err)
				err = member.Get(ctx, client.ObjectKeyFromObject(sts), &appsv1.StatefulSet{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the StatefulSet leaves the member: %v", err)
			}
			got := &corev1.PersistentVolumeClaim{}
			if claims == lodestarworkv1alpha1.ClaimsDelete {
				// Deleted: it goes once the member's claim protection lets it (this
				// member runs no controller manager: the test stands in for it).
				g.Eventually(func(g Gomega) {
					err := member.Get(ctx, client.ObjectKeyFromObject(pvc), got)
					g.Expect(apierrors.IsNotFound(err) || (err == nil && !got.DeletionTimestamp.IsZero())).To(BeTrue(), "claims: Delete deletes it: %v", err)
				}).Should(Succeed())
				onMember := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: pvc.Name, Namespace: ns}}
				g.Expect(client.IgnoreNotFound(member.Patch(ctx, onMember, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))))).To(Succeed())
				g.Eventually(gone).Should(Succeed())
				return
			}
			g.Eventually(gone).Should(Succeed())
			err := member.Get(ctx, client.ObjectKeyFromObject(pvc), got)
			g.Expect(err).NotTo(HaveOccurred(), "the claim and its data stay on the member")
			g.Expect(got.DeletionTimestamp.IsZero()).To(BeTrue())
			g.Expect(got.OwnerReferences).To(BeEmpty(), "released by the Work")
			g.Eventually(func(g Gomega) {
				events := &eventsv1.EventList{}
				g.Expect(hubCP.Client.List(ctx, events, client.InNamespace(ns))).To(Succeed())
				g.Expect(events.Items).To(ContainElement(And(
					HaveField("Reason", placementv1alpha1.ReasonClaimsRetained), HaveField("Regarding.Name", p.Name),
					HaveField("Note", ContainSubstring("cluster member-2 keeps the claims "+ns+"/uploads with their data")))))
			}).Should(Succeed())
		})
	}
}
