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
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=placements,verbs=get;list;watch
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=placements/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=placementrevisions,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=works;placementdecisions;clusterprofiles,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile enforces every FleetQuota of the request's namespace at once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	quotas := &placementv1alpha1.FleetQuotaList{}
	if err := r.Client.List(ctx, quotas, client.InNamespace(req.Namespace)); err != nil {
		return ctrl.Result{}, err
	}
	placements := &placementv1alpha1.PlacementList{}
	if err := r.Client.List(ctx, placements, client.InNamespace(req.Namespace)); err != nil {
		return ctrl.Result{}, err
	}
	if len(quotas.Items) == 0 {
		return ctrl.Result{}, r.forget(ctx, placements.Items)
	}
	ns, err := r.observe(ctx, placements.Items)
	if err != nil {
		return ctrl.Result{}, err
	}
	decisions := admit(ns, quotas.Items)
	for _, d := range decisions {
		if err := r.apply(ctx, d); err != nil {
			return ctrl.Result{}, err
		}
	}
	for i := range quotas.Items {
		if err := r.applyQuotaStatus(ctx, &quotas.Items[i], ns); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// forget takes the QuotaAdmitted condition off the Placements of a namespace
// whose last FleetQuota went.
func (r *Reconciler) forget(ctx context.Context, placements []placementv1alpha1.Placement) error {
	for i := range placements {
		if meta.FindStatusCondition(placements[i].Status.Conditions, placementv1alpha1.QuotaAdmittedCondition) == nil {
			continue
		}
		if err := r.applyCondition(ctx, &placements[i], nil); err != nil {
			return err
		}
	}
	return nil
}

// apply writes one admission decision: the revision's annotation when it is
// admitted, the Placement's condition, and a Warning event when a refusal is
// new.
func (r *Reconciler) apply(ctx context.Context, d decision) error {
	if d.admit && d.target.Annotations[placementv1alpha1.QuotaAdmittedAnnotation] != "true" {
		body := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"true"}}}`, placementv1alpha1.QuotaAdmittedAnnotation)
		if err := r.Client.Patch(ctx, d.target, client.RawPatch(types.MergePatchType, body)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("admitting PlacementRevision %s: %w", d.target.Name, err)
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

// SetupWithManager registers the controller: a FleetQuota's change, and
// what changes its namespace's use (Works' content, decisions) or asks
// (new revisions), reconcile the namespace's quotas.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Interpretations == nil {
		r.Interpretations = &interpretation.Cache{}
	}
	c := mgr.GetClient()
	byNamespace := func(ctx context.Context, obj client.Object) []reconcile.Request {
		return quotasIn(ctx, c, obj.GetNamespace())
	}
	byWork := func(ctx context.Context, obj client.Object) []reconcile.Request {
		return quotasIn(ctx, c, obj.GetLabels()[placementv1alpha1.PlacementNamespaceLabel])
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("fleetquota").
		For(&placementv1alpha1.FleetQuota{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&placementv1alpha1.Placement{}, handler.EnqueueRequestsFromMapFunc(byNamespace),
			builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, handlers.Updates(lookup.RenderedChanged)))).
		Watches(&placementv1alpha1.PlacementRevision{}, handler.EnqueueRequestsFromMapFunc(byNamespace), builder.WithPredicates(handlers.Creations)).
		Watches(&cpv1alpha1.PlacementDecision{}, handler.EnqueueRequestsFromMapFunc(byNamespace)).
		Watches(&workv1alpha1.Work{}, handler.EnqueueRequestsFromMapFunc(byWork), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r.Scope.Only(c, r))
}

// quotasIn are requests for the FleetQuotas of namespace.
func quotasIn(ctx context.Context, c client.Reader, namespace string) []reconcile.Request {
	if namespace == "" {
		return nil
	}
	list := &placementv1alpha1.FleetQuotaList{}
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing FleetQuotas", "namespace", namespace)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	// One request per namespace: each reconcile enforces all its quotas.
	slices.SortFunc(reqs, func(a, b reconcile.Request) int { return strings.Compare(a.Name, b.Name) })
	return reqs[:min(len(reqs), 1)]
}
