// Package placementstatus folds the status the agents report on Works into the status of
// their Placement: per cluster, counted, and as the Applied condition.
package placementstatus

import (
	"context"
	"k8s.io/client-go/tools/events"
	"maps"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/handlers"
	"github.com/lodestar-dev/lodestar/internal/interpretation"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/metrics"
	"github.com/lodestar-dev/lodestar/internal/requeue"
)

// Name is the status aggregator's field owner.
const Name = "lodestar-status"

// coalesceWindow is how long Work status events for a large Placement are
// gathered before its status is computed (a smaller one's window is
// coalesceWindowFor its clusters); statusEvery is the least time between two
// writes of it that move no condition (counts, per-cluster states, summaries).
const (
	coalesceWindow = 100 * time.Millisecond
	statusEvery    = 500 * time.Millisecond
)

// coalesceWindowFor is how long the Work status events of a Placement of n
// clusters are gathered: a millisecond per cluster, from 5 ms (two clusters'
// reports are not held 100 ms) to coalesceWindow (from 100 clusters on);
// coalesceWindow while n is not known yet. A shorter window for 100 clusters
// (250 µs each) made bench P1 slower: the status computed four times as often
// while the Works were still being written took CPU the writes needed.
func coalesceWindowFor(n int, known bool) time.Duration {
	if !known {
		return coalesceWindow
	}
	return min(max(time.Duration(n)*time.Millisecond, 5*time.Millisecond), coalesceWindow)
}

// Reconciler aggregates Work status into Placement status.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Workers is how many Placements are reconciled at once.
	Workers int
	// Scope is what this hub manager takes: the cluster sets it manages, and
	// whether it is the hub-wide manager (docs/scale.md).
	Scope lookup.Scope
	// Interpretations compiles the hub's ResourceInterpretations (their
	// aggregate expressions), shared with the work generator.
	Interpretations *interpretation.Cache

	views views
	// changes times Placement changes for the lodestar_placement_change_* histograms.
	changes metrics.ChangeTimer
	// pace spaces the writes that move no condition.
	pace handlers.StatusPace
	// compute spaces the computations of a large Placement's status.
	compute computePace
	// sizes are the clusters each Placement was decided for, at its last
	// reconcile: its reports' coalescing window.
	sizes sync.Map
	// reflectRetry spaces the retries of a reflection that failed (the
	// manager may not write a kind's status until a platform admin grants
	// it): nothing else may come to look again.
	reflectRetry reflectRetries
}

// window is the coalescing window of req's Work status reports.
func (r *Reconciler) window(req reconcile.Request) time.Duration {
	n, ok := r.sizes.Load(req.NamespacedName)
	if !ok {
		return coalesceWindowFor(0, false)
	}
	return coalesceWindowFor(n.(int), true)
}

// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=placements,verbs=get;list;watch
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=placements/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=placementdecisions,verbs=get;list;watch
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=works,verbs=get;list;watch
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=resourceinterpretations,verbs=get;list;watch

// Reconcile writes the Applied condition, appliedClusters and clusters of one Placement.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	placement := &placementv1alpha1.Placement{}
	if err := r.Client.Get(ctx, req.NamespacedName, placement); err != nil {
		if apierrors.IsNotFound(err) {
			r.views.forget(req.NamespacedName)
			r.changes.Forget(req.NamespacedName)
			r.pace.Forget(req.NamespacedName)
			r.compute.forget(req.NamespacedName)
			r.sizes.Delete(req.NamespacedName)
			r.reflectRetry.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("placement", klog.KObj(placement)))
	if deleting, err := r.holdReflected(ctx, placement); deleting || err != nil {
		return ctrl.Result{}, err
	}
	if wait := r.compute.wait(req.NamespacedName, placement.Generation, ptr.Deref(placement.Status.SelectedClusters, 0), time.Now()); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}

	decided, err := lookup.DecidedIn(ctx, r.Client, placement, r.Scope.Sets)
	if err != nil {
		return ctrl.Result{}, err
	}
	clusters := decided.Clusters
	r.sizes.Store(req.NamespacedName, len(clusters))
	works, err := lookup.Works(ctx, r.Client, placement, client.UnsafeDisableDeepCopy)
	if err != nil {
		return ctrl.Result{}, err
	}
	agg := Aggregate(clusters, works, placement.Spec.ApplyStrategy != nil && placement.Spec.ApplyStrategy.WhenDrifted == lodestarworkv1alpha1.DriftReport,
		RenderFailures(placement))
	vs := byCluster(r.views.refresh(req.NamespacedName, works))
	agg.describe(vs)
	agg.quotaHeld(placement.Status.Conditions)
	if agg.Summaries, err = r.summaries(ctx, placement, clusters, vs); err != nil {
		return ctrl.Result{}, err
	}
	if name := placement.Spec.Scheduling.SchedulerName; name != "" && name != placementv1alpha1.DefaultSchedulerName {
		agg.Selected = ptr.To(int32(len(clusters))) //nolint:gosec // bounded by the number of ClusterProfiles
	}
	if placement.Spec.Reporting.Reflection == placementv1alpha1.ReflectionAggregate {
		agg.ReflectCondition = r.reflect(ctx, placement, clusters, vs)
	}
	r.changes.Observe(req.NamespacedName, placement.Generation,
		agg.Condition.Status == metav1.ConditionTrue, agg.AvailableCondition.Status == metav1.ConditionTrue, time.Now())
	wait, err := r.applyStatus(ctx, placement, agg)
	return ctrl.Result{RequeueAfter: requeue.Soonest(wait, r.reflectRetry.after(req.NamespacedName, agg.ReflectCondition))}, err
}

// SetupWithManager registers the status aggregator: it runs when a Placement is
// created or changed, and when its Works or PlacementDecisions change.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.pace.Every = statusEvery
	return ctrl.NewControllerManagedBy(mgr).
		Named("status").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		// A new spec; and clusters whose overrides fail, or stop failing.
		For(&placementv1alpha1.Placement{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{},
			handlers.Updates(func(old, now *placementv1alpha1.Placement) bool {
				return !maps.Equal(RenderFailures(old), RenderFailures(now)) || quotaHolds(old.Status.Conditions) != quotaHolds(now.Status.Conditions)
			})))).
		Watches(&cpv1alpha1.PlacementDecision{}, handler.EnqueueRequestsFromMapFunc(lookup.FromLabels(mgr.GetClient(), cpv1alpha1.PlacementKeyLabel, ""))).
		// Work status reports arrive in bursts (one per cluster); they are folded
		// into one status write per Placement per coalescing window.
		Watches(&workv1alpha1.Work{}, handlers.CoalescingBy(lookup.FromLabels(mgr.GetClient(), placementv1alpha1.PlacementNameLabel, placementv1alpha1.PlacementNamespaceLabel), r.window)).
		Complete(r.Scope.Only(mgr.GetClient(), r))
}
