package main

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
)

// The simulated member behaves as the agent expects of an API server: applies
// create and update with preconditions, Deployments report available, status and
// object writes keep to their part, and finalizers hold deletions.
func TestMemMember(t *testing.T) {
	ctx := context.Background()
	s, err := newSimulatorScheme()
	if err != nil {
		t.Fatal(err)
	}
	m := newMemMember(s.scheme, s.mapper)

	deployment := func(replicas int64) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "web", "namespace": "app", "labels": map[string]any{"a": "1"}},
			"spec":     map[string]any{"replicas": replicas},
		}}
		return u
	}
	apply := func(u *unstructured.Unstructured, opts ...client.ApplyOption) error {
		return m.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), append(opts, client.FieldOwner("agent"), client.ForceOwnership)...)
	}

	first := deployment(2)
	if err := apply(first); err != nil {
		t.Fatal(err)
	}
	if first.GetUID() == "" || first.GetGeneration() != 1 || first.GetManagedFields()[0].Manager != "agent" {
		t.Fatalf("created object lacks identity or manager: %v", first.Object["metadata"])
	}
	d := &appsv1.Deployment{}
	if err := m.Get(ctx, client.ObjectKey{Namespace: "app", Name: "web"}, d); err != nil {
		t.Fatal(err)
	}
	if d.Status.AvailableReplicas != 2 || d.Status.ObservedGeneration != 1 {
		t.Fatalf("Deployment status = %+v, want 2 available at generation 1", d.Status)
	}

	dry := deployment(3)
	if err := apply(dry, client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	if err := m.Get(ctx, client.ObjectKey{Namespace: "app", Name: "web"}, d); err != nil || *d.Spec.Replicas != 2 {
		t.Fatalf("a dry run changed the object: %v, replicas %d", err, *d.Spec.Replicas)
	}

	same := deployment(2)
	if err := apply(same); err != nil {
		t.Fatal(err)
	}
	if same.GetResourceVersion() != first.GetResourceVersion() {
		t.Fatalf("an apply that changes nothing wrote: resourceVersion %s after %s", same.GetResourceVersion(), first.GetResourceVersion())
	}
	again := deployment(2)
	again.SetLabels(map[string]string{"b": "2"})
	if err := apply(again); err != nil {
		t.Fatal(err)
	}
	if again.GetGeneration() != 1 || again.GetResourceVersion() == first.GetResourceVersion() || again.GetLabels()["a"] != "1" {
		t.Fatalf("an apply that changes a label: generation %d, resourceVersion %s after %s, labels %v", again.GetGeneration(), again.GetResourceVersion(), first.GetResourceVersion(), again.GetLabels())
	}
	stale := deployment(3)
	stale.SetResourceVersion(first.GetResourceVersion())
	stale.SetUID(first.GetUID())
	if err := apply(stale); !apierrors.IsConflict(err) {
		t.Fatalf("apply at a stale resourceVersion: %v, want a conflict", err)
	}
	fresh := deployment(3)
	fresh.SetResourceVersion(again.GetResourceVersion())
	fresh.SetUID(first.GetUID())
	if err := apply(fresh); err != nil {
		t.Fatal(err)
	}
	if fresh.GetGeneration() != 2 || fresh.GetLabels()["a"] != "1" {
		t.Fatalf("updated object: generation %d, labels %v", fresh.GetGeneration(), fresh.GetLabels())
	}
	gone := deployment(3)
	gone.SetUID(types.UID("another"))
	if err := apply(gone); !apierrors.IsConflict(err) {
		t.Fatalf("apply with another UID: %v, want a conflict", err)
	}

	aw := &lodestarworkv1alpha1.AppliedWork{ObjectMeta: metav1.ObjectMeta{Name: "w", Finalizers: []string{"f"}}}
	if err := m.Create(ctx, aw); err != nil {
		t.Fatal(err)
	}
	if err := m.Create(ctx, aw.DeepCopy()); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: %v, want AlreadyExists", err)
	}
	base := aw.DeepCopy()
	aw.Status.AppliedResources = []lodestarworkv1alpha1.AppliedResource{{Name: "web"}}
	aw.Spec.WorkName = "ignored by a status write"
	if err := m.Status().Patch(ctx, aw, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		t.Fatal(err)
	}
	if err := m.Get(ctx, client.ObjectKey{Name: "w"}, aw); err != nil || len(aw.Status.AppliedResources) != 1 || aw.Spec.WorkName != "" {
		t.Fatalf("after a status patch: %v, %+v", err, aw)
	}
	if err := m.Status().Patch(ctx, aw, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); !apierrors.IsConflict(err) {
		t.Fatalf("patch from a stale base: %v, want a conflict", err)
	}

	if err := m.Delete(ctx, aw); err != nil {
		t.Fatal(err)
	}
	if err := m.Get(ctx, client.ObjectKey{Name: "w"}, aw); err != nil || aw.DeletionTimestamp == nil {
		t.Fatalf("a finalizer should hold the deletion: %v, %v", err, aw.DeletionTimestamp)
	}
	base = aw.DeepCopy()
	aw.Finalizers = nil
	if err := m.Patch(ctx, aw, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	if err := m.Get(ctx, client.ObjectKey{Name: "w"}, aw); !apierrors.IsNotFound(err) {
		t.Fatalf("after its last finalizer went: %v, want NotFound", err)
	}

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}
	if err := m.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	list := &appsv1.DeploymentList{}
	if err := m.List(ctx, list, client.InNamespace("app"), client.MatchingLabels{"a": "1"}); err != nil || len(list.Items) != 1 {
		t.Fatalf("List = %d items, %v; want the Deployment", len(list.Items), err)
	}
	if err := m.List(ctx, list, client.MatchingLabels{"a": "2"}); err != nil || len(list.Items) != 0 {
		t.Fatalf("List by another label = %d items, %v; want none", len(list.Items), err)
	}
}
