package lookup

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// Revisions lists the Placement's PlacementRevisions, newest first.
func Revisions(ctx context.Context, c client.Reader, placement *placementv1alpha1.Placement) ([]placementv1alpha1.PlacementRevision, error) {
	list := &placementv1alpha1.PlacementRevisionList{}
	if err := c.List(ctx, list, client.InNamespace(placement.Namespace),
		client.MatchingLabels{placementv1alpha1.PlacementNameLabel: names.LabelValue(placement.Name)}); err != nil {
		return nil, fmt.Errorf("listing PlacementRevisions: %w", err)
	}
	out := slices.DeleteFunc(list.Items, func(rv placementv1alpha1.PlacementRevision) bool {
		return rv.Spec.Placement != placement.Name || !metav1.IsControlledBy(&rv, placement)
	})
	slices.SortFunc(out, func(a, b placementv1alpha1.PlacementRevision) int {
		return cmp.Compare(b.Spec.Revision, a.Spec.Revision)
	})
	return out, nil
}
