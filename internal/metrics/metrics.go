// Package metrics defines every lodestar_* Prometheus metric, for the hub
// manager and for the agent, registered on controller-runtime's registry so
// that each process serves its own beside controller-runtime's standard ones.
// docs/metrics.md lists them; a test checks that each documented series is
// served by its process and moves.
package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// changeBuckets span a change reaching a few clusters in under a second to a
// staged rollout over hours.
var changeBuckets = []float64{0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900, 3600, 14400}

// Hub metrics observed by the controllers.
var (
	// PlacementChangeApplied is the time from a Placement change (a new
	// generation, or its objects changing) until every selected cluster applied it.
	PlacementChangeApplied = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "lodestar_placement_change_applied_seconds",
		Help:    "Time from a Placement change, as the status aggregator first sees it, until it is applied on every selected cluster.",
		Buckets: changeBuckets,
	})
	// WatchedKinds is 1 for each kind the work generator watches on the hub.
	WatchedKinds = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "lodestar_watched_kinds",
		Help: "Kinds the work generator watches on the hub because Placements select them, by group and kind: 1 while watched.",
	}, []string{"group", "kind"})
	// OverrideEvaluations counts evaluations of a revision's override rules on a
	// cluster view: once per revision and view, not per reconcile.
	OverrideEvaluations = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "lodestar_override_evaluations_total",
		Help: "Evaluations of a Placement revision's override rules (their CEL expressions) on a cluster view; the work generator keeps the results for the revision's life.",
	})
	// OverBudget counts the reconciles a namespace's object changes asked for
	// past its budget (handlers.NamespaceBudget): deferred behind the others.
	OverBudget = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "lodestar_reconciles_over_budget_total",
		Help: "Reconciles of Placements asked for by changes of the objects they select past their namespace's budget: deferred, at low priority, behind the other namespaces'.",
	})
	// PlacementChangeAvailable is the same until every selected cluster is Available.
	PlacementChangeAvailable = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "lodestar_placement_change_available_seconds",
		Help:    "Time from a Placement change, as the status aggregator first sees it, until it is available on every selected cluster.",
		Buckets: changeBuckets,
	})
)

// Agent metrics.
var (
	// ApplyDuration is how long the agent takes to apply one Work.
	ApplyDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "lodestar_agent_apply_duration_seconds",
		Help:    "Time the agent takes to apply one Work's manifests to the member.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
	})
	// ApplyErrors counts manifests that failed to apply, by the Applied reason.
	ApplyErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lodestar_agent_apply_errors_total",
		Help: "Manifests the agent failed to apply, by the reason of their Applied condition.",
	}, []string{"reason"})
	// DriftCorrections counts objects the agent set back after a change on the member.
	DriftCorrections = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "lodestar_agent_drift_corrections_total",
		Help: "Objects the agent set back to their Work's content after they drifted on the member.",
	})
	// Heartbeats counts the agent's Lease renewals on the hub.
	Heartbeats = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "lodestar_agent_heartbeats_total",
		Help: "Renewals of the agent's Lease on the hub.",
	})
	// TokenRenewals counts renewals of the agent's hub token, by result.
	TokenRenewals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lodestar_agent_token_renewals_total",
		Help: "Renewals of the agent's own hub token, by result (success, failure).",
	}, []string{"result"})
	// MemberTokenRenewals counts renewals of the member-access token, by result.
	MemberTokenRenewals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lodestar_agent_member_token_renewals_total",
		Help: "Renewals of the member-access token the agent keeps on the hub for granted consumers, by result (success, failure).",
	}, []string{"result"})

	// AgentWatchedKinds is 1 for each kind the agent watches on the member.
	AgentWatchedKinds = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "lodestar_agent_watched_kinds",
		Help: "Kinds the agent watches on the member (metadata only), by group and kind: 1 while watched.",
	}, []string{"group", "kind"})

	lastHeartbeat   time.Time
	lastHeartbeatMu sync.Mutex
)

// Heartbeat records a renewal of the agent's Lease.
func Heartbeat(now time.Time) {
	Heartbeats.Inc()
	lastHeartbeatMu.Lock()
	lastHeartbeat = now
	lastHeartbeatMu.Unlock()
}

func heartbeatAge() float64 {
	lastHeartbeatMu.Lock()
	defer lastHeartbeatMu.Unlock()
	if lastHeartbeat.IsZero() {
		return -1
	}
	return time.Since(lastHeartbeat).Seconds()
}

var agentOnce, hubOnce sync.Once

// RegisterAgent registers the agent's metrics, once per process.
func RegisterAgent() {
	agentOnce.Do(func() {
		for _, result := range []string{"success", "failure"} {
			TokenRenewals.WithLabelValues(result)
			MemberTokenRenewals.WithLabelValues(result)
		}
		crmetrics.Registry.MustRegister(ApplyDuration, ApplyErrors, DriftCorrections, Heartbeats, TokenRenewals, MemberTokenRenewals, AgentWatchedKinds,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "lodestar_agent_heartbeat_age_seconds",
				Help: "Seconds since the agent last renewed its Lease on the hub; -1 before the first renewal.",
			}, heartbeatAge))
	})
}

// RegisterHub registers the hub's metrics, once per process: the histograms
// and a collector that counts Placements, clusters and Works from the
// manager's cache (reader) at each scrape.
func RegisterHub(reader client.Reader) {
	hubOnce.Do(func() {
		crmetrics.Registry.MustRegister(PlacementChangeApplied, PlacementChangeAvailable, WatchedKinds, OverrideEvaluations, OverBudget, &fleetCollector{reader: reader})
	})
}

var (
	placementsDesc = prometheus.NewDesc("lodestar_placements", "Placements by condition type and status.", []string{"condition", "status"}, nil)
	clustersDesc   = prometheus.NewDesc("lodestar_clusters", "Member clusters by cluster set and health (healthy, unhealthy, unreachable, unknown).", []string{"cluster_set", "health"}, nil)
	worksDesc      = prometheus.NewDesc("lodestar_cluster_works", "Works this hub manager wrote in each member cluster's hub namespace.", []string{"cluster"}, nil)
)

// fleetCollector counts from the cache at scrape time, so that the controllers
// keep no books for it.
type fleetCollector struct{ reader client.Reader }

func (c *fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- placementsDesc
	ch <- clustersDesc
	ch <- worksDesc
}

func (c *fleetCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	placements := &placementv1alpha1.PlacementList{}
	if err := c.reader.List(ctx, placements, client.UnsafeDisableDeepCopy); err == nil {
		counts := map[[2]string]int{}
		for _, p := range placements.Items {
			for _, cond := range p.Status.Conditions {
				counts[[2]string{cond.Type, string(cond.Status)}]++
			}
		}
		for k, n := range counts {
			ch <- prometheus.MustNewConstMetric(placementsDesc, prometheus.GaugeValue, float64(n), k[0], k[1])
		}
	}
	profiles := &cpv1alpha1.ClusterProfileList{}
	if err := c.reader.List(ctx, profiles, client.UnsafeDisableDeepCopy); err == nil {
		counts := map[[2]string]int{}
		for _, p := range profiles.Items {
			if p.Spec.ClusterManager.Name != placementv1alpha1.ClusterManagerName {
				continue
			}
			counts[[2]string{p.Namespace, Health(p.Status.Conditions)}]++
		}
		for k, n := range counts {
			ch <- prometheus.MustNewConstMetric(clustersDesc, prometheus.GaugeValue, float64(n), k[0], k[1])
		}
	}
	works := &workv1alpha1.WorkList{}
	if err := c.reader.List(ctx, works, client.UnsafeDisableDeepCopy); err == nil {
		counts := map[string]int{}
		for _, w := range works.Items {
			if cluster, ok := names.ClusterFromNamespace(w.Namespace); ok {
				counts[cluster]++
			}
		}
		for cluster, n := range counts {
			ch <- prometheus.MustNewConstMetric(worksDesc, prometheus.GaugeValue, float64(n), cluster)
		}
	}
}

// Health is a cluster's health as the metric labels it: unreachable when its
// agent is not reachable, unhealthy when its control plane is not healthy,
// healthy when it is, unknown before the hub judged it.
func Health(conds []metav1.Condition) string {
	switch {
	case meta.IsStatusConditionFalse(conds, placementv1alpha1.AgentReachableCondition):
		return "unreachable"
	case meta.IsStatusConditionFalse(conds, placementv1alpha1.ControlPlaneHealthyCondition):
		return "unhealthy"
	case meta.IsStatusConditionTrue(conds, placementv1alpha1.ControlPlaneHealthyCondition):
		return "healthy"
	}
	return "unknown"
}

// ChangeTimer times Placement changes for the two histograms: a change starts
// when the aggregator first sees a new generation of a Placement, or sees it
// no longer applied after it was; it ends, for each histogram, when the
// Placement is applied (available) at that generation. A Placement already
// applied when first seen (at hub start) is not measured.
type ChangeTimer struct {
	mu      sync.Mutex
	changes map[types.NamespacedName]*change
}

type change struct {
	generation         int64
	start              time.Time
	applied, available bool
}

// Observe takes the Placement's state after an aggregation.
func (t *ChangeTimer) Observe(key types.NamespacedName, generation int64, applied, available bool, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.changes == nil {
		t.changes = map[types.NamespacedName]*change{}
	}
	c, ok := t.changes[key]
	switch {
	case !ok:
		// First seen: measured only if not done already.
		c = &change{generation: generation, start: now, applied: applied, available: available}
		t.changes[key] = c
		return
	case c.generation != generation || (c.applied && !applied) || (c.available && !available):
		*c = change{generation: generation, start: now}
	}
	if applied && !c.applied {
		c.applied = true
		PlacementChangeApplied.Observe(now.Sub(c.start).Seconds())
	}
	if available && !c.available {
		c.available = true
		PlacementChangeAvailable.Observe(now.Sub(c.start).Seconds())
	}
}

// Forget drops a deleted Placement.
func (t *ChangeTimer) Forget(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.changes, key)
}
