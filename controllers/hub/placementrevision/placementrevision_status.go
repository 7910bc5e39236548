package placementrevision

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/conditions"
	"github.com/lodestar-dev/lodestar/internal/patch"
)

// status is the revision maker's part of a Placement's status, as one reconcile
// found it: the Rendered and DependenciesFollowed conditions and
// status.revision.
type status struct {
	rendered conditions.Decision
	// followed is decided once the selection is made, for a Placement that
	// follows dependencies.
	followed conditions.Decision
	// revision is the current PlacementRevision; empty when the reconcile made
	// none (the one named before stays).
	revision string
}

// applyStatus writes the conditions and status.revision when they change;
// nothing when the reconcile decided nothing. DependenciesFollowed goes once
// the Placement no longer follows dependencies.
func (r *Reconciler) applyStatus(ctx context.Context, placement *placementv1alpha1.Placement, s *status) error {
	if !s.rendered.Decided() {
		return nil
	}
	types, decisions := []string{placementv1alpha1.RenderedCondition}, []*conditions.Decision{&s.rendered}
	follows := placement.Spec.Dependencies == placementv1alpha1.DependenciesFollow
	if follows {
		types, decisions = append(types, placementv1alpha1.DependenciesFollowedCondition), append(decisions, &s.followed)
	}
	conds, changed, _ := conditions.Collect(placement.Status.Conditions, placement.Generation, types, decisions...)
	stale := !follows && meta.FindStatusCondition(placement.Status.Conditions, placementv1alpha1.DependenciesFollowedCondition) != nil
	revision := s.revision
	if revision == "" {
		revision = placement.Status.Revision
	}
	if !changed && !stale && revision == placement.Status.Revision {
		return nil
	}
	desired := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: placement.Name, Namespace: placement.Namespace}}
	desired.Status.Conditions = conds
	desired.Status.Revision = revision
	return patch.ApplyStatus(ctx, r.Client, desired, Name)
}
