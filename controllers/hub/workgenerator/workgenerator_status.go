package workgenerator

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/kube"
)

// status is the work generator's WorkSynchronized condition, as one reconcile found it.
type status struct {
	synchronized kube.Decision
}

func (s *status) set(st metav1.ConditionStatus, reason, format string, args ...any) {
	s.synchronized.Set(placementv1alpha1.WorkSynchronizedCondition, st, reason, format, args...)
}

// applyStatus writes the WorkSynchronized condition; it writes nothing when the
// reconcile ended on a transient error before it knew the state.
func (r *Reconciler) applyStatus(ctx context.Context, placement *placementv1alpha1.Placement, s *status) error {
	c, ok := s.synchronized.For(placement.Status.Conditions, placement.Generation)
	if !ok || kube.SameCondition(placement.Status.Conditions, c) {
		return nil
	}
	patch := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: placement.Name, Namespace: placement.Namespace}}
	patch.Status.Conditions = []metav1.Condition{c}
	return kube.ApplyStatus(ctx, r.Client, patch, Name)
}
