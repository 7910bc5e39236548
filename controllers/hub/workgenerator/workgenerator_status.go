package workgenerator

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/kube"
)

// status is the work generator's WorkSynchronized condition, as one reconcile found it.
type status struct {
	condition *metav1.Condition
}

func (s *status) set(st metav1.ConditionStatus, reason, format string, args ...any) {
	s.condition = &metav1.Condition{
		Type:    placementv1alpha1.WorkSynchronizedCondition,
		Status:  st,
		Reason:  reason,
		Message: fmt.Sprintf(format, args...),
	}
}

// applyStatus writes the WorkSynchronized condition; it writes nothing when the
// reconcile ended on a transient error before it knew the state.
func (r *Reconciler) applyStatus(ctx context.Context, placement *placementv1alpha1.Placement, s *status) error {
	if s.condition == nil || placement.Name == "" {
		return nil
	}
	s.condition.ObservedGeneration = placement.Generation
	patch := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: placement.Name, Namespace: placement.Namespace}}
	patch.Status.Conditions = []metav1.Condition{kube.Condition(placement.Status.Conditions, *s.condition)}
	return kube.ApplyStatus(ctx, r.Client, patch, Name)
}
