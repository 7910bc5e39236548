package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"k8s.io/client-go/util/retry"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/scheduling"
)

// Cordon taints the cluster NoSchedule: no Placement chooses it anew, and what it
// runs stays. Cordoning a cordoned cluster changes nothing.
func Cordon(ctx context.Context, c client.Client, clusterSet, name string) error {
	return editTaints(ctx, c, clusterSet, name, func(taints []placementv1alpha1.Taint) []placementv1alpha1.Taint {
		if slices.ContainsFunc(taints, func(t placementv1alpha1.Taint) bool { return t.Key == placementv1alpha1.CordonTaintKey }) {
			return taints
		}
		return append(taints, placementv1alpha1.Taint{Key: placementv1alpha1.CordonTaintKey, Effect: placementv1alpha1.TaintNoSchedule})
	})
}

// Drain taints the cluster NoExecute: Placements that do not tolerate it move
// away. The scheduler keeps the cluster chosen until the clusters chosen in its
// place report the Placement's objects available (make-before-break); a Placement
// that no other cluster can satisfy leaves it at once.
func Drain(ctx context.Context, c client.Client, clusterSet, name string, now time.Time) error {
	return editTaints(ctx, c, clusterSet, name, func(taints []placementv1alpha1.Taint) []placementv1alpha1.Taint {
		if slices.ContainsFunc(taints, func(t placementv1alpha1.Taint) bool { return t.Key == placementv1alpha1.DrainTaintKey }) {
			return taints
		}
		return append(taints, placementv1alpha1.Taint{Key: placementv1alpha1.DrainTaintKey, Effect: placementv1alpha1.TaintNoExecute, TimeAdded: now.UTC().Format(time.RFC3339)})
	})
}

// Uncordon removes the taints Cordon and Drain add; other taints stay.
func Uncordon(ctx context.Context, c client.Client, clusterSet, name string) error {
	return editTaints(ctx, c, clusterSet, name, func(taints []placementv1alpha1.Taint) []placementv1alpha1.Taint {
		return slices.DeleteFunc(taints, func(t placementv1alpha1.Taint) bool {
			return t.Key == placementv1alpha1.CordonTaintKey || t.Key == placementv1alpha1.DrainTaintKey
		})
	})
}

// editTaints rewrites the cluster's taints annotation, refusing to overwrite one it
// cannot read (the operator fixes it by hand). The write is optimistically locked
// and retried on a conflict: the agent and the hub write the ClusterProfile's
// status all the time.
func editTaints(ctx context.Context, c client.Client, clusterSet, name string, edit func([]placementv1alpha1.Taint) []placementv1alpha1.Taint) error {
	if clusterSet == "" {
		clusterSet = placementv1alpha1.DefaultClusterSet
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		profile := &cpv1alpha1.ClusterProfile{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: clusterSet, Name: name}, profile); err != nil {
			return fmt.Errorf("reading cluster %s in cluster set %s: %w", name, clusterSet, err)
		}
		taints, err := scheduling.ParseTaints(profile.Annotations[placementv1alpha1.TaintsAnnotation])
		if err != nil {
			return fmt.Errorf("cluster %s: %w; fix or remove the annotation first", name, err)
		}
		edited := edit(slices.Clone(taints))
		if slices.Equal(edited, taints) {
			return nil
		}
		base := profile.DeepCopy()
		if len(edited) == 0 {
			delete(profile.Annotations, placementv1alpha1.TaintsAnnotation)
		} else {
			b, err := json.Marshal(edited)
			if err != nil {
				return err
			}
			if profile.Annotations == nil {
				profile.Annotations = map[string]string{}
			}
			profile.Annotations[placementv1alpha1.TaintsAnnotation] = string(b)
		}
		// Not wrapped: RetryOnConflict must see the Conflict.
		return c.Patch(ctx, profile, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	})
}
