package lookup

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// secretGVK is the core Secret, read as unstructured so that the reads share
// the informer the hub's selection of Secrets already keeps.
var secretGVK = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}

// RevisionData reads a revision's data Secret (placementv1alpha1.
// RevisionDataSecretType): the values of the Secrets the revision holds, and
// the Secret's resource version. A Secret of another type is an error.
func RevisionData(ctx context.Context, c client.Reader, namespace, name string) (map[string][]byte, string, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(secretGVK)
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
		return nil, "", err
	}
	if t, _, _ := unstructured.NestedString(u.Object, "type"); t != placementv1alpha1.RevisionDataSecretType {
		return nil, "", fmt.Errorf("the Secret %s/%s is of type %q, not a revision's data (%s)", namespace, name, t, placementv1alpha1.RevisionDataSecretType)
	}
	encoded, _, err := unstructured.NestedStringMap(u.Object, "data")
	if err != nil {
		return nil, "", fmt.Errorf("reading Secret %s/%s: %w", namespace, name, err)
	}
	data := make(map[string][]byte, len(encoded))
	for k, v := range encoded {
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return nil, "", fmt.Errorf("reading key %s of Secret %s/%s: %w", k, namespace, name, err)
		}
		data[k] = b
	}
	return data, u.GetResourceVersion(), nil
}
