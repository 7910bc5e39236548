package lookup

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/interpretation"
)

// Interpretations are the hub's ResourceInterpretations in use, compiled by
// cache (once per generation; a nil cache compiles each time). A hub that does
// not serve the kind has none.
func Interpretations(ctx context.Context, c client.Reader, cache *interpretation.Cache) (*interpretation.Set, error) {
	list := &placementv1alpha1.ResourceInterpretationList{}
	if err := c.List(ctx, list); err != nil && !meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("listing the hub's ResourceInterpretations: %w", err)
	}
	return cache.Set(list.Items), nil
}
