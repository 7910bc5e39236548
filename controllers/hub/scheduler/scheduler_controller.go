// Package scheduler chooses the member clusters of each Placement and publishes the
// choice as standard PlacementDecision objects beside it.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/handlers"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/requeue"
	"github.com/lodestar-dev/lodestar/internal/scheduling"
)

const (
	// Name is the scheduler's field owner and event source. The PlacementDecisions
	// it writes carry the Placement's spec.scheduling.schedulerName
	// (placementv1alpha1.DefaultSchedulerName), as the standard asks.
	Name = "lodestar-scheduler"

	// ClusterManagerName is the spec.clusterManager.name of the ClusterProfiles
	// Lodestar manages; others are not scheduled.
	ClusterManagerName = placementv1alpha1.ClusterManagerName

	// DefaultClusterSetNamespace holds the ClusterProfiles of the default cluster set.
	DefaultClusterSetNamespace = placementv1alpha1.DefaultClusterSet

	// clusterChangeWindow gathers ClusterProfile changes before rescheduling.
	clusterChangeWindow = 500 * time.Millisecond
)

// Reconciler schedules Placements.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Scope is what this hub manager takes: the cluster sets it manages, and
	// whether it is the hub-wide manager (docs/scale.md).
	Scope lookup.Scope

	// explained remembers when each Placement's scheduling explanation was last
	// written (client.ObjectKey to time.Time).
	explained sync.Map

	// profileChanges counts ClusterProfile events; snapshots of a cluster set are
	// reused by every Placement's reconcile until it changes.
	profileChanges atomic.Uint64
	snapshotsMu    sync.Mutex
	snapshots      map[string]snapshot
	// Workers is how many Placements are reconciled at once.
	Workers int

	limiterOnce sync.Once
	limiter     *rate.Limiter
}

// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=placements,verbs=get;list;watch
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=placements/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=placementdecisions,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=clusterprofiles,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=clustersetbindings,verbs=get;list;watch

// Reconcile writes the PlacementDecisions and the Scheduled condition of one Placement.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	placement := &placementv1alpha1.Placement{}
	if err := r.Client.Get(ctx, req.NamespacedName, placement); apierrors.IsNotFound(err) {
		// Decisions left of a Placement gone (on a hub without a garbage collector).
		return ctrl.Result{}, lookup.DeleteOrphans(ctx, r.Client, &cpv1alpha1.PlacementDecisionList{}, req.Namespace, req.Name, cpv1alpha1.PlacementKeyLabel)
	} else if err != nil {
		return ctrl.Result{}, err
	}
	log := ctrl.LoggerFrom(ctx).WithValues("placement", klog.KObj(placement))
	ctx = ctrl.LoggerInto(ctx, log)

	if !placement.DeletionTimestamp.IsZero() {
		r.explained.Delete(req.NamespacedName)
		return ctrl.Result{}, r.deleteSlices(ctx, placement, 0)
	}

	if name := placement.Spec.Scheduling.SchedulerName; name != "" && name != placementv1alpha1.DefaultSchedulerName {
		// Another scheduler writes the decisions; the rest of Lodestar consumes them.
		log.V(4).Info("Left to another scheduler", "schedulerName", name)
		return ctrl.Result{}, nil
	}

	st := &status{}
	defer func() {
		if err := r.applyStatus(ctx, placement, st); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()

	policy, err := r.policy(placement, st)
	if err != nil {
		return ctrl.Result{}, err
	}
	return r.schedule(ctx, placement, policy, st)
}

// policy is the Placement's scheduling policy; an invalid one is a False
// Scheduled condition, a Warning event and a terminal error.
func (r *Reconciler) policy(placement *placementv1alpha1.Placement, st *status) (scheduling.Policy, error) {
	policy, err := scheduling.PolicyOf(placement)
	if err != nil {
		reason := placementv1alpha1.ReasonInvalidClusterSelector
		var invalid *scheduling.InvalidPolicyError
		if errors.As(err, &invalid) {
			reason = invalid.Reason
		}
		st.set(metav1.ConditionFalse, reason, "%v", err)
		r.Recorder.Eventf(placement, nil, "Warning", reason, "Schedule", "%v", err)
		return policy, reconcile.TerminalError(err)
	}
	return policy, nil
}

// schedule chooses the Placement's clusters among those of its bound sets and
// writes its decisions.
func (r *Reconciler) schedule(ctx context.Context, placement *placementv1alpha1.Placement, policy scheduling.Policy, st *status) (ctrl.Result, error) {
	sets, err := lookup.ClusterSets(ctx, r.Client, placement.Namespace, r.Scope.Sets)
	if err != nil {
		return ctrl.Result{}, err
	}
	clusters, err := r.clusters(ctx, sets)
	if err != nil {
		return ctrl.Result{}, err
	}
	current, err := r.currentDecisions(ctx, placement, sets)
	if err != nil {
		return ctrl.Result{}, err
	}
	// Clusters that leave the decisions keep the Placement's objects until the
	// clusters added are Available: the work generator's rollout gate sees to it.
	now := time.Now()
	failover := r.failover(ctx, placement, clusters, current, &policy, now)
	res := scheduling.Schedule(clusters, current, policy, now)
	if err := r.writeDecisions(ctx, placement, res.Selected); err != nil {
		return ctrl.Result{}, err
	}
	st.result = res
	st.explained = scheduling.ExplainExcluded(clusters, current, policy, res, now, placementv1alpha1.MaxExplainedClusters)

	result := ctrl.Result{}
	if d := requeue.Soonest(res.RecheckAfter, failover.RecheckAfter); d > 0 {
		// A second late, so that what it waits for has passed.
		result.RequeueAfter = d + time.Second
	}
	r.scheduled(placement, st, sets, clusters, res, failover)
	return result, nil
}

// unknownNames are the names of spec.scheduling.clusterNames that no cluster of
// the bound cluster sets has.
func unknownNames(names []string, clusters []scheduling.Cluster) []string {
	known := map[string]bool{}
	for _, c := range clusters {
		known[c.Name] = true
	}
	var out []string
	for _, n := range names {
		if !known[n] {
			out = append(out, n)
		}
	}
	return out
}

// scheduled decides the Scheduled condition from what scheduling found, with a
// Warning event when it turns to a problem.
func (r *Reconciler) scheduled(placement *placementv1alpha1.Placement, st *status, sets []string, profiles []scheduling.Cluster, res scheduling.Result, failover scheduling.FailoverPlan) {
	clusters := len(profiles)
	unknown := unknownNames(placement.Spec.Scheduling.ClusterNames, profiles)
	switch {
	case len(sets) == 0:
		st.set(metav1.ConditionFalse, placementv1alpha1.ReasonNoClusterSetBinding, "namespace %s has no ClusterSetBinding to a cluster set of this hub; a platform admin binds one (docs/tenancy.md)", placement.Namespace)
		r.warnOnce(placement, placementv1alpha1.ReasonNoClusterSetBinding, st)
	case len(res.Selected) == 0 && placement.Spec.Scheduling.ClusterSelector == nil && placement.Spec.Scheduling.ClusterNames == nil:
		st.set(metav1.ConditionFalse, placementv1alpha1.ReasonNoMatchingClusters,
			"spec.scheduling has no clusterSelector and no clusterNames, so no cluster is chosen: clusterSelector: {} chooses every cluster of the bound cluster sets (%s)", strings.Join(sets, ", "))
		r.warnOnce(placement, placementv1alpha1.ReasonNoMatchingClusters, st)
	case len(unknown) > 0:
		// A typo, or a cluster of a set the namespace is not bound to: the
		// clusters named that exist are chosen, and the condition says which
		// names are not.
		st.set(metav1.ConditionFalse, placementv1alpha1.ReasonUnknownClusterNames,
			"%s chosen; spec.scheduling.clusterNames names %s that no cluster of cluster sets %s has",
			message.Count(len(res.Selected), "cluster"), message.List(unknown, 5, ", "), strings.Join(sets, ", "))
		r.warnOnce(placement, placementv1alpha1.ReasonUnknownClusterNames, st)
	case len(res.Selected) == 0:
		st.set(metav1.ConditionFalse, placementv1alpha1.ReasonNoMatchingClusters, "none of the %s in cluster sets %s can be chosen%s", message.Count(clusters, "cluster"), strings.Join(sets, ", "), summary(res))
		r.warnOnce(placement, placementv1alpha1.ReasonNoMatchingClusters, st)
	case res.Unsatisfied:
		st.set(metav1.ConditionFalse, placementv1alpha1.ReasonNotEnoughClusters, "%d of the %s asked for could be chosen%s", len(res.Selected), message.Count(*placement.Spec.Scheduling.NumberOfClusters, "cluster"), summary(res))
		r.warnOnce(placement, placementv1alpha1.ReasonNotEnoughClusters, st)
	case failover.Blocked != "":
		st.set(metav1.ConditionFalse, placementv1alpha1.ReasonFailoverBlocked, "%s chosen; %s", message.Count(len(res.Selected), "cluster"), failover.Blocked)
		r.warnOnce(placement, placementv1alpha1.ReasonFailoverBlocked, st)
	default:
		st.set(metav1.ConditionTrue, placementv1alpha1.ReasonScheduled, "%s chosen", message.Count(len(res.Selected), "cluster"))
	}
}

// failoverRate bounds failovers fleet-wide: a burst of failoverBurst, then
// failoverRate per second.
const (
	failoverRate  = 1
	failoverBurst = 10
)

// failover replaces the chosen clusters whose agent has been unreachable longer
// than the Placement's failover toleration: they are excluded from policy and
// from current. Failovers are rate-limited across the fleet; when the limit is
// reached, the clusters stay chosen for now and the plan says so.
func (r *Reconciler) failover(ctx context.Context, placement *placementv1alpha1.Placement, clusters []scheduling.Cluster, current map[string]bool, policy *scheduling.Policy, now time.Time) scheduling.FailoverPlan {
	plan := scheduling.Failover(clusters, current, *policy, now)
	if len(plan.Replace) == 0 {
		return plan
	}
	r.limiterOnce.Do(func() { r.limiter = rate.NewLimiter(failoverRate, failoverBurst) })
	if !r.limiter.AllowN(now, len(plan.Replace)) {
		plan.Blocked = fmt.Sprintf("failovers are rate-limited (%d per second across the fleet); %s waits", failoverRate, strings.Join(plan.Replace, ", "))
		plan.RecheckAfter = time.Second
		plan.Replace = nil
		return plan
	}
	policy.Exclude = map[string]bool{}
	for _, name := range plan.Replace {
		policy.Exclude[name] = true
		delete(current, name)
		ctrl.LoggerFrom(ctx).Info("Failing over an unreachable cluster", "cluster", name)
		r.Recorder.Eventf(placement, nil, corev1.EventTypeWarning, placementv1alpha1.ReasonFailedOver, "Schedule",
			"cluster %s has been unreachable for more than %s: replaced; its copy stays until the replacement is Available", name, *policy.FailoverAfter)
	}
	return plan
}

// warnOnce records a Warning event when the Scheduled condition changes to the
// reason, not at every reconcile.
func (r *Reconciler) warnOnce(placement *placementv1alpha1.Placement, reason string, st *status) {
	if c := meta.FindStatusCondition(placement.Status.Conditions, placementv1alpha1.ScheduledCondition); c != nil && c.Reason == reason {
		return
	}
	c, _ := st.scheduled.For(nil, placement.Generation)
	r.Recorder.Eventf(placement, nil, "Warning", reason, "Schedule", "%s", c.Message)
}

// summary says, for a condition message, why clusters were not chosen.
func summary(res scheduling.Result) string {
	if len(res.Excluded) == 0 {
		return ""
	}
	reasons := make([]string, 0, len(res.Excluded))
	for reason, names := range res.Excluded {
		if reason == placementv1alpha1.KeptWhileUnhealthy || reason == placementv1alpha1.KeptWhileExpressionFails {
			continue
		}
		reasons = append(reasons, fmt.Sprintf("%s: %d", reason, len(names)))
	}
	sort.Strings(reasons)
	return " (" + strings.Join(reasons, ", ") + ")"
}

// snapshot is what the scheduler read of one cluster set, and when.
type snapshot struct {
	changes  uint64
	clusters []scheduling.Cluster
}

// clusters returns the clusters Lodestar manages in the cluster sets. A set's
// clusters are read once per change of any ClusterProfile and shared, read-only,
// by the reconciles of every Placement.
func (r *Reconciler) clusters(ctx context.Context, sets []string) ([]scheduling.Cluster, error) {
	var out []scheduling.Cluster
	for _, ns := range sets {
		cs, err := r.clusterSet(ctx, ns)
		if err != nil {
			return nil, err
		}
		out = append(out, cs...)
	}
	return out, nil
}

func (r *Reconciler) clusterSet(ctx context.Context, ns string) ([]scheduling.Cluster, error) {
	changes := r.profileChanges.Load()
	r.snapshotsMu.Lock()
	snap, ok := r.snapshots[ns]
	r.snapshotsMu.Unlock()
	if ok && snap.changes == changes {
		return snap.clusters, nil
	}
	profiles := &cpv1alpha1.ClusterProfileList{}
	if err := r.Client.List(ctx, profiles, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing ClusterProfiles in %s: %w", ns, err)
	}
	clusters := make([]scheduling.Cluster, 0, len(profiles.Items))
	for i := range profiles.Items {
		p := &profiles.Items[i]
		if !lookup.Managed(p) || !p.DeletionTimestamp.IsZero() {
			continue
		}
		clusters = append(clusters, scheduling.ClusterOf(p))
	}
	r.snapshotsMu.Lock()
	if r.snapshots == nil {
		r.snapshots = map[string]snapshot{}
	}
	r.snapshots[ns] = snapshot{changes: changes, clusters: clusters}
	r.snapshotsMu.Unlock()
	return clusters, nil
}

// currentDecisions returns the clusters the Placement's decisions name now.
func (r *Reconciler) currentDecisions(ctx context.Context, placement *placementv1alpha1.Placement, sets []string) (map[string]bool, error) {
	decided, err := lookup.Decided(ctx, r.Client, placement, sets)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(decided.Clusters))
	for _, c := range decided.Clusters {
		out[c] = true
	}
	return out, nil
}

// writeDecisions writes one PlacementDecision slice per 100 selected clusters (one
// empty slice when none is selected) and removes slices that are no longer needed.
func (r *Reconciler) writeDecisions(ctx context.Context, placement *placementv1alpha1.Placement, selected []scheduling.Cluster) error {
	slices := scheduling.Slices(selected, scheduling.MaxDecisionsPerSlice)
	if len(slices) == 0 {
		slices = [][]scheduling.Cluster{nil}
	}
	key := names.LabelValue(placement.Name)
	revision := decisionRevision(selected)
	for i, slice := range slices {
		pd := &cpv1alpha1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{Name: names.DecisionSlice(placement.Name, i), Namespace: placement.Namespace}}
		_, err := controllerutil.CreateOrPatch(ctx, r.Client, pd, func() error {
			if err := controllerutil.SetControllerReference(placement, pd, r.Client.Scheme()); err != nil {
				return err
			}
			if pd.Labels == nil {
				pd.Labels = map[string]string{}
			}
			pd.Labels[cpv1alpha1.PlacementKeyLabel] = key
			pd.Labels[cpv1alpha1.DecisionKeyLabel] = key
			pd.Labels[cpv1alpha1.DecisionIndexLabel] = strconv.Itoa(i)
			pd.Labels[placementv1alpha1.PlacementNameLabel] = key
			if pd.Annotations == nil {
				pd.Annotations = map[string]string{}
			}
			pd.Annotations[placementv1alpha1.DecisionRevisionAnnotation] = revision
			pd.Annotations[placementv1alpha1.DecisionSlicesAnnotation] = strconv.Itoa(len(slices))
			pd.Annotations[placementv1alpha1.DecisionGenerationAnnotation] = strconv.FormatInt(placement.Generation, 10)
			pd.SchedulerName = placementv1alpha1.DefaultSchedulerName
			pd.Decisions = make([]cpv1alpha1.ClusterDecision, 0, len(slice))
			for _, c := range slice {
				pd.Decisions = append(pd.Decisions, cpv1alpha1.ClusterDecision{
					ClusterProfileRef: cpv1alpha1.ClusterProfileReference{Name: c.Name, Namespace: c.Namespace},
					Reason:            "matches spec.scheduling.clusterSelector",
				})
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("writing PlacementDecision %s: %w", pd.Name, err)
		}
	}
	return r.deleteSlices(ctx, placement, len(slices))
}

// decisionRevision names one scheduling result: a hash of the clusters chosen, the
// same on every slice written for it.
func decisionRevision(selected []scheduling.Cluster) string {
	h := fnv.New64a()
	for _, c := range selected {
		_, _ = fmt.Fprintf(h, "%s/%s\n", c.Namespace, c.Name)
	}
	return strconv.FormatUint(h.Sum64(), 36)
}

// deleteSlices deletes the Placement's PlacementDecision slices from index from on.
func (r *Reconciler) deleteSlices(ctx context.Context, placement *placementv1alpha1.Placement, from int) error {
	list, err := lookup.PlacementDecisions(ctx, r.Client, placement)
	if err != nil {
		return err
	}
	for i := range list.Items {
		pd := &list.Items[i]
		if !metav1.IsControlledBy(pd, placement) {
			continue
		}
		if idx, err := strconv.Atoi(pd.Labels[cpv1alpha1.DecisionIndexLabel]); err == nil && idx < from {
			continue
		}
		if err := r.Client.Delete(ctx, pd); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting PlacementDecision %s: %w", pd.Name, err)
		}
	}
	return nil
}

// SetupWithManager registers the scheduler: it runs on Placement spec changes, on
// changes of its PlacementDecisions and on any ClusterProfile change.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("scheduler").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		For(&placementv1alpha1.Placement{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&cpv1alpha1.PlacementDecision{}).
		// A ClusterProfile change may concern every Placement: changes arriving
		// together (registrations, heartbeats) lead to one rescheduling each.
		Watches(&cpv1alpha1.ClusterProfile{}, handlers.Coalescing(r.allPlacements, clusterChangeWindow)).
		Watches(&placementv1alpha1.ClusterSetBinding{}, handler.EnqueueRequestsFromMapFunc(lookup.InNamespace(mgr.GetClient())),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r.Scope.Only(mgr.GetClient(), r))
}

// allPlacements maps a ClusterProfile change to the Placements it may concern:
// every one, except those that name their clusters and not this one (their
// decisions cannot change). It also retires the snapshots of cluster sets.
func (r *Reconciler) allPlacements(ctx context.Context, profile client.Object) []reconcile.Request {
	r.profileChanges.Add(1)
	list := &placementv1alpha1.PlacementList{}
	if err := r.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing Placements for a ClusterProfile change")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		p := &list.Items[i]
		if len(p.Spec.Scheduling.ClusterNames) > 0 && !slices.Contains(p.Spec.Scheduling.ClusterNames, profile.GetName()) {
			continue
		}
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(p)})
	}
	return reqs
}
