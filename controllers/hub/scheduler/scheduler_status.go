package scheduler

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/kube"
)

// status is what one reconcile found; the scheduler owns the Scheduled condition,
// selectedClusters and observedGeneration of a Placement.
type status struct {
	scheduled kube.Decision
	selected  int
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
	patch := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: placement.Name, Namespace: placement.Namespace}}
	patch.Status.Conditions = []metav1.Condition{c}
	patch.Status.ObservedGeneration = placement.Generation
	patch.Status.SelectedClusters = int32(s.selected) //nolint:gosec // bounded by the number of ClusterProfiles
	return kube.ApplyStatus(ctx, r.Client, patch, Name)
}
