// Package placementref maps objects that Lodestar labels with their Placement
// (PlacementDecisions, Works) back to that Placement, for watches.
package placementref

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// FromLabels maps an object to the Placement its labels name: the name (or its
// hash, for names too long for a label) in nameLabel, and the namespace in nsLabel
// or, when nsLabel is empty, the object's own namespace.
func FromLabels(c client.Reader, nameLabel, nsLabel string) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		key, ok := obj.GetLabels()[nameLabel]
		if !ok || key == "" {
			return nil
		}
		ns := obj.GetNamespace()
		if nsLabel != "" {
			ns = obj.GetLabels()[nsLabel]
		}
		reqs := []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: key}}}
		if !strings.HasPrefix(key, names.HashedLabelPrefix) {
			return reqs
		}
		// Possibly a hashed name: find the Placement whose name hashes to it.
		list := &placementv1alpha1.PlacementList{}
		if err := c.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing Placements for a labelled object", "object", klog.KObj(obj))
			return reqs
		}
		for _, p := range list.Items {
			if p.Name != key && names.LabelValue(p.Name) == key {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
			}
		}
		return reqs
	}
}

// DecidedClusters returns the clusters named by the Placement's PlacementDecisions,
// each once, and false when no PlacementDecision names the Placement yet.
func DecidedClusters(ctx context.Context, c client.Reader, placement *placementv1alpha1.Placement) ([]string, bool, error) {
	list := &cpv1alpha1.PlacementDecisionList{}
	if err := c.List(ctx, list, client.InNamespace(placement.Namespace),
		client.MatchingLabels{cpv1alpha1.PlacementKeyLabel: names.LabelValue(placement.Name)}); err != nil {
		return nil, false, fmt.Errorf("listing PlacementDecisions: %w", err)
	}
	seen := map[string]bool{}
	var clusters []string
	for _, pd := range list.Items {
		for _, d := range pd.Decisions {
			if !seen[d.ClusterProfileRef.Name] {
				seen[d.ClusterProfileRef.Name] = true
				clusters = append(clusters, d.ClusterProfileRef.Name)
			}
		}
	}
	return clusters, len(list.Items) > 0, nil
}

// WorkLabels are the labels that tie a Work to its Placement.
func WorkLabels(placement *placementv1alpha1.Placement) map[string]string {
	return map[string]string{
		placementv1alpha1.PlacementNamespaceLabel: placement.Namespace,
		placementv1alpha1.PlacementNameLabel:      names.LabelValue(placement.Name),
	}
}
