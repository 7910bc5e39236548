package interpretation

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/conditions"
	"github.com/lodestar-dev/lodestar/internal/handlers"
	"github.com/lodestar-dev/lodestar/internal/interpretation"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/patch"
	"github.com/lodestar-dev/lodestar/internal/render"
)

// PlacementReconciler writes the Interpreted condition of Placements.
type PlacementReconciler struct {
	Client client.Client
	// Interpretations compiles them, shared with the other hub controllers.
	Interpretations *interpretation.Cache
	// Workers is how many Placements are reconciled at once.
	Workers int
	// Scope is what this hub manager takes (docs/scale.md).
	Scope lookup.Scope
}

// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=placements,verbs=get;list;watch
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=placements/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=placementrevisions,verbs=get;list;watch

// Reconcile writes one Placement's Interpreted condition when it changes: set
// while its current revision holds an interpreted kind, removed when not.
func (r *PlacementReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	placement := &placementv1alpha1.Placement{}
	if err := r.Client.Get(ctx, req.NamespacedName, placement); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !placement.DeletionTimestamp.IsZero() || placement.Status.Revision == "" {
		return ctrl.Result{}, nil
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("placement", klog.KObj(placement)))
	kinds, found, err := r.placedKinds(ctx, placement)
	if err != nil || !found {
		return ctrl.Result{}, err // a revision not in the cache yet: its creation enqueues the Placement
	}
	set, err := lookup.Interpretations(ctx, r.Client, r.Interpretations)
	if err != nil {
		return ctrl.Result{}, err
	}
	cond, used := interpretedCondition(set, kinds, placement.Generation)
	existing := meta.FindStatusCondition(placement.Status.Conditions, placementv1alpha1.InterpretedCondition)
	out := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: placement.Name, Namespace: placement.Namespace}}
	switch {
	case !used && existing == nil:
		return ctrl.Result{}, nil
	case !used:
		out.Status.Conditions = []metav1.Condition{} // gives up the condition: server-side apply removes it
	case conditions.Same(placement.Status.Conditions, cond):
		return ctrl.Result{}, nil
	default:
		out.Status.Conditions = []metav1.Condition{conditions.Merge(placement.Status.Conditions, cond)}
	}
	return ctrl.Result{}, patch.ApplyStatus(ctx, r.Client, out, Name)
}

// placedKinds are the kinds of the Placement's current revision, and whether
// the cache has it.
func (r *PlacementReconciler) placedKinds(ctx context.Context, placement *placementv1alpha1.Placement) ([]schema.GroupKind, bool, error) {
	rev := &placementv1alpha1.PlacementRevision{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: placement.Namespace, Name: placement.Status.Revision}, rev); err != nil {
		return nil, false, client.IgnoreNotFound(err)
	}
	manifests, err := render.RevisionManifests(&rev.Spec)
	if err != nil {
		return nil, false, fmt.Errorf("reading revision %s: %w", rev.Name, err)
	}
	return render.Kinds(manifests), true, nil
}

// interpretedCondition is the Interpreted condition of a Placement placing
// kinds, and whether it places an interpreted kind at all.
func interpretedCondition(set *interpretation.Set, kinds []schema.GroupKind, generation int64) (metav1.Condition, bool) {
	var valid, invalid []string
	for _, gk := range kinds {
		in := set.For(gk)
		if in == nil {
			continue
		}
		if in.Err != nil {
			invalid = append(invalid, fmt.Sprintf("%s (%s): %s", in.Name, gk.String(), expressionErrors(in.Err)))
			continue
		}
		valid = append(valid, fmt.Sprintf("%s by %s", gk.String(), in.Name))
	}
	c := metav1.Condition{Type: placementv1alpha1.InterpretedCondition, ObservedGeneration: generation}
	if len(invalid) > 0 {
		c.Status, c.Reason = metav1.ConditionFalse, placementv1alpha1.ReasonInvalidInterpretation
		c.Message = message.Truncate(fmt.Sprintf("the objects of %s fail (the other kinds go on): ResourceInterpretation %s",
			message.Count(len(invalid), "interpreted kind"), message.List(invalid, 3, "; ")), 4096)
		return c, true
	}
	c.Status, c.Reason = metav1.ConditionTrue, placementv1alpha1.ReasonInterpreted
	c.Message = message.Truncate("read as interpreted: "+message.List(valid, 5, ", "), 4096)
	return c, len(valid) > 0
}

// SetupWithManager registers the controller: a Placement when its revision
// changes or is created, and every Placement when an interpretation changes.
func (r *PlacementReconciler) SetupWithManager(mgr ctrl.Manager) error {
	all := handlers.All(mgr.GetClient(), func() client.ObjectList { return &placementv1alpha1.PlacementList{} })
	revisionChanged := predicate.NewPredicateFuncs(func(client.Object) bool { return true })
	revisionChanged.UpdateFunc = func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*placementv1alpha1.Placement)
		cur, okNew := e.ObjectNew.(*placementv1alpha1.Placement)
		return !okOld || !okNew || old.Status.Revision != cur.Status.Revision || old.Generation != cur.Generation
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("interpreted").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		For(&placementv1alpha1.Placement{}, builder.WithPredicates(revisionChanged)).
		Watches(&placementv1alpha1.ResourceInterpretation{}, handler.EnqueueRequestsFromMapFunc(all), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&placementv1alpha1.PlacementRevision{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			rev, ok := o.(*placementv1alpha1.PlacementRevision)
			if !ok {
				return nil
			}
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: rev.Namespace, Name: rev.Spec.Placement}}}
		}), builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(event.UpdateEvent) bool { return false }, DeleteFunc: func(event.DeleteEvent) bool { return false },
		})).
		Complete(r.Scope.Only(mgr.GetClient(), r))
}
