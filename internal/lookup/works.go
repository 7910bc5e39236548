package lookup

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// Works lists the Placement's Works in every cluster namespace through
// WorksByPlacement; opts may add client.UnsafeDisableDeepCopy for callers that
// only read.
func Works(ctx context.Context, c client.Reader, placement *placementv1alpha1.Placement, opts ...client.ListOption) ([]workv1alpha1.Work, error) {
	list := &workv1alpha1.WorkList{}
	key := workIndexKey(placement.Namespace, names.LabelValue(placement.Name))
	if err := c.List(ctx, list, append(opts, client.MatchingFields{WorksByPlacement: key})...); err != nil {
		return nil, fmt.Errorf("listing Works: %w", err)
	}
	return list.Items, nil
}

// WorkLabels are the labels that tie a Work to its Placement.
func WorkLabels(placement *placementv1alpha1.Placement) map[string]string {
	return map[string]string{
		placementv1alpha1.PlacementNamespaceLabel: placement.Namespace,
		placementv1alpha1.PlacementNameLabel:      names.LabelValue(placement.Name),
	}
}
