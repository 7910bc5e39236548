package scheduler

import (
	"context"
	"slices"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/conditions"
	"github.com/lodestar-dev/lodestar/internal/patch"
	"github.com/lodestar-dev/lodestar/internal/scheduling"
)

// status is what one reconcile found; the scheduler owns the Scheduled condition,
// selectedClusters and observedGeneration of a Placement.
type status struct {
	scheduled conditions.Decision
	result    scheduling.Result
	// explained are the first excluded clusters, each with the filters that
	// excluded it.
	explained []placementv1alpha1.ExcludedCluster
}

func (s *status) set(st metav1.ConditionStatus, reason, format string, args ...any) {
	s.scheduled.Set(placementv1alpha1.ScheduledCondition, st, reason, format, args...)
}

// applyStatus writes the scheduler's fields of the Placement's status. When the
// reconcile ended before deciding anything (a transient error), it writes nothing.
func (r *Reconciler) applyStatus(ctx context.Context, placement *placementv1alpha1.Placement, s *status) error {
	c, ok := s.scheduled.For(placement.Status.Conditions, placement.Generation)
	if !ok {
		return nil
	}
	desired := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: placement.Name, Namespace: placement.Namespace}}
	desired.Status.Conditions = []metav1.Condition{c}
	desired.Status.ObservedGeneration = placement.Generation
	desired.Status.SelectedClusters = ptr.To(int32(len(s.result.Selected))) //nolint:gosec // bounded by the number of ClusterProfiles
	desired.Status.Scheduling = schedulingStatus(s.result)
	if desired.Status.Scheduling != nil {
		desired.Status.Scheduling.Clusters = s.explained
	}
	key := client.ObjectKeyFromObject(placement)
	if conditions.Same(placement.Status.Conditions, c) && placement.Status.ObservedGeneration == desired.Status.ObservedGeneration &&
		ptr.Equal(placement.Status.SelectedClusters, desired.Status.SelectedClusters) {
		// The decision did not change. The explanation (eligible and excluded
		// counts) changes with every cluster that joins or leaves the fleet; writing
		// it at each would write every Placement at each registration, so it is
		// refreshed at most once per explainEvery — unless a reason appears or goes
		// (a drained cluster kept until its replacement is available, say).
		if equality.Semantic.DeepEqual(placement.Status.Scheduling, desired.Status.Scheduling) {
			return nil
		}
		if last, ok := r.explained.Load(key); ok && time.Since(last.(time.Time)) < explainEvery &&
			slices.Equal(exclusionReasons(placement.Status.Scheduling), exclusionReasons(desired.Status.Scheduling)) {
			return nil
		}
	}
	if err := patch.ApplyStatus(ctx, r.Client, desired, Name); err != nil {
		return err
	}
	r.explained.Store(key, time.Now())
	return nil
}

// exclusionReasons lists the exclusion reasons of an explanation, in order.
func exclusionReasons(st *placementv1alpha1.SchedulingStatus) []string {
	if st == nil {
		return nil
	}
	out := make([]string, 0, len(st.Excluded))
	for _, e := range st.Excluded {
		out = append(out, e.Reason)
	}
	return out
}

// maxNamed caps the clusters named per exclusion reason.
const maxNamed = 5

// explainEvery is how often, at most, an unchanged decision's explanation is
// rewritten.
const explainEvery = time.Minute

// schedulingStatus explains a result: how many clusters were eligible and, by
// reason, how many were not chosen, with a few names.
func schedulingStatus(res scheduling.Result) *placementv1alpha1.SchedulingStatus {
	reasons := make([]string, 0, len(res.Excluded))
	for reason := range res.Excluded {
		// The clusters a Placement does not name were never candidates: counting
		// them would make its status change with every cluster that joins or
		// leaves the fleet, while the scheduler, rightly, does not even look at
		// such a Placement when a cluster it does not name changes. The count was
		// then only brought up to date by the next reconcile for another reason
		// (a hub manager restart wrote every such Placement once).
		if reason != placementv1alpha1.ExclusionNotInClusterNames {
			reasons = append(reasons, reason)
		}
	}
	if res.Eligible == 0 && len(reasons) == 0 {
		return nil // Nothing to explain: no cluster to choose from.
	}
	sort.Strings(reasons)
	st := &placementv1alpha1.SchedulingStatus{Eligible: ptr.To(int32(res.Eligible))} //nolint:gosec // bounded by the number of ClusterProfiles
	for _, reason := range reasons {
		names := res.Excluded[reason]
		st.Excluded = append(st.Excluded, placementv1alpha1.Exclusion{
			Reason: reason, Count: int32(len(names)), Clusters: names[:min(len(names), maxNamed)], //nolint:gosec // as above
		})
	}
	return st
}
