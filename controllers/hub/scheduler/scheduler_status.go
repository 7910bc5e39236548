package scheduler

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/kube"
)

// status is what one reconcile found; the scheduler owns the Scheduled condition,
// selectedClusters and observedGeneration of a Placement.
type status struct {
	condition *metav1.Condition
	selected  int
}

func (s *status) set(st metav1.ConditionStatus, reason, format string, args ...any) {
	s.condition = &metav1.Condition{
		Type:    placementv1alpha1.ScheduledCondition,
		Status:  st,
		Reason:  reason,
		Message: fmt.Sprintf(format, args...),
	}
}

// applyStatus writes the scheduler's fields of the Placement's status. When the
// reconcile ended before deciding anything (a transient error), it writes nothing.
func (r *Reconciler) applyStatus(ctx context.Context, placement *placementv1alpha1.Placement, s *status) error {
	if s.condition == nil {
		return nil
	}
	s.condition.ObservedGeneration = placement.Generation

	patch := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: placement.Name, Namespace: placement.Namespace}}
	patch.Status.Conditions = []metav1.Condition{kube.Condition(placement.Status.Conditions, *s.condition)}
	patch.Status.ObservedGeneration = placement.Generation
	patch.Status.SelectedClusters = int32(s.selected) //nolint:gosec // bounded by the number of ClusterProfiles
	return kube.ApplyStatus(ctx, r.Client, patch, Name)
}
