package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/fleet"
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

// statefulDB is StatefulSet db: replicas, one claim template "data" of mode
// and class lodestar-static, labelled app=db.
func statefulDB(ns string, replicas int32, mode corev1.PersistentVolumeAccessMode) *appsv1.StatefulSet {
	labels := map[string]string{"app": "db"}
	return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns, Labels: labels},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels}, ServiceName: "db",
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "postgres:17"}}}},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{mode}, StorageClassName: ptr.To("lodestar-static"),
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}}}}
}

// statefulPlacement places StatefulSet db on clusters.
func statefulPlacement(ns string, clusters ...string) *placementv1alpha1.Placement {
	return &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{{Group: "apps", Version: "v1", Kind: "StatefulSet", Name: "db"}},
			Scheduling:        placementv1alpha1.Scheduling{ClusterNames: clusters},
		}}
}

// bindClaims stands in, on a member without a controller manager, for the
// StatefulSet controller and the volume binder: once StatefulSet sts
// (labelled app=<sts>) is there, it makes its claims data-<sts>-<i> and binds
// them.
func bindClaims(t *testing.T, cluster, ns, sts string, replicas int, mode corev1.PersistentVolumeAccessMode) {
	t.Helper()
	g := NewWithT(t)
	c := members[cluster].Client
	g.Eventually(func() error {
		return c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: sts}, &appsv1.StatefulSet{})
	}).Should(Succeed())
	for i := range replicas {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("data-%s-%d", sts, i), Namespace: ns, Labels: map[string]string{"app": sts}},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{mode}, StorageClassName: ptr.To("lodestar-static"),
				VolumeName: fmt.Sprintf("%s-data-%s-%d", ns, sts, i),
				Resources:  corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
		g.Expect(c.Create(t.Context(), pvc)).To(Succeed())
		pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: pvc.Spec.AccessModes,
			Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}
		g.Expect(c.Status().Update(t.Context(), pvc)).To(Succeed())
	}
}

// staticVolumes makes, on a member that binds claims, one volume for each
// claim data-db-<i> of ns (reclaim policy Delete), removed when the test ends.
func staticVolumes(t *testing.T, cluster, ns string, replicas int) {
	t.Helper()
	c := members[cluster].Client
	for i := range replicas {
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-data-db-%d", ns, i)},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: "lodestar-static",
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/lodestar-test/" + ns}},
				ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: fmt.Sprintf("data-db-%d", i)},
			}}
		NewWithT(t).Expect(c.Create(t.Context(), pv)).To(Succeed())
		t.Cleanup(func() { _ = c.Delete(context.Background(), pv) })
	}
}

// placeStateful places StatefulSet db (replicas, claims of mode) on cluster
// with the Placement edit makes, binds its claims there as the member's
// controllers would, and waits until the Placement shows them Bound.
func placeStateful(t *testing.T, ns, cluster string, replicas int, mode corev1.PersistentVolumeAccessMode, edit func(*placementv1alpha1.Placement)) *placementv1alpha1.Placement {
	t.Helper()
	g := NewWithT(t)
	g.Expect(hubCP.Client.Create(t.Context(), statefulDB(ns, int32(replicas), mode))).To(Succeed())
	p := statefulPlacement(ns, cluster)
	if edit != nil {
		edit(p)
	}
	g.Expect(hubCP.Client.Create(t.Context(), p)).To(Succeed())
	bindClaims(t, cluster, ns, "db", replicas, mode)
	expectClaims(t, client.ObjectKeyFromObject(p), cluster, replicas)
	return p
}

// expectClaims waits until the Placement's status shows the cluster's claims,
// n of them, Bound.
func expectClaims(t *testing.T, key client.ObjectKey, cluster string, n int) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		p := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(t.Context(), key, p)).To(Succeed())
		i := slices.IndexFunc(p.Status.Clusters, func(cs placementv1alpha1.ClusterStatus) bool { return cs.Name == cluster })
		g.Expect(i).To(BeNumerically(">=", 0), "cluster %s is listed", cluster)
		g.Expect(p.Status.Clusters[i].Claims).To(HaveLen(n))
		for _, c := range p.Status.Clusters[i].Claims {
			g.Expect(c.Phase).To(Equal("Bound"), c.Name)
		}
	}).Should(Succeed())
}

// A selector change does not move a StatefulSet away from its bound
// ReadWriteOnce claims: nothing is created on the new cluster, nothing deleted
// on the old, and the reason names the claims. With spec.strategy.stateful:
// Move it moves make-before-break, the status warns that the new claims are
// empty, and the old cluster keeps its claims, recorded in the status.
func TestStatefulMoveIsHeldUnlessAsked(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	// member-1 runs a controller manager: its StatefulSet controller makes the
	// claims and its binder binds them to these volumes; kwok runs the pods.
	staticVolumes(t, fullMember, ns, 3)
	g.Expect(hubCP.Client.Create(ctx, statefulDB(ns, 3, corev1.ReadWriteOnce))).To(Succeed())
	p := statefulPlacement(ns, member1)
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)
	g.Eventually(func(g Gomega) {
		w := workOf(g, p, member1)
		g.Expect(w).NotTo(BeNil())
		g.Expect(workAvailable(w)).To(BeTrue())
	}).Should(Succeed())
	expectClaims(t, key, member1, 3)
	got := &placementv1alpha1.Placement{}
	g.Expect(hubCP.Client.Get(ctx, key, got)).To(Succeed())
	g.Expect(got.Status.Clusters[0].Claims[0]).To(And(HaveField("Name", "data-db-0"), HaveField("Workload", "StatefulSet "+ns+"/db"),
		HaveField("StorageClass", "lodestar-static"), HaveField("AccessModes", []string{"ReadWriteOnce"}), HaveField("Requested", "1Gi"),
		HaveField("Capacity", "1Gi"), HaveField("ReclaimDelete", true), HaveField("Holds", true)))

	g.Expect(updateOnHub(p, func(p *placementv1alpha1.Placement) { p.Spec.Scheduling.ClusterNames = []string{member2} })).To(Succeed())
	want := "StatefulSet " + ns + "/db on member-1 has 3 bound ReadWriteOnce claims (data-db-0..2)"
	g.Eventually(func(g Gomega) {
		c := placementCondition(g, t, key, placementv1alpha1.ProgressingCondition)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonStatefulMoveBlocked))
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Message).To(ContainSubstring(want))
		g.Expect(c.Message).To(ContainSubstring("set spec.strategy.stateful: Move"))
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(workOf(g, p, member2)).To(BeNil(), "nothing is created on the new cluster")
		old := workOf(g, p, member1)
		g.Expect(old).NotTo(BeNil())
		g.Expect(old.DeletionTimestamp.IsZero()).To(BeTrue(), "nothing is deleted on the old cluster")
		err := members[member2].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, &appsv1.StatefulSet{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}).WithTimeout(5 * time.Second).Should(Succeed())
	events := &eventsv1.EventList{}
	g.Expect(hubCP.Client.List(ctx, events, client.InNamespace(ns))).To(Succeed())
	g.Expect(events.Items).To(ContainElement(And(HaveField("Reason", placementv1alpha1.ReasonStatefulMoveBlocked), HaveField("Note", ContainSubstring(want)))))

	// Opted in: make-before-break to new, empty claims.
	g.Expect(updateOnHub(p, func(p *placementv1alpha1.Placement) { p.Spec.Strategy.Stateful = placementv1alpha1.StatefulMove })).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(workOf(g, p, member2)).NotTo(BeNil())
		c := placementCondition(g, t, key, placementv1alpha1.ProgressingCondition)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonRolloutInProgress))
		g.Expect(c.Message).To(ContainSubstring("moving anyway"))
		g.Expect(c.Message).To(ContainSubstring("the claims of the clusters added are new and empty"))
	}).Should(Succeed())
	// member-2 has no controller manager: until the test makes its copy
	// Available, member-1 keeps its own.
	g.Consistently(func(g Gomega) {
		old := workOf(g, p, member1)
		g.Expect(old).NotTo(BeNil())
		g.Expect(old.DeletionTimestamp.IsZero()).To(BeTrue(), "make-before-break")
	}).WithTimeout(3 * time.Second).Should(Succeed())
	readyStatefulSet(t, member2, ns, "db")
	g.Eventually(func(g Gomega) {
		g.Expect(workOf(g, p, member1)).To(BeNil())
		got := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, key, got)).To(Succeed())
		g.Expect(got.Status.Rollout).NotTo(BeNil())
		g.Expect(got.Status.Rollout.RetainedClaims).To(ConsistOf(And(HaveField("Cluster", member1),
			HaveField("Claims", []string{ns + "/data-db-0", ns + "/data-db-1", ns + "/data-db-2"}))))
	}).Should(Succeed())
	for i := range 3 {
		claim := &corev1.PersistentVolumeClaim{}
		g.Expect(members[member1].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("data-db-%d", i)}, claim)).To(Succeed())
		g.Expect(claim.DeletionTimestamp.IsZero()).To(BeTrue(), "member-1 keeps the data")
	}
	g.Eventually(func(g Gomega) {
		events := &eventsv1.EventList{}
		g.Expect(hubCP.Client.List(ctx, events, client.InNamespace(ns))).To(Succeed())
		g.Expect(events.Items).To(ContainElements(
			HaveField("Reason", placementv1alpha1.ReasonStatefulMove),
			And(HaveField("Reason", placementv1alpha1.ReasonClaimsRetained), HaveField("Note", ContainSubstring(ns+"/data-db-0")))))
	}).Should(Succeed())
}

// readyStatefulSet stands in for a member's StatefulSet controller: the
// StatefulSet reads every replica ready.
func readyStatefulSet(t *testing.T, cluster, ns, name string) {
	t.Helper()
	standIn(t, cluster, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, func(sts *appsv1.StatefulSet) {
		want := ptr.Deref(sts.Spec.Replicas, 1)
		sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: sts.Generation, Replicas: want, ReadyReplicas: want, UpdatedReplicas: want,
			AvailableReplicas: want, CurrentReplicas: want, CurrentRevision: "r1", UpdateRevision: "r1"}
	})
}

// Claims that are all ReadWriteMany (shared storage) hold nothing: the
// StatefulSet moves as any workload does.
func TestSharedStorageMoves(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	p := placeStateful(t, ns, member2, 1, corev1.ReadWriteMany, nil)
	key := client.ObjectKeyFromObject(p)

	g.Expect(updateOnHub(p, func(p *placementv1alpha1.Placement) { p.Spec.Scheduling.ClusterNames = []string{member1} })).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(workOf(g, p, member1)).NotTo(BeNil())
		g.Expect(workOf(g, p, member2)).To(BeNil(), "member-2's copy was never Available: it goes at once")
		c := placementCondition(g, t, key, placementv1alpha1.ProgressingCondition)
		g.Expect(c.Reason).NotTo(Equal(placementv1alpha1.ReasonStatefulMoveBlocked))
	}).Should(Succeed())
}

// A drain leaves a held copy where it is and lists its Placement; a drain
// with --include-stateful moves it.
func TestDrainHoldsStatefulCopies(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	p := placeStateful(t, ns, member2, 2, corev1.ReadWriteOnce, func(p *placementv1alpha1.Placement) {
		p.Spec.Scheduling.NumberOfClusters = ptr.To[int32](1)
	})
	key := client.ObjectKeyFromObject(p)
	// member-1 may replace it now; member-2, chosen, stays chosen.
	g.Expect(updateOnHub(p, func(p *placementv1alpha1.Placement) { p.Spec.Scheduling.ClusterNames = []string{member2, member1} })).To(Succeed())
	g.Consistently(func(g Gomega) { g.Expect(workOf(g, p, member1)).To(BeNil()) }).WithTimeout(2 * time.Second).Should(Succeed())

	g.Expect(fleet.Drain(ctx, hubCP.Client, "", member2, time.Now(), fleet.DrainOptions{})).To(Succeed())
	t.Cleanup(func() { _ = fleet.Uncordon(context.Background(), hubCP.Client, "", member2) })
	g.Eventually(func(g Gomega) {
		c := placementCondition(g, t, key, placementv1alpha1.ProgressingCondition)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonStatefulMoveBlocked))
		g.Expect(c.Message).To(ContainSubstring("StatefulSet " + ns + "/db on member-2 has 2 bound ReadWriteOnce claims (data-db-0..1)"))
		held, err := fleet.HeldOn(ctx, hubCP.Client, member2)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(held).To(ContainElement(And(HaveField("Namespace", ns), HaveField("Placement", "db"), HaveField("Why", ContainSubstring("data-db-0..1")))))
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(workOf(g, p, member1)).To(BeNil(), "no replacement while held")
		g.Expect(workOf(g, p, member2)).NotTo(BeNil())
	}).WithTimeout(3 * time.Second).Should(Succeed())

	g.Expect(fleet.Drain(ctx, hubCP.Client, "", member2, time.Now(), fleet.DrainOptions{IncludeStateful: true})).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(workOf(g, p, member1)).NotTo(BeNil(), "--include-stateful moves it")
		g.Expect(workOf(g, p, member2)).To(BeNil(), "member-2's copy was never Available: it goes at once")
	}).Should(Succeed())
	claim := &corev1.PersistentVolumeClaim{}
	g.Expect(members[member2].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-db-0"}, claim)).To(Succeed())
	g.Expect(claim.DeletionTimestamp.IsZero()).To(BeTrue(), "member-2 keeps the data")
}

// A failover does not move a held copy: the replacement gets nothing, the
// unreachable cluster keeps its Work, and Progressing says FailoverBlocked
// with the claims named.
func TestFailoverHoldsStatefulCopies(t *testing.T) {
	extraMembers(t)
	g := NewWithT(t)
	ns := newTenant(t, placementv1alpha1.DefaultClusterSet, auxSet)
	p := placeStateful(t, ns, member4, 1, corev1.ReadWriteOncePod, func(p *placementv1alpha1.Placement) {
		p.Spec.Scheduling.NumberOfClusters = ptr.To[int32](1)
		p.Spec.Scheduling.Failover = &placementv1alpha1.Failover{TolerationSeconds: ptr.To[int32](2), GracePeriodSeconds: ptr.To[int32](600)}
	})
	key := client.ObjectKeyFromObject(p)
	g.Expect(updateOnHub(p, func(p *placementv1alpha1.Placement) { p.Spec.Scheduling.ClusterNames = []string{member4, member2} })).To(Succeed())

	stopExtraAgent(member4)
	t.Cleanup(func() {
		if err := startExtraAgent(member4); err != nil {
			t.Errorf("restarting the agent of %s: %v", member4, err)
		}
	})
	g.Eventually(func(g Gomega) {
		c := placementCondition(g, t, key, placementv1alpha1.ProgressingCondition)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonFailoverBlocked), c.Message)
		g.Expect(c.Message).To(ContainSubstring("StatefulSet " + ns + "/db on member-4 has 1 bound ReadWriteOncePod claim (data-db-0)"))
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(workOf(g, p, member2)).To(BeNil(), "no replacement while held")
		old := workOf(g, p, member4)
		g.Expect(old).NotTo(BeNil())
		g.Expect(old.DeletionTimestamp.IsZero()).To(BeTrue())
	}).WithTimeout(3 * time.Second).Should(Succeed())
}

// Storage from the hub: a claim naming a class the member lacks is named with
// the member's reason; requiredStorageClasses keeps such clusters out, with
// the reason in status.scheduling.
func TestStorageClassesFromTheHub(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	class := "fast-" + ns
	uploads := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "uploads", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: ptr.To(class),
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}}}
	g.Expect(hubCP.Client.Create(ctx, uploads)).To(Succeed())
	p := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "uploads", Namespace: ns},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{{Version: "v1", Kind: "PersistentVolumeClaim", Name: "uploads"}},
			Scheduling:        placementv1alpha1.Scheduling{ClusterNames: []string{member2}},
		}}
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(got.Status.Clusters).To(ContainElement(And(HaveField("Name", member2),
			HaveField("Reasons", ContainElement(fmt.Sprintf(`PersistentVolumeClaim %s/uploads: storageclass.storage.k8s.io %q not found`, ns, class))),
			HaveField("Claims", ConsistOf(And(HaveField("Name", "uploads"), HaveField("Phase", "Pending"), HaveField("StorageClass", class),
				HaveField("Requested", "10Gi"), HaveField("Holds", false)))))))
	}).Should(Succeed())

	// member-1 gets the class; member-2 has not.
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Provisioner: "example.com/none"}
	g.Expect(members[member1].Client.Create(ctx, sc)).To(Succeed())
	t.Cleanup(func() { _ = members[member1].Client.Delete(context.Background(), sc) })
	required := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "required", Namespace: ns},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{{Version: "v1", Kind: "PersistentVolumeClaim", Name: "uploads"}},
			Scheduling:        placementv1alpha1.Scheduling{ClusterNames: []string{member1, member2}, RequiredStorageClasses: []string{class}},
		}}
	g.Expect(hubCP.Client.Create(ctx, required)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(workOf(g, required, member1)).NotTo(BeNil())
		got := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(required), got)).To(Succeed())
		g.Expect(got.Status.Scheduling).NotTo(BeNil())
		g.Expect(got.Status.Scheduling.Excluded).To(ContainElement(And(
			HaveField("Reason", placementv1alpha1.ExclusionMissingStorageClass), HaveField("Clusters", ContainElement(member2)))))
	}).Should(Succeed())
	g.Consistently(func(g Gomega) { g.Expect(workOf(g, required, member2)).To(BeNil()) }).WithTimeout(2 * time.Second).Should(Succeed())
}

// Every example of docs/stateful.md, applied to the hub, does what the doc says.
func TestStatefulExamples(t *testing.T) {
	files, doc := examples(t, "stateful", 3)
	expect := map[string]func(t *testing.T, ns string, decision *unstructured.Unstructured){
		"01-hold.yaml": func(t *testing.T, ns string, _ *unstructured.Unstructured) {
			// member-1 offers the class (with no provisioner behind it), member-2 does not.
			sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "standard"}, Provisioner: "example.com/none"}
			NewWithT(t).Expect(members[member1].Client.Create(t.Context(), sc)).To(Succeed())
			t.Cleanup(func() { _ = members[member1].Client.Delete(context.Background(), sc) })
			NewWithT(t).Eventually(func(g Gomega) {
				p := &placementv1alpha1.Placement{}
				g.Expect(hubCP.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "db"}, p)).To(Succeed())
				g.Expect(workOf(g, p, member1)).NotTo(BeNil())
				g.Expect(p.Status.Scheduling).NotTo(BeNil())
				g.Expect(p.Status.Scheduling.Excluded).To(ContainElement(HaveField("Reason", placementv1alpha1.ExclusionMissingStorageClass)))
				g.Expect(p.Status.Clusters).To(ContainElement(HaveField("Claims", ContainElement(And(HaveField("Name", "data-db-0"), HaveField("Phase", "Pending"),
					HaveField("Reason", "waiting for storage class standard (provisioner example.com/none) to provide a volume"))))))
			}).Should(Succeed())
		},
		"02-move.yaml": func(t *testing.T, ns string, _ *unstructured.Unstructured) {
			p := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"}}
			bindClaims(t, member2, ns, "cache", 1, corev1.ReadWriteOnce)
			expectClaims(t, client.ObjectKeyFromObject(p), member2, 1)
			NewWithT(t).Expect(updateOnHub(p, func(p *placementv1alpha1.Placement) { p.Spec.Scheduling.ClusterNames = []string{member1} })).To(Succeed())
			NewWithT(t).Eventually(func(g Gomega) {
				g.Expect(workOf(g, p, member1)).NotTo(BeNil(), "stateful: Move moves it")
				g.Expect(workOf(g, p, member2)).To(BeNil())
			}).Should(Succeed())
		},
		"03-dr-handoff.yaml": func(t *testing.T, ns string, decision *unstructured.Unstructured) {
			g := NewWithT(t)
			p := &placementv1alpha1.Placement{}
			g.Expect(hubCP.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "orders"}, p)).To(Succeed())
			// As written, the decision is not the Placement's: nothing goes
			// anywhere, and the Placement says why.
			g.Expect(decision.GetOwnerReferences()).To(BeEmpty(), "the example needs no UID filled in")
			g.Expect(hubCP.Client.Create(t.Context(), decision)).To(Succeed())
			g.Eventually(func(g Gomega) {
				c := placementCondition(g, t, client.ObjectKeyFromObject(p), placementv1alpha1.WorkSynchronizedCondition)
				g.Expect(c.Message).To(ContainSubstring("PlacementDecision orders-dr is not owned by the Placement"))
			}).Should(Succeed())
			// The orchestrator names the Placement as the decision's owner.
			g.Expect(updateWith(hubCP.Client, decision, func(d *unstructured.Unstructured) {
				d.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: placementv1alpha1.GroupVersion.String(), Kind: "Placement", Name: p.Name, UID: p.UID}})
			})).To(Succeed())
			bindClaims(t, member2, ns, "orders", 1, corev1.ReadWriteOnce)
			expectClaims(t, client.ObjectKeyFromObject(p), member2, 1)
			// Failover by the orchestrator, once it promoted member-1's replica.
			g.Expect(updateWith(hubCP.Client, decision, func(d *unstructured.Unstructured) {
				_ = unstructured.SetNestedSlice(d.Object, []any{map[string]any{
					"clusterProfileRef": map[string]any{"name": member1, "namespace": placementv1alpha1.DefaultClusterSet}, "reason": "primary"}}, "decisions")
			})).To(Succeed())
			g.Eventually(func(g Gomega) {
				g.Expect(workOf(g, p, member1)).NotTo(BeNil())
				g.Expect(workOf(g, p, member2)).To(BeNil())
			}).Should(Succeed())
		},
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			g := NewWithT(t)
			check, ok := expect[filepath.Base(file)]
			g.Expect(ok).To(BeTrue())
			ns := newNamespace(t)
			var decision *unstructured.Unstructured
			for _, obj := range exampleObjects(t, file, doc, ns) {
				if obj.GetKind() == "PlacementDecision" {
					decision = obj
					continue
				}
				g.Expect(hubCP.Client.Create(t.Context(), obj)).To(Succeed(), "%s %s", obj.GetKind(), obj.GetName())
			}
			check(t, ns, decision)
		})
	}
}
