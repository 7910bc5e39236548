package lookup

import (
	"context"
	"fmt"

	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// Field indexes of the hub manager's cache.
const (
	// WorksByPlacement indexes Works by their Placement's labels, so that listing
	// one Placement's Works does not scan every Work of the fleet.
	WorksByPlacement = "lodestar.placement"
	// ClusterProfilesByName indexes ClusterProfiles by name, to find a cluster's
	// profile from its hub namespace (a Lease, a Work) whatever its cluster set.
	ClusterProfilesByName = "lodestar.clusterName"
	// BindingsBySet indexes ClusterSetBindings by the cluster set they bind.
	BindingsBySet = "lodestar.clusterSet"
)

// AddIndexes registers every index of this package with a manager's indexer. The
// hub manager calls it once, before its reconcilers start.
func AddIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &workv1alpha1.Work{}, WorksByPlacement, func(o client.Object) []string {
		l := o.GetLabels()
		if l[placementv1alpha1.PlacementNameLabel] == "" {
			return nil
		}
		return []string{workIndexKey(l[placementv1alpha1.PlacementNamespaceLabel], l[placementv1alpha1.PlacementNameLabel])}
	}); err != nil {
		return fmt.Errorf("indexing Works by Placement: %w", err)
	}
	if err := indexer.IndexField(ctx, &cpv1alpha1.ClusterProfile{}, ClusterProfilesByName, func(o client.Object) []string {
		return []string{o.GetName()}
	}); err != nil {
		return fmt.Errorf("indexing ClusterProfiles by name: %w", err)
	}
	if err := indexer.IndexField(ctx, &placementv1alpha1.ClusterSetBinding{}, BindingsBySet, func(o client.Object) []string {
		if b, ok := o.(*placementv1alpha1.ClusterSetBinding); ok {
			return []string{b.Spec.ClusterSet}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing ClusterSetBindings by cluster set: %w", err)
	}
	return nil
}

func workIndexKey(namespace, nameLabel string) string {
	return namespace + "/" + nameLabel
}
