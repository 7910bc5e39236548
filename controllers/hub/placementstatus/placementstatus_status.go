package placementstatus

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/clusterworks"
	"github.com/lodestar-dev/lodestar/internal/conditions"
	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/patch"
)

// maxDriftMessage bounds a cluster's drift in the Placement's status;
// maxAgentMessage any other message an agent wrote, as it is read: one member
// cannot grow other tenants' Placement status.
const (
	maxDriftMessage = 1024
	maxAgentMessage = 1024
)

// maxNamedFailures caps how many failing clusters the Applied message names.
const maxNamedFailures = 5

// MaxListedClusters caps status.clusters: a Placement's status stays small (and
// cheap to write) however many clusters it reaches.
const MaxListedClusters = 100

// Aggregation is the status aggregator's part of a Placement's status.
type Aggregation struct {
	Clusters           []placementv1alpha1.ClusterStatus
	Unlisted           int32
	Applied            int32
	Available          int32
	Drifted            int32
	Condition          metav1.Condition
	AvailableCondition metav1.Condition
	// DriftCondition is set when the Placement reports drift (whenDrifted: Report).
	DriftCondition *metav1.Condition
	// Summaries are the results of the Placement's status summaries.
	Summaries []placementv1alpha1.SummaryStatus
	// ReflectCondition is set when the Placement reflects status (Aggregate).
	ReflectCondition *metav1.Condition
	// Selected is set for a Placement another scheduler decides for: the clusters
	// its decisions name, as selectedClusters (Lodestar's scheduler writes it
	// for its own).
	Selected *int32
	// unavailable are the selected clusters not available, sorted.
	unavailable []string
}

// Aggregate computes, from the clusters the Placement's decisions name and its
// Works, the per-cluster state and the Applied condition. A Work counts as applied
// only when the agent reported Applied for the Work's current generation. With
// reportsDrift (whenDrifted: Report) it also counts and names the drifted clusters.
// overrideFailed are the clusters the target revision cannot be rendered for
// (RenderFailures): they are listed, not applied, with why, whether or not they
// have a Work.
func Aggregate(decided []string, works []workv1alpha1.Work, reportsDrift bool, overrideFailed map[string]string) Aggregation {
	agg := Aggregation{}
	byCluster := map[string]placementv1alpha1.ClusterStatus{}
	for cluster, parts := range clusterworks.ByCluster(works) {
		byCluster[cluster] = clusterStatus(cluster, parts)
	}
	markOverrideFailed(byCluster, decided, overrideFailed)
	t := agg.tally(decided, byCluster)
	agg.Clusters, agg.Unlisted = listed(byCluster)
	agg.unavailable = t.unavailable
	agg.Drifted = int32(len(t.drifted))
	if reportsDrift {
		c := condition(placementv1alpha1.DriftedCondition, metav1.ConditionFalse, placementv1alpha1.ReasonNoDrift, "no cluster reports a placed object changed on the member")
		if len(t.drifted) > 0 {
			c = condition(placementv1alpha1.DriftedCondition, metav1.ConditionTrue, placementv1alpha1.ReasonDriftDetected,
				"%d of %s report placed objects changed on the member and left so: %s", len(t.drifted), message.Count(len(decided), "cluster"), sample(t.drifted))
		}
		agg.DriftCondition = &c
	}
	empty := nothingPlaced(works)
	agg.Condition = agg.appliedCondition(len(decided), t, empty, len(overrideFailed) > 0, byCluster)
	agg.AvailableCondition = agg.availableCondition(len(decided), t, empty)
	return agg
}

// markOverrideFailed lists the decided clusters whose overrides fail as not
// applied, with why, whether or not they have a Work.
func markOverrideFailed(byCluster map[string]placementv1alpha1.ClusterStatus, decided []string, overrideFailed map[string]string) {
	for _, c := range decided {
		why, ok := overrideFailed[c]
		if !ok {
			continue
		}
		cs := byCluster[c]
		cs.Name, cs.Applied = c, metav1.ConditionFalse
		if cs.Work == "" {
			cs.Available = metav1.ConditionFalse
		}
		cs.Reason = placementv1alpha1.ReasonOverrideFailed
		cs.Message = message.Truncate("the overrides fail on this cluster, which keeps what its Work held: "+why, maxAgentMessage)
		byCluster[c] = cs
	}
}

// tally is how the decided clusters stand, each list sorted.
type tally struct{ failed, pending, unavailable, drifted []string }

// tally counts the decided clusters applied and available into agg and lists
// the others.
func (agg *Aggregation) tally(decided []string, byCluster map[string]placementv1alpha1.ClusterStatus) tally {
	var t tally
	for _, c := range decided {
		cs, ok := byCluster[c]
		if ok && cs.Drift != "" {
			t.drifted = append(t.drifted, c)
		}
		if ok && cs.Available == metav1.ConditionTrue {
			agg.Available++
		} else {
			t.unavailable = append(t.unavailable, c)
		}
		switch {
		case !ok:
			t.pending = append(t.pending, c)
		case cs.Applied == metav1.ConditionTrue:
			agg.Applied++
		case cs.Applied == metav1.ConditionFalse:
			t.failed = append(t.failed, c)
		default:
			t.pending = append(t.pending, c)
		}
	}
	t.failed = slices.Sorted(slices.Values(t.failed))
	t.unavailable = slices.Sorted(slices.Values(t.unavailable))
	return t
}

// appliedCondition is the Applied condition of a tally over decided clusters.
func (agg *Aggregation) appliedCondition(decided int, t tally, empty, overridesFail bool, byCluster map[string]placementv1alpha1.ClusterStatus) metav1.Condition {
	applied := placementv1alpha1.AppliedCondition
	switch {
	case decided == 0:
		return condition(applied, metav1.ConditionFalse, placementv1alpha1.ReasonNoClusters, "no cluster is selected")
	case len(t.failed) > 0 && overridesFail:
		return condition(applied, metav1.ConditionFalse, placementv1alpha1.ReasonOverrideFailed,
			"%d of %s cannot apply the revision: %s", len(t.failed), message.Count(decided, "cluster"), failures(t.failed, byCluster))
	case len(t.failed) > 0:
		return condition(applied, metav1.ConditionFalse, placementv1alpha1.ReasonApplyFailed,
			"%d of %s failed to apply: %s", len(t.failed), message.Count(decided, "cluster"), sample(t.failed))
	case len(t.pending) > 0:
		return condition(applied, metav1.ConditionFalse, placementv1alpha1.ReasonApplyPending,
			"%d of %s applied; waiting for %s", agg.Applied, message.Count(decided, "cluster"), sample(t.pending))
	case empty:
		return condition(applied, metav1.ConditionFalse, placementv1alpha1.ReasonNothingSelected, "%s", nothingSelected)
	}
	return condition(applied, metav1.ConditionTrue, placementv1alpha1.ReasonApplied, "applied on %s", message.All(decided, "cluster"))
}

// availableCondition is the Available condition of a tally over decided clusters.
func (agg *Aggregation) availableCondition(decided int, t tally, empty bool) metav1.Condition {
	available := placementv1alpha1.AvailableCondition
	switch {
	case decided == 0:
		return condition(available, metav1.ConditionFalse, placementv1alpha1.ReasonNoClusters, "no cluster is selected")
	case len(t.unavailable) > 0:
		return condition(available, metav1.ConditionFalse, placementv1alpha1.ReasonNotAvailable,
			"%d of %s available; not yet: %s", agg.Available, message.Count(decided, "cluster"), sample(t.unavailable))
	case empty:
		return condition(available, metav1.ConditionFalse, placementv1alpha1.ReasonNothingSelected, "%s", nothingSelected)
	}
	return condition(available, metav1.ConditionTrue, placementv1alpha1.ReasonAvailable, "available on %s", message.All(decided, "cluster"))
}

// nothingSelected is the Applied and Available message of a Placement that
// places nothing.
const nothingSelected = "no object is placed: the resource selectors select nothing in the namespace " +
	"(check their kinds, names and labels; `kubectl lodestar render` shows what they select)"

// nothingPlaced tells whether the selected clusters' Works, all applied, carry
// no object at all: a selector typo must not read as success.
func nothingPlaced(works []workv1alpha1.Work) bool {
	for i := range works {
		if len(works[i].Spec.Workload.Manifests) > 0 {
			return false
		}
	}
	return len(works) > 0
}

// failures names failed clusters with their reasons, the first few.
func failures(failed []string, byCluster map[string]placementv1alpha1.ClusterStatus) string {
	named := make([]string, len(failed))
	for i, c := range failed {
		named[i] = c + " (" + byCluster[c].Reason + ")"
	}
	return message.List(named, maxNamedFailures, ", ")
}

// RenderFailures are the clusters the work generator cannot render the
// Placement's target revision for, with why (its status.rollout).
func RenderFailures(p *placementv1alpha1.Placement) map[string]string {
	out := map[string]string{}
	if p.Status.Rollout == nil {
		return out
	}
	for _, c := range p.Status.Rollout.Clusters {
		if why, ok := strings.CutPrefix(c.Reason, placementv1alpha1.ReasonOverrideFailed+": "); ok && c.State == placementv1alpha1.ClusterFailed {
			out[c.Name] = why
		}
	}
	return out
}

// clusterStatus is the state of a cluster's Works (its parts, in part order):
// applied and available when every part is, with the reason and message of the
// first part that is not applied (or of the first part).
func clusterStatus(cluster string, parts []*workv1alpha1.Work) placementv1alpha1.ClusterStatus {
	cs := placementv1alpha1.ClusterStatus{Name: cluster, Work: parts[0].Name,
		Applied: clusterworks.Applied(parts), Available: clusterworks.Availability(parts)}
	var drift []string
	picked := false
	for _, w := range parts {
		applied, reason, msg := partState(w)
		if d := meta.FindStatusCondition(w.Status.Conditions, lodestarworkv1alpha1.ConditionDrifted); d != nil && d.Status == metav1.ConditionTrue && d.ObservedGeneration == w.Generation {
			drift = append(drift, message.Truncate(d.Message, maxDriftMessage))
		}
		if !picked && (applied != metav1.ConditionTrue || cs.Reason == "") {
			cs.Reason, cs.Message = reason, msg
			picked = applied != metav1.ConditionTrue
		}
	}
	if _, complete := clusterworks.Revision(parts); complete || picked {
		cs.Drift = message.Truncate(strings.Join(drift, "; "), maxDriftMessage)
		return cs
	}
	cs.Reason = placementv1alpha1.ReasonClusterPending
	cs.Message = fmt.Sprintf("waiting for the %d Works that carry the objects at the revision of Work %s", clusterworks.PartsOf(parts[0]), parts[0].Name)
	cs.Drift = message.Truncate(strings.Join(drift, "; "), maxDriftMessage)
	return cs
}

// partState is what one Work says of its objects being applied: the status,
// reason and message of its Applied condition at its generation, or why it has
// none.
func partState(w *workv1alpha1.Work) (metav1.ConditionStatus, string, string) {
	cond := meta.FindStatusCondition(w.Status.Conditions, lodestarworkv1alpha1.ConditionApplied)
	blocked := meta.FindStatusCondition(w.Status.Conditions, lodestarworkv1alpha1.ConditionCleanupBlocked)
	switch {
	case !w.DeletionTimestamp.IsZero() && blocked != nil && blocked.Status == metav1.ConditionTrue:
		return metav1.ConditionUnknown, blocked.Reason, message.Truncate(blocked.Message, maxAgentMessage)
	case !w.DeletionTimestamp.IsZero():
		return metav1.ConditionUnknown, placementv1alpha1.ReasonClusterRemoving, "the Work is being removed from the cluster"
	case cond == nil || cond.ObservedGeneration != w.Generation:
		return metav1.ConditionUnknown, placementv1alpha1.ReasonClusterPending, fmt.Sprintf("waiting for the agent to report generation %d", w.Generation)
	}
	return cond.Status, cond.Reason, message.Truncate(cond.Message, maxAgentMessage)
}

// maxReasons is how many reasons each listed cluster carries, and
// maxClaimsPerCluster how many claims.
const (
	maxReasons          = 3
	maxClaimsPerCluster = 32
	maxSharesPerCluster = 16
)

// describe adds to each listed cluster the reasons its objects are not applied or
// available and the objects' detail, from the views of its Work, and names the
// first reason in the Available condition.
func (agg *Aggregation) describe(vs map[string]*view) {
	b := &detailBudget{}
	for i := range agg.Clusters {
		cs := &agg.Clusters[i]
		v := vs[cs.Name]
		if v == nil {
			continue
		}
		cs.Reasons = v.reasons(maxReasons)
		var unlisted int32
		cs.Objects, unlisted = v.objectStatuses(b)
		cs.UnlistedObjects = ptr.To(unlisted)
		cs.Claims = v.claimStatuses(maxClaimsPerCluster, b)
		cs.Shares = v.shareStatuses(maxSharesPerCluster)
	}
	if agg.AvailableCondition.Status != metav1.ConditionFalse {
		return
	}
	for _, c := range agg.unavailable {
		if v := vs[c]; v != nil {
			if r := v.reasons(1); len(r) > 0 {
				agg.AvailableCondition.Message += fmt.Sprintf(" (%s: %s)", c, r[0])
				return
			}
		}
	}
}

// quotaHeld makes Available False while the namespace's FleetQuotas hold the
// Placement's newest revision back (QuotaAdmitted False): what runs is an
// older revision, or the newest on fewer clusters than decided, not what the
// Placement asks.
func (agg *Aggregation) quotaHeld(existing []metav1.Condition) {
	if !quotaHolds(existing) {
		return
	}
	c := meta.FindStatusCondition(existing, placementv1alpha1.QuotaAdmittedCondition)
	msg := "the newest revision waits for the namespace's FleetQuotas (QuotaAdmitted: " + c.Message + "); what runs is "
	if agg.AvailableCondition.Status == metav1.ConditionTrue {
		msg += "an earlier revision, or fewer clusters: " + agg.AvailableCondition.Message
	} else {
		msg += "not available either: " + agg.AvailableCondition.Message
	}
	agg.AvailableCondition = condition(placementv1alpha1.AvailableCondition, metav1.ConditionFalse, placementv1alpha1.ReasonWaitingForQuota, "%s",
		message.Truncate(msg, conditions.MaxMessage))
}

// quotaHolds tells whether the namespace's FleetQuotas hold the Placement's
// newest revision back.
func quotaHolds(existing []metav1.Condition) bool {
	return meta.IsStatusConditionFalse(existing, placementv1alpha1.QuotaAdmittedCondition)
}

// listed returns the clusters to list in the status, sorted by name: all of them
// up to MaxListedClusters, else those whose objects are not both applied and
// available first, and how many are left out.
func listed(byCluster map[string]placementv1alpha1.ClusterStatus) ([]placementv1alpha1.ClusterStatus, int32) {
	all := make([]placementv1alpha1.ClusterStatus, 0, len(byCluster))
	for _, cs := range byCluster {
		all = append(all, cs)
	}
	healthy := func(cs placementv1alpha1.ClusterStatus) bool {
		return cs.Applied == metav1.ConditionTrue && cs.Available == metav1.ConditionTrue && cs.Drift == ""
	}
	sort.Slice(all, func(i, j int) bool {
		if len(all) > MaxListedClusters && healthy(all[i]) != healthy(all[j]) {
			return !healthy(all[i])
		}
		return all[i].Name < all[j].Name
	})
	if len(all) <= MaxListedClusters {
		return all, 0
	}
	out := all[:MaxListedClusters]
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, int32(len(all) - MaxListedClusters)
}

func condition(t string, status metav1.ConditionStatus, reason, format string, args ...any) metav1.Condition {
	return metav1.Condition{Type: t, Status: status, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// sample names up to maxNamedFailures of the clusters, sorted.
func sample(clusters []string) string {
	return message.List(slices.Sorted(slices.Values(clusters)), maxNamedFailures, ", ")
}

// applyStatus writes the aggregator's fields of the Placement's status. A write
// that only moves counts, per-cluster states or summaries waits for the pace
// (the returned duration); one that moves a condition goes at once.
func (r *Reconciler) applyStatus(ctx context.Context, placement *placementv1alpha1.Placement, agg Aggregation) (time.Duration, error) {
	agg.Condition.ObservedGeneration = placement.Generation
	agg.AvailableCondition.ObservedGeneration = placement.Generation
	desired := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: placement.Name, Namespace: placement.Namespace}}
	desired.Status.Conditions = []metav1.Condition{
		conditions.Merge(placement.Status.Conditions, agg.Condition),
		conditions.Merge(placement.Status.Conditions, agg.AvailableCondition),
	}
	st := placement.Status
	// Without whenDrifted: Report there is no Drifted condition: leaving it out of
	// the apply removes one written before.
	sameDrift := meta.FindStatusCondition(st.Conditions, placementv1alpha1.DriftedCondition) == nil
	if agg.DriftCondition != nil {
		agg.DriftCondition.ObservedGeneration = placement.Generation
		desired.Status.Conditions = append(desired.Status.Conditions, conditions.Merge(placement.Status.Conditions, *agg.DriftCondition))
		sameDrift = conditions.Same(st.Conditions, *agg.DriftCondition)
	}
	desired.Status.SelectedClusters = agg.Selected
	desired.Status.AppliedClusters = ptr.To(agg.Applied)
	desired.Status.AvailableClusters = ptr.To(agg.Available)
	desired.Status.DriftedClusters = ptr.To(agg.Drifted)
	desired.Status.Clusters = agg.Clusters
	desired.Status.UnlistedClusters = ptr.To(agg.Unlisted)
	desired.Status.Summaries = agg.Summaries
	sameReflect := meta.FindStatusCondition(st.Conditions, placementv1alpha1.StatusReflectedCondition) == nil
	if agg.ReflectCondition != nil {
		agg.ReflectCondition.ObservedGeneration = placement.Generation
		desired.Status.Conditions = append(desired.Status.Conditions, conditions.Merge(placement.Status.Conditions, *agg.ReflectCondition))
		sameReflect = conditions.Same(st.Conditions, *agg.ReflectCondition)
	}
	if conditions.Same(st.Conditions, agg.Condition) && conditions.Same(st.Conditions, agg.AvailableCondition) && sameDrift && sameReflect &&
		equality.Semantic.DeepEqual(st.Summaries, agg.Summaries) &&
		(agg.Selected == nil || ptr.Equal(st.SelectedClusters, agg.Selected)) &&
		ptr.Equal(st.AppliedClusters, desired.Status.AppliedClusters) && ptr.Equal(st.AvailableClusters, desired.Status.AvailableClusters) &&
		ptr.Equal(st.DriftedClusters, desired.Status.DriftedClusters) && ptr.Equal(st.UnlistedClusters, desired.Status.UnlistedClusters) && equality.Semantic.DeepEqual(st.Clusters, agg.Clusters) {
		// Nothing would change, as far as the cache shows; but it may not
		// show a write of a moment ago yet.
		return r.pace.Recheck(client.ObjectKeyFromObject(placement), time.Now(), coalesceWindow), nil
	}
	material := false
	for _, c := range desired.Status.Conditions {
		material = material || conditions.Moved(st.Conditions, c)
	}
	if wait := r.pace.Wait(client.ObjectKeyFromObject(placement), material, time.Now()); wait > 0 {
		return wait, nil
	}
	return 0, patch.ApplyStatus(ctx, r.Client, desired, Name)
}
