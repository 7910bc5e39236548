package patch_test

import (
	"os"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/patch"
	"github.com/lodestar-dev/lodestar/internal/scheme"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

var hubCP *testenv.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(testenv.RunWithHub(m, scheme.Hub(), func(cp *testenv.ControlPlane) (func(), error) {
		hubCP = cp
		return nil, nil
	}))
}

func newPlacement(t *testing.T) *placementv1alpha1.Placement {
	t.Helper()
	g := NewWithT(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "test-" + rand.String(6)}}
	g.Expect(hubCP.Client.Create(t.Context(), ns)).To(Succeed())
	p := &placementv1alpha1.Placement{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns.Name},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{{Version: "v1", Kind: "ConfigMap"}},
		},
	}
	g.Expect(hubCP.Client.Create(t.Context(), p)).To(Succeed())
	return p
}

func condition(t string, status metav1.ConditionStatus) metav1.Condition {
	return metav1.Condition{Type: t, Status: status, Reason: "R", Message: "m", LastTransitionTime: metav1.Now()}
}

// Two owners each apply their own condition and fields; neither removes the
// other's, and an owner that leaves a field out removes its own value.
func TestApplyStatusKeepsOtherOwnersFields(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := newPlacement(t)
	key := client.ObjectKeyFromObject(p)

	a := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
	a.Status.Conditions = []metav1.Condition{condition("A", metav1.ConditionTrue)}
	a.Status.SelectedClusters = ptr.To[int32](3)
	g.Expect(patch.ApplyStatus(ctx, hubCP.Client, a, "owner-a")).To(Succeed())

	b := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
	b.Status.Conditions = []metav1.Condition{condition("B", metav1.ConditionFalse)}
	b.Status.AppliedClusters = ptr.To[int32](1)
	g.Expect(patch.ApplyStatus(ctx, hubCP.Client, b, "owner-b")).To(Succeed())

	got := &placementv1alpha1.Placement{}
	g.Expect(hubCP.Client.Get(ctx, key, got)).To(Succeed())
	g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, "A")).To(BeTrue())
	g.Expect(meta.IsStatusConditionFalse(got.Status.Conditions, "B")).To(BeTrue())
	g.Expect(got.Status.SelectedClusters).To(HaveValue(BeEquivalentTo(3)))
	g.Expect(got.Status.AppliedClusters).To(HaveValue(BeEquivalentTo(1)))

	// owner-a changes its condition and leaves selectedClusters out.
	a.Status.Conditions = []metav1.Condition{condition("A", metav1.ConditionFalse)}
	a.Status.SelectedClusters = nil
	g.Expect(patch.ApplyStatus(ctx, hubCP.Client, a, "owner-a")).To(Succeed())
	g.Expect(hubCP.Client.Get(ctx, key, got)).To(Succeed())
	g.Expect(meta.IsStatusConditionFalse(got.Status.Conditions, "A")).To(BeTrue())
	g.Expect(meta.IsStatusConditionFalse(got.Status.Conditions, "B")).To(BeTrue())
	g.Expect(got.Status.SelectedClusters).To(BeNil())
	g.Expect(got.Status.AppliedClusters).To(HaveValue(BeEquivalentTo(1)))

	// The spec is untouched by status writes.
	g.Expect(got.Spec.ResourceSelectors).To(HaveLen(1))
}

func TestApplyStatusOfDeletedObject(t *testing.T) {
	g := NewWithT(t)
	p := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "gone", Namespace: "default"}}
	p.Status.Conditions = []metav1.Condition{condition("A", metav1.ConditionTrue)}
	g.Expect(patch.ApplyStatus(t.Context(), hubCP.Client, p, "owner-a")).To(Succeed())
	err := hubCP.Client.Get(t.Context(), client.ObjectKeyFromObject(p), &placementv1alpha1.Placement{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a status write does not create an object")
}

func TestSetFinalizer(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := newPlacement(t)
	key := client.ObjectKeyFromObject(p)

	// A finalizer someone else set survives ours coming and going.
	p.Finalizers = []string{"example.com/other"}
	g.Expect(hubCP.Client.Update(ctx, p)).To(Succeed())

	g.Expect(patch.SetFinalizer(ctx, hubCP.Client, p, "example.com/ours", true)).To(Succeed())
	got := &placementv1alpha1.Placement{}
	g.Expect(hubCP.Client.Get(ctx, key, got)).To(Succeed())
	g.Expect(got.Finalizers).To(ConsistOf("example.com/other", "example.com/ours"))

	g.Expect(patch.SetFinalizer(ctx, hubCP.Client, got, "example.com/ours", false)).To(Succeed())
	g.Expect(hubCP.Client.Get(ctx, key, got)).To(Succeed())
	g.Expect(got.Finalizers).To(ConsistOf("example.com/other"))
}
