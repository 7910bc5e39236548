// Package workgenerator rolls a Placement's revisions out: from the
// PlacementRevision the revision maker names in status.revision, the
// PlacementDecisions and the Works there are, it writes the Works of each
// selected cluster (one, or several parts when the objects do not fit in one)
// in that cluster's namespace on the hub, through the rollout gate of the
// Placement's strategy (internal/rollout), and removes the Works of the
// clusters the Placement left, make-before-break.
package workgenerator

import (
	"context"
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/division"
	"github.com/lodestar-dev/lodestar/internal/handlers"
	"github.com/lodestar-dev/lodestar/internal/interpretation"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/patch"
	"github.com/lodestar-dev/lodestar/internal/percluster"
	"github.com/lodestar-dev/lodestar/internal/phases"
	"github.com/lodestar-dev/lodestar/internal/requeue"
	"github.com/lodestar-dev/lodestar/internal/rollout"
	"github.com/lodestar-dev/lodestar/internal/scheduling"
	"github.com/lodestar-dev/lodestar/internal/unseen"
)

// Name is the work generator's field owner and event source.
const Name = "lodestar-workgenerator"

// Reconciler generates Works.
type Reconciler struct {
	Client client.Client
	// APIReader reads what the cache does not hold: Works without this
	// manager's label.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Workers is how many Placements are reconciled at once.
	Workers int
	// Scope is what this hub manager takes: the cluster sets it manages, and
	// whether it is the hub-wide manager (docs/scale.md).
	Scope lookup.Scope
	// Interpretations compiles the hub's ResourceInterpretations, shared with
	// the status aggregator.
	Interpretations *interpretation.Cache

	// expected are Work writes the cache may not show yet (by
	// expectationKey), so that the gate never counts a cluster twice.
	expected unseen.Writes[rollout.Expectation]
	// retainedWritten are the status.rollout.retainedClaims written that the
	// cache may not show yet (by the Placement's key and "/").
	retainedWritten unseen.Writes[[]placementv1alpha1.RetainedClaims]
	// sharesWritten are the shares annotations written that the cache may not
	// show yet (by expectationKey): a division reads what a cluster carries
	// from them, never from a stale cache.
	sharesWritten unseen.Writes[string]
	// active tells, per Placement, how Work status reports concern the
	// generator.
	active handlers.Interests
	// statusPace paces status writes that only move counts.
	statusPace handlers.StatusPace
	// compiled are the compiled overrides of each Placement's revisions.
	compiled percluster.Compiled
	// divisions are the replica divisions made, kept across reconciles.
	divisions division.Memo
	// failing are the clusters each Placement's overrides fail on, held those
	// where the stateful gate holds its copy.
	failing, held handlers.ClusterIndex
}

// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=placements,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=placements/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=placementrevisions,verbs=get;list;watch
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=resourceinterpretations,verbs=get;list;watch
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=placementdecisions,verbs=get;list;watch
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=works,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=clusterprofiles,verbs=get;list;watch
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=rolloutapprovals,verbs=get;list;watch
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=clustersetbindings,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=reserved,verbs=update

// Reconcile brings the Works of one Placement in line with its current revision
// and its PlacementDecisions, as far as its rollout strategy lets it: claim
// (finalizer, tenant mark), observe, gate, write Works, remove the clusters it
// left, report; one status write at the end.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	placement := &placementv1alpha1.Placement{}
	if err := r.Client.Get(ctx, req.NamespacedName, placement); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("placement", klog.KObj(placement)))
	s := &scope{placement: placement, now: time.Now(), failed: map[string]string{}, st: &status{}}
	defer func() {
		retErr = errors.Join(retErr, r.applyStatus(ctx, placement, s.st))
		if d := s.st.deferred; d > 0 && retErr == nil && requeue.Soonest(d, result.RequeueAfter) == d {
			// Only counts wait: behind the reconciles of changes.
			result.RequeueAfter, result.Priority = d, ptr.To(handler.LowPriority)
		}
	}()
	if !placement.DeletionTimestamp.IsZero() {
		r.forget(placement)
		return ctrl.Result{}, r.reconcileDelete(ctx, placement, s.st)
	}
	return phases.Run(ctx, s, r.claim, r.observe, r.gate, r.writeWorks, r.removeLeft, r.report)
}

// claim holds the Placement with the finalizer and marks its namespace a
// tenant's.
func (r *Reconciler) claim(ctx context.Context, s *scope) (ctrl.Result, error) {
	if err := patch.SetFinalizer(ctx, r.Client, s.placement, placementv1alpha1.PlacementFinalizer, true); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, lookup.MarkTenant(ctx, r.Client, s.placement.Namespace)
}

// reconcileDelete deletes every Work of the Placement and releases the Placement
// once they are gone, which is when each member has removed what it applied.
func (r *Reconciler) reconcileDelete(ctx context.Context, placement *placementv1alpha1.Placement, st *status) error {
	remaining, err := lookup.Works(ctx, r.Client, placement, client.UnsafeDisableDeepCopy)
	if err != nil {
		return err
	}
	for i := range remaining {
		if err := r.deleteWork(ctx, &remaining[i]); err != nil {
			return err
		}
		r.noteRetainedClaims(placement, &remaining[i])
	}
	if len(remaining) > 0 {
		st.set(metav1.ConditionFalse, placementv1alpha1.ReasonDeleting, "waiting for %s to be removed from their clusters", message.Count(len(remaining), "Work"))
		return nil // Work deletions trigger the next reconcile.
	}
	if err := lookup.UnmarkTenant(ctx, r.Client, placement.Namespace, placement); err != nil {
		return err
	}
	return patch.SetFinalizer(ctx, r.Client, placement, placementv1alpha1.PlacementFinalizer, false)
}

// forget drops what the generator remembers of a Placement being deleted.
func (r *Reconciler) forget(placement *placementv1alpha1.Placement) {
	key := client.ObjectKeyFromObject(placement)
	r.active.Forget(key)
	r.statusPace.Forget(key)
	r.compiled.Forget(key)
	r.failing.Set(key, nil)
	r.held.Set(key, nil)
	prefix := expectationKey(placement, "")
	r.retainedWritten.Forget(prefix)
	r.expected.Forget(prefix)
	r.sharesWritten.Forget(prefix)
}

// SetupWithManager registers the work generator.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	workPlacement := lookup.FromLabels(mgr.GetClient(), placementv1alpha1.PlacementNameLabel, placementv1alpha1.PlacementNamespaceLabel)
	r.statusPace.Every = statusEvery
	return ctrl.NewControllerManagedBy(mgr).
		Named("workgenerator").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		// A new spec, and a new revision (or a rendering that failed) of the
		// revision maker.
		For(&placementv1alpha1.Placement{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, handlers.Updates(lookup.RenderedChanged)))).
		Watches(&placementv1alpha1.PlacementRevision{}, handler.EnqueueRequestsFromMapFunc(lookup.FromLabels(mgr.GetClient(), placementv1alpha1.PlacementNameLabel, "")),
			builder.WithPredicates(predicate.Or[client.Object](handlers.Creations, predicate.AnnotationChangedPredicate{}))).
		Watches(&cpv1alpha1.PlacementDecision{}, handler.EnqueueRequestsFromMapFunc(lookup.FromLabels(mgr.GetClient(), cpv1alpha1.PlacementKeyLabel, ""))).
		// Edits and deletions of its Works concern the generator; their status
		// reports only while a rollout or a removal of their Placement is under way.
		Watches(&workv1alpha1.Work{}, handler.EnqueueRequestsFromMapFunc(workPlacement),
			builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&workv1alpha1.Work{}, handlers.Coalescing(r.active.Only(workPlacement, handlers.Gating), statusWindow)).
		Watches(&workv1alpha1.Work{}, handlers.Background(r.active.Only(workPlacement, handlers.Reporting), reportWindow)).
		Watches(&placementv1alpha1.RolloutApproval{}, handler.EnqueueRequestsFromMapFunc(lookup.ApprovedPlacement)).
		// A binding removed revokes its set's clusters, whoever writes the decisions.
		Watches(&placementv1alpha1.ClusterSetBinding{}, handler.EnqueueRequestsFromMapFunc(lookup.InNamespace(mgr.GetClient())),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A cluster's labels or properties may change what overrides make of it.
		Watches(&cpv1alpha1.ClusterProfile{}, handler.EnqueueRequestsFromMapFunc(r.placementsOverriding(workPlacement)), builder.WithPredicates(handlers.Updates(scheduling.ViewChanged))).
		// An interpretation changes how its kind is divided and what health
		// rule the Works carry: every Placement renders anew (few, rare).
		Watches(&placementv1alpha1.ResourceInterpretation{}, handler.EnqueueRequestsFromMapFunc(handlers.All(mgr.GetClient(), func() client.ObjectList { return &placementv1alpha1.PlacementList{} })),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A drain with --include-stateful lets held copies go.
		Watches(&cpv1alpha1.ClusterProfile{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request { return r.held.Requests(obj.GetName()) }), builder.WithPredicates(handlers.Updates(scheduling.TaintsChanged))).
		Complete(r.Scope.Only(mgr.GetClient(), r))
}

// statusWindow gathers the Work status reports of a Placement whose rollout or
// removal waits for them; reportWindow those that only move its status.
const (
	statusWindow = 250 * time.Millisecond
	reportWindow = time.Second
)
