package lookup

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
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

// DeleteOrphans deletes the objects of list's kind in namespace, labelled
// label with name's label value, that a Placement of that name controls: a
// controller's own objects (revisions, decisions) of a Placement that is gone,
// which a hub without a garbage collector (an API server alone) would keep
// for ever, and a new Placement of the name would find.
func DeleteOrphans(ctx context.Context, c client.Client, list client.ObjectList, namespace, name, label string) error {
	if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{label: names.LabelValue(name)}); err != nil {
		return err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	for _, item := range items {
		obj, ok := item.(client.Object)
		if !ok {
			continue
		}
		owner := metav1.GetControllerOf(obj)
		if owner == nil || owner.Kind != "Placement" || owner.Name != name || !strings.HasPrefix(owner.APIVersion, placementv1alpha1.GroupVersion.Group+"/") {
			continue
		}
		if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting %s of Placement %s/%s: %w", obj.GetName(), namespace, name, err)
		}
	}
	return nil
}
