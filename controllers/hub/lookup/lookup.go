// Package lookup is how the hub reconcilers find related objects in the manager's
// cache: the field indexes (registered once, by AddIndexes at manager start),
// listing through them, which ClusterProfiles are Lodestar's, and what a Work's
// status says of availability. It holds no
// reconciler; reconcilers share it instead of importing one another.
package lookup

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
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

// ClusterProfilesNamed lists the ClusterProfiles of a cluster name in every
// cluster set, read-only (the cache's own objects).
func ClusterProfilesNamed(ctx context.Context, c client.Reader, name string) ([]cpv1alpha1.ClusterProfile, error) {
	list := &cpv1alpha1.ClusterProfileList{}
	if err := c.List(ctx, list, client.MatchingFields{ClusterProfilesByName: name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing ClusterProfiles named %s: %w", name, err)
	}
	return list.Items, nil
}

// Managed tells whether Lodestar manages a ClusterProfile.
func Managed(p *cpv1alpha1.ClusterProfile) bool {
	return p.Spec.ClusterManager.Name == placementv1alpha1.ClusterManagerName
}

// ManagedProfile reads the ClusterProfile of key for a controller that acts only on
// Lodestar's ClusterProfiles in the cluster sets the hub manages (sets). It returns
// nil, and no error, when the profile is gone or not one to act on.
func ManagedProfile(ctx context.Context, c client.Reader, key client.ObjectKey, sets []string) (*cpv1alpha1.ClusterProfile, error) {
	profile := &cpv1alpha1.ClusterProfile{}
	if err := c.Get(ctx, key, profile); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if !Managed(profile) || !slices.Contains(sets, profile.Namespace) {
		return nil, nil
	}
	return profile, nil
}

// ManagedProfiles lets only the ClusterProfiles Lodestar manages through.
var ManagedProfiles = predicate.NewPredicateFuncs(func(o client.Object) bool {
	p, ok := o.(*cpv1alpha1.ClusterProfile)
	return ok && Managed(p)
})

// WorkAvailability is what the agent reported as the Work's Available condition
// for its current generation; Unknown when it has not, or the Work is going.
func WorkAvailability(w *workv1alpha1.Work) metav1.ConditionStatus {
	avail := meta.FindStatusCondition(w.Status.Conditions, lodestarworkv1alpha1.ConditionAvailable)
	if avail == nil || avail.ObservedGeneration != w.Generation || !w.DeletionTimestamp.IsZero() {
		return metav1.ConditionUnknown
	}
	return avail.Status
}

// ClusterSets returns the cluster sets a namespace's Placements may use: those its
// ClusterSetBindings name that are among managed, the cluster sets the hub
// manages, sorted. A namespace without a binding may use none; the Placements
// that carry out ClusterPlacements use every managed set.
func ClusterSets(ctx context.Context, c client.Reader, namespace string, managed []string) ([]string, error) {
	if namespace == placementv1alpha1.ClusterPlacementNamespace {
		// ClusterPlacements are the platform admins': every managed set.
		return slices.Sorted(slices.Values(managed)), nil
	}
	list := &placementv1alpha1.ClusterSetBindingList{}
	if err := c.List(ctx, list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing ClusterSetBindings in %s: %w", namespace, err)
	}
	var sets []string
	for i := range list.Items {
		b := &list.Items[i]
		if b.DeletionTimestamp.IsZero() && slices.Contains(managed, b.Spec.ClusterSet) && !slices.Contains(sets, b.Spec.ClusterSet) {
			sets = append(sets, b.Spec.ClusterSet)
		}
	}
	slices.Sort(sets)
	return sets, nil
}
