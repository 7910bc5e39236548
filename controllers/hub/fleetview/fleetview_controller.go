// Package fleetview keeps, for each hub Deployment whose status the fleet's
// reflection writes, the ReplicaSets the tools read a rollout through (helm's
// wait, kubectl rollout history and undo): what internal/fleetview plans. On a
// hub whose own deployment controller writes the Deployment's status, the
// reflection is not Lodestar's, and neither are the ReplicaSets.
package fleetview

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/lodestar-dev/lodestar/internal/fleetview"
	"github.com/lodestar-dev/lodestar/internal/patch"
	"github.com/lodestar-dev/lodestar/internal/reflection"
)

// Name is the controller's field owner.
const Name = "lodestar-fleet-view"

// Reconciler keeps the ReplicaSets of reflected Deployments.
type Reconciler struct {
	Client client.Client
	// Reader lists the ReplicaSets it wrote from the API server: the hub
	// manager caches no ReplicaSet (a Placement that selects ReplicaSets
	// watches all of them, as unstructured objects).
	Reader client.Reader
}

// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=replicasets,verbs=get;list;create;patch;delete
// +kubebuilder:rbac:groups=apps,resources=replicasets/status,verbs=get;patch

// Reconcile writes one Deployment's ReplicaSets, or takes them away when its
// status is no longer the fleet's.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	u := deploymentObject()
	if err := r.Client.Get(ctx, req.NamespacedName, u); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err) // its ReplicaSets go with it (owner references)
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("deployment", klog.KObj(u)))
	owned := &appsv1.ReplicaSetList{}
	if err := r.Reader.List(ctx, owned, client.InNamespace(req.Namespace), client.MatchingLabels{fleetview.Label: req.Name}); err != nil {
		return ctrl.Result{}, err
	}
	// Only those the Deployment controls: one of another Deployment of the name,
	// deleted and made again, is the old one's.
	ours := slices.DeleteFunc(owned.Items, func(rs appsv1.ReplicaSet) bool { return !metav1.IsControlledBy(&rs, u) })
	if !reflected(u) {
		return ctrl.Result{}, r.delete(ctx, pointers(ours))
	}
	dep := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, dep); err != nil {
		return ctrl.Result{}, fmt.Errorf("reading Deployment %s: %w", req.NamespacedName, err)
	}
	plan := fleetview.For(dep, ours)
	for _, rs := range plan.Apply {
		if err := r.apply(ctx, rs); err != nil {
			return ctrl.Result{}, err
		}
	}
	for _, rs := range append(plan.Apply, pointers(ours)...) {
		st, ok := plan.Status[rs.Name]
		if !ok || sameStatus(rs, st) {
			continue
		}
		st.ObservedGeneration = rs.Generation
		out := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: rs.Name, Namespace: rs.Namespace}, Status: st}
		if err := patch.ApplyStatusWith(ctx, r.Client, out, Name, zeroCounts); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, r.delete(ctx, plan.Delete)
}

// apply writes a ReplicaSet's metadata and spec with server-side apply, and
// takes its generation from the answer.
func (r *Reconciler) apply(ctx context.Context, rs *appsv1.ReplicaSet) error {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rs)
	if err != nil {
		return err
	}
	delete(content, "status")
	u := &unstructured.Unstructured{Object: content}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "creationTimestamp")
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(Name), client.ForceOwnership); err != nil {
		return fmt.Errorf("writing ReplicaSet %s: %w", rs.Name, err)
	}
	rs.Generation = u.GetGeneration()
	return nil
}

// zeroCounts writes the counts a ReplicaSet's JSON leaves out at 0, so that
// an earlier template's ReplicaSet reads 0 rather than keeping its last counts.
func zeroCounts(status map[string]any) {
	for _, f := range []string{"replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas"} {
		if _, ok := status[f]; !ok {
			status[f] = int64(0)
		}
	}
}

// sameStatus tells whether a ReplicaSet read from the API server already shows
// st (a ReplicaSet about to be written has a generation of 0, and does not).
func sameStatus(rs *appsv1.ReplicaSet, st appsv1.ReplicaSetStatus) bool {
	st.ObservedGeneration = rs.Generation
	return rs.Generation > 0 && equality.Semantic.DeepEqual(rs.Status, st)
}

func (r *Reconciler) delete(ctx context.Context, sets []*appsv1.ReplicaSet) error {
	for _, rs := range sets {
		err := r.Client.Delete(ctx, rs, client.Preconditions{UID: &rs.UID})
		if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting ReplicaSet %s: %w", rs.Name, err)
		}
	}
	return nil
}

func pointers(sets []appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	out := make([]*appsv1.ReplicaSet, len(sets))
	for i := range sets {
		out[i] = &sets[i]
	}
	return out
}

// reflected tells whether the fleet's reflection writes the Deployment's
// status, and nothing else does.
func reflected(obj client.Object) bool {
	ours := false
	for _, mf := range obj.GetManagedFields() {
		if mf.Subresource != "status" {
			continue
		}
		if mf.Manager != reflection.FieldOwner {
			return false
		}
		ours = true
	}
	return ours
}

func deploymentObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	return u
}

// SetupWithManager registers the controller on the hub's Deployments (the
// cache's unstructured ones, which the Placements that select Deployments
// watch too) whose status reflection writes or wrote.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("fleetview").
		For(deploymentObject(), builder.WithPredicates(predicate.Funcs{
			CreateFunc:  func(e event.CreateEvent) bool { return reflected(e.Object) },
			UpdateFunc:  func(e event.UpdateEvent) bool { return reflected(e.ObjectOld) || reflected(e.ObjectNew) },
			DeleteFunc:  func(event.DeleteEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false },
		})).
		Complete(r)
}
