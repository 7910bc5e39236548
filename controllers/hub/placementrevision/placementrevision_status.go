package placementrevision

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/conditions"
	"github.com/lodestar-dev/lodestar/internal/patch"
)

// status is the revision maker's part of a Placement's status, as one reconcile
// found it: the Rendered condition and status.revision.
type status struct {
	rendered conditions.Decision
	// revision is the current PlacementRevision; empty when the reconcile made
	// none (the one named before stays).
	revision string
}

// applyStatus writes the Rendered condition and status.revision when they
// change; nothing when the reconcile decided nothing.
func (r *Reconciler) applyStatus(ctx context.Context, placement *placementv1alpha1.Placement, s *status) error {
	c, ok := s.rendered.For(placement.Status.Conditions, placement.Generation)
	if !ok {
		return nil
	}
	revision := s.revision
	if revision == "" {
		revision = placement.Status.Revision
	}
	if conditions.Same(placement.Status.Conditions, c) && revision == placement.Status.Revision {
		return nil
	}
	desired := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: placement.Name, Namespace: placement.Namespace}}
	desired.Status.Conditions = []metav1.Condition{c}
	desired.Status.Revision = revision
	return patch.ApplyStatus(ctx, r.Client, desired, Name)
}
