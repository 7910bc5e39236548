// Package clustersetbinding writes the status of ClusterSetBindings: whether the
// bound cluster set is one the hub manages, and how many clusters it has.
package clustersetbinding

import (
	"context"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/conditions"
	"github.com/lodestar-dev/lodestar/internal/handlers"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/patch"
)

// Name is the controller's field owner.
const Name = "lodestar-clustersetbinding"

// profileWindow gathers the ClusterProfile changes of a set (a wave of joins)
// before the set's bindings are counted again.
const profileWindow = time.Second

// Reconciler writes ClusterSetBinding status.
type Reconciler struct {
	Client client.Client
	// Scope is what this hub manager takes: the cluster sets it manages, and
	// whether it is the hub-wide manager (docs/scale.md).
	Scope lookup.Scope
}

// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=clustersetbindings,verbs=get;list;watch
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=clustersetbindings/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=clusterprofiles,verbs=get;list;watch
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=placements,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;patch

// Reconcile writes one binding's Bound condition and cluster count.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	binding := &placementv1alpha1.ClusterSetBinding{}
	if err := r.Client.Get(ctx, req.NamespacedName, binding); err != nil {
		if apierrors.IsNotFound(err) {
			// Gone: the namespace may no longer be a tenant's.
			return ctrl.Result{}, lookup.UnmarkTenant(ctx, r.Client, req.Namespace, nil)
		}
		return ctrl.Result{}, err
	}
	// The namespace is a tenant's before the binding reports Bound: pods of
	// workloads applied after that are refused on the hub from the start.
	if err := lookup.MarkTenant(ctx, r.Client, binding.Namespace); err != nil {
		return ctrl.Result{}, err
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("clusterSetBinding", klog.KObj(binding)))

	bound := metav1.Condition{Type: placementv1alpha1.BoundCondition, ObservedGeneration: binding.Generation}
	clusters, err := r.bound(ctx, binding, &bound)
	if err != nil {
		return ctrl.Result{}, err
	}
	if conditions.Same(binding.Status.Conditions, bound) && ptr.Equal(binding.Status.Clusters, &clusters) && binding.Status.ObservedGeneration == binding.Generation {
		return ctrl.Result{}, nil
	}
	out := &placementv1alpha1.ClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Name: binding.Name, Namespace: binding.Namespace}}
	out.Status = placementv1alpha1.ClusterSetBindingStatus{
		Conditions:         []metav1.Condition{conditions.Merge(binding.Status.Conditions, bound)},
		ObservedGeneration: binding.Generation,
		Clusters:           ptr.To(clusters),
	}
	return ctrl.Result{}, patch.ApplyStatus(ctx, r.Client, out, Name)
}

// bound sets the Bound condition of binding and returns the number of clusters
// its Placements may use.
func (r *Reconciler) bound(ctx context.Context, binding *placementv1alpha1.ClusterSetBinding, bound *metav1.Condition) (int32, error) {
	set := binding.Spec.ClusterSet
	if !slices.Contains(r.Scope.Sets, set) {
		bound.Status, bound.Reason = metav1.ConditionFalse, placementv1alpha1.ReasonClusterSetNotFound
		bound.Message = "this hub manages no cluster set " + set
		return 0, nil
	}
	deciding, err := r.Scope.DecidingSet(ctx, r.Client, binding.Namespace)
	if err != nil {
		return 0, err
	}
	if deciding != "" && !slices.Contains(r.Scope.Sets, deciding) {
		bound.Status, bound.Reason = metav1.ConditionFalse, placementv1alpha1.ReasonClusterSetOfOtherManager
		bound.Message = "the Placements of this namespace are placed by the hub manager of cluster set " + deciding +
			", bound here too, on its own sets only: bind the sets of one hub manager per namespace (docs/scale.md)"
		return 0, nil
	}
	n, err := r.count(ctx, set)
	if err != nil {
		return 0, err
	}
	bound.Status, bound.Reason = metav1.ConditionTrue, placementv1alpha1.ReasonClusterSetBound
	bound.Message = "the Placements of this namespace may use the clusters of cluster set " + set
	return n, nil
}

// count is the number of ClusterProfiles Lodestar manages in set.
func (r *Reconciler) count(ctx context.Context, set string) (int32, error) {
	list := &cpv1alpha1.ClusterProfileList{}
	if err := r.Client.List(ctx, list, client.InNamespace(set), client.UnsafeDisableDeepCopy); err != nil {
		return 0, err
	}
	var n int32
	for i := range list.Items {
		if lookup.Managed(&list.Items[i]) && list.Items[i].DeletionTimestamp.IsZero() {
			n++
		}
	}
	return n, nil
}

// SetupWithManager registers the controller: bindings, and the ClusterProfiles
// of their sets coming and going.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("clustersetbinding").
		For(&placementv1alpha1.ClusterSetBinding{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A binding coming or going may hand the namespace to another manager.
		Watches(&placementv1alpha1.ClusterSetBinding{}, handler.EnqueueRequestsFromMapFunc(r.sameNamespace), builder.WithPredicates(deletionStarted)).
		Watches(&cpv1alpha1.ClusterProfile{}, handlers.Coalescing(r.bindingsOf, profileWindow),
			builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, deletionStarted))).
		Complete(lookup.OnlySets(r.Scope, mgr.GetClient(), r, func() *placementv1alpha1.ClusterSetBinding { return &placementv1alpha1.ClusterSetBinding{} },
			func(o *placementv1alpha1.ClusterSetBinding) string { return o.Spec.ClusterSet }))
}

// deletionStarted lets through the update that marks an object deleted.
var deletionStarted = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	return e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
}}

// sameNamespace maps a binding to the other bindings of its namespace.
func (r *Reconciler) sameNamespace(ctx context.Context, binding client.Object) []reconcile.Request {
	list := &placementv1alpha1.ClusterSetBindingList{}
	if err := r.Client.List(ctx, list, client.InNamespace(binding.GetNamespace()), client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the ClusterSetBindings of a namespace", "namespace", binding.GetNamespace())
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if b := &list.Items[i]; b.Name != binding.GetName() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(b)})
		}
	}
	return reqs
}

// bindingsOf maps a ClusterProfile to the bindings of its cluster set.
func (r *Reconciler) bindingsOf(ctx context.Context, profile client.Object) []reconcile.Request {
	list := &placementv1alpha1.ClusterSetBindingList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{lookup.BindingsBySet: profile.GetNamespace()}, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing ClusterSetBindings for a ClusterProfile change", "clusterProfile", klog.KObj(profile))
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}
