package lookup

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	servicesv1alpha1 "github.com/lodestar-dev/lodestar/api/services/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
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
	// ServicesByName indexes ExportedServices and ImportedServices by the
	// namespace/name of their Service, in every cluster namespace.
	ServicesByName = "lodestar.service"
	// WorksByNamespace indexes Works by their Placement's namespace, to find
	// the clusters the hub places a namespace's objects on.
	WorksByNamespace = "lodestar.placementNamespace"
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
	if err := indexer.IndexField(ctx, &workv1alpha1.Work{}, WorksByNamespace, func(o client.Object) []string {
		if ns := o.GetLabels()[placementv1alpha1.PlacementNamespaceLabel]; ns != "" {
			return []string{ns}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing Works by their Placement's namespace: %w", err)
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

// AddServiceIndexes registers the Multicluster Services index (ServicesByName)
// with a manager's indexer whose scheme has the services.lodestar.dev types.
func AddServiceIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	for _, obj := range []client.Object{&servicesv1alpha1.ExportedService{}, &servicesv1alpha1.ImportedService{}} {
		if err := indexer.IndexField(ctx, obj, ServicesByName, func(o client.Object) []string {
			return []string{ServiceOf(o).String()}
		}); err != nil {
			return fmt.Errorf("indexing %T by Service: %w", obj, err)
		}
	}
	return nil
}

// PlacedOn are the clusters that hold a Work of a Placement of namespace ns
// (from an indexed cache, AddIndexes).
func PlacedOn(ctx context.Context, c client.Reader, ns string) (map[string]bool, error) {
	works := &workv1alpha1.WorkList{}
	if err := c.List(ctx, works, client.MatchingFields{WorksByNamespace: ns}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing the Works of namespace %s: %w", ns, err)
	}
	out := map[string]bool{}
	for i := range works.Items {
		if cluster, ok := names.ClusterFromNamespace(works.Items[i].Namespace); ok {
			out[cluster] = true
		}
	}
	return out, nil
}

// ServiceOf is the Service an ExportedService or ImportedService is about.
func ServiceOf(obj client.Object) types.NamespacedName {
	switch o := obj.(type) {
	case *servicesv1alpha1.ExportedService:
		return types.NamespacedName{Namespace: o.Spec.Namespace, Name: o.Spec.Name}
	case *servicesv1alpha1.ImportedService:
		return types.NamespacedName{Namespace: o.Spec.Namespace, Name: o.Spec.Name}
	}
	return types.NamespacedName{}
}

func workIndexKey(namespace, nameLabel string) string {
	return namespace + "/" + nameLabel
}
