// Package fleetquota is the fleet quota controller: it counts what the
// Placements of a namespace with FleetQuotas use over the fleet (from their
// Works: after division and overrides), admits each Placement's newest
// revision when it fits every quota beside what the others use (the
// PlacementRevision's quota-admitted annotation, which the work generator
// waits for), writes the Placements' QuotaAdmitted condition and the
// FleetQuotas' status.
package fleetquota

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/handlers"
	"github.com/lodestar-dev/lodestar/internal/interpretation"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/percluster"
)

// Name is the controller's field owner and event source.
const Name = "lodestar-fleetquota"

// Reconciler enforces the FleetQuotas of a namespace.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Interpretations compile the hub's ResourceInterpretations (custom kinds'
	// replicas and requests), shared with the other hub controllers.
	Interpretations *interpretation.Cache
	// Scope is what this hub manager takes (docs/scale.md).
	Scope lookup.Scope

	compiled percluster.Compiled
}

// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=fleetquotas,verbs=get;list;watch
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=fleetquotas/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=clusterfleetquotas,verbs=get;list;watch
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=clusterfleetquotas/status,verbs=get;patch;update
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=placements,verbs=get;list;watch
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=placements/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=placementrevisions,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=works;placementdecisions;clusterprofiles,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile enforces the quotas that bound the request's namespace: its
// FleetQuotas and the ClusterFleetQuotas that select it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	bounds, err := r.bounds(ctx, req.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	placements := &placementv1alpha1.PlacementList{}
	if err := r.Client.List(ctx, placements, client.InNamespace(req.Namespace)); err != nil {
		return ctrl.Result{}, err
	}
	if len(bounds) == 0 {
		return ctrl.Result{}, r.forget(ctx, placements.Items)
	}
	byNamespace := map[string][]*placed{}
	if byNamespace[req.Namespace], err = r.observe(ctx, placements.Items); err != nil {
		return ctrl.Result{}, err
	}
	for _, b := range bounds {
		for _, ns := range b.namespaces {
			if _, ok := byNamespace[ns]; ok {
				continue
			}
			list := &placementv1alpha1.PlacementList{}
			if err := r.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
				return ctrl.Result{}, err
			}
			if byNamespace[ns], err = r.observe(ctx, list.Items); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	for _, d := range admit(req.Namespace, byNamespace, bounds) {
		if err := r.apply(ctx, d); err != nil {
			return ctrl.Result{}, err
		}
	}
	for _, b := range bounds {
		if err := r.applyBoundStatus(ctx, b, byNamespace); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// forget takes the QuotaAdmitted condition off the Placements of a namespace
// no quota bounds any more, and admits the newest revision of those that
// waited (its annotation is what brings the work generator back to them).
func (r *Reconciler) forget(ctx context.Context, placements []placementv1alpha1.Placement) error {
	for i := range placements {
		p := &placements[i]
		c := meta.FindStatusCondition(p.Status.Conditions, placementv1alpha1.QuotaAdmittedCondition)
		if c == nil {
			continue
		}
		if c.Status == metav1.ConditionFalse {
			revs, err := lookup.Revisions(ctx, r.Client, p)
			if err != nil {
				return err
			}
			if i := slices.IndexFunc(revs, func(rv placementv1alpha1.PlacementRevision) bool { return rv.Name == p.Status.Revision }); i >= 0 {
				if err := r.admitRevision(ctx, &revs[i], ""); err != nil {
					return err
				}
			}
		}
		if err := r.applyCondition(ctx, p, nil); err != nil {
			return err
		}
	}
	return nil
}

// apply writes one admission decision: the revision's annotation when it is
// admitted, the Placement's condition, and a Warning event when a refusal is
// new.
func (r *Reconciler) apply(ctx context.Context, d decision) error {
	if d.admit {
		if err := r.admitRevision(ctx, d.target, d.clusters); err != nil {
			return err
		}
	}
	c := d.condition()
	old := meta.FindStatusCondition(d.placement.Status.Conditions, placementv1alpha1.QuotaAdmittedCondition)
	if !d.admit && (old == nil || old.Message != c.Message) {
		r.Recorder.Eventf(d.placement, nil, corev1.EventTypeWarning, placementv1alpha1.ReasonQuotaExceeded, "Admit", "%s", c.Message)
	}
	if old != nil && old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message && old.ObservedGeneration == c.ObservedGeneration {
		return nil
	}
	return r.applyCondition(ctx, d.placement, &c)
}

// admitRevision marks a revision admitted for the clusters of a digest
// (quota.ClustersDigest; "" for any, in a namespace no quota bounds).
func (r *Reconciler) admitRevision(ctx context.Context, rev *placementv1alpha1.PlacementRevision, clusters string) error {
	if rev.Annotations[placementv1alpha1.QuotaAdmittedAnnotation] == "true" && rev.Annotations[placementv1alpha1.QuotaAdmittedClustersAnnotation] == clusters {
		return nil
	}
	body := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"true",%q:%q}}}`,
		placementv1alpha1.QuotaAdmittedAnnotation, placementv1alpha1.QuotaAdmittedClustersAnnotation, clusters)
	if err := r.Client.Patch(ctx, rev, client.RawPatch(types.MergePatchType, body)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("admitting PlacementRevision %s: %w", rev.Name, err)
	}
	return nil
}

// SetupWithManager registers the controller, keyed by namespace: a quota's
// change, a namespace's labels, and what changes a namespace's use (Works'
// content, decisions) or asks (new revisions) reconcile that namespace, and
// the others a ClusterFleetQuota bounds with it.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Interpretations == nil {
		r.Interpretations = &interpretation.Cache{}
	}
	c := mgr.GetClient()
	byNamespace := func(ctx context.Context, obj client.Object) []reconcile.Request {
		return r.bounded(ctx, obj.GetNamespace())
	}
	byWork := func(ctx context.Context, obj client.Object) []reconcile.Request {
		return r.bounded(ctx, obj.GetLabels()[placementv1alpha1.PlacementNamespaceLabel])
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("fleetquota").
		Watches(&placementv1alpha1.FleetQuota{}, handler.EnqueueRequestsFromMapFunc(namespaceOf), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&placementv1alpha1.ClusterFleetQuota{}, handler.Funcs{
			CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				add(q, r.selected(ctx, e.Object))
			},
			UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				if e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() {
					add(q, r.selected(ctx, e.ObjectOld, e.ObjectNew))
				}
			},
			DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				add(q, r.selected(ctx, e.Object))
			},
		}).
		// A namespace's labels may put it under a ClusterFleetQuota, or take
		// it out (then its conditions go).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetName()}}}
		}), builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Watches(&placementv1alpha1.Placement{}, handler.EnqueueRequestsFromMapFunc(byNamespace),
			builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, handlers.Updates(lookup.RenderedChanged)))).
		Watches(&placementv1alpha1.PlacementRevision{}, handler.EnqueueRequestsFromMapFunc(byNamespace), builder.WithPredicates(handlers.Creations)).
		Watches(&cpv1alpha1.PlacementDecision{}, handler.EnqueueRequestsFromMapFunc(byNamespace)).
		Watches(&workv1alpha1.Work{}, handler.EnqueueRequestsFromMapFunc(byWork), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r.Scope.Only(c, r))
}

func add(q workqueue.TypedRateLimitingInterface[reconcile.Request], reqs []reconcile.Request) {
	for _, req := range reqs {
		q.Add(req)
	}
}

// namespaceOf is the request of an object's namespace.
func namespaceOf(_ context.Context, obj client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace()}}}
}
