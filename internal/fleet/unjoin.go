package fleet

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// UnjoinOptions say how a cluster leaves the fleet.
type UnjoinOptions struct {
	// ClusterSet is the cluster-set namespace of its ClusterProfile.
	ClusterSet string
	// Orphan leaves what Lodestar placed on the member in place (released) instead
	// of deleting it.
	Orphan bool
	// Wait is how long to wait for the hub side to be gone; 0 does not wait.
	Wait time.Duration
	// Progress, when set, is told what is being waited for.
	Progress func(string)
}

// Unjoin removes a cluster from the fleet: with Orphan it first marks the
// cluster's Works so that the agent releases their objects instead of deleting
// them; then it deletes the ClusterProfile. The hub's cleanup controller removes
// the Works (the agent removes or releases their objects), then the cluster's
// namespace and identity, then lets the ClusterProfile go; Unjoin waits for that.
func Unjoin(ctx context.Context, c client.Client, name string, opts UnjoinOptions) error {
	if opts.ClusterSet == "" {
		opts.ClusterSet = placementv1alpha1.DefaultClusterSet
	}
	key := client.ObjectKey{Namespace: opts.ClusterSet, Name: name}
	profile := &cpv1alpha1.ClusterProfile{}
	if err := c.Get(ctx, key, profile); err != nil {
		return fmt.Errorf("reading cluster %s in cluster set %s: %w", name, opts.ClusterSet, err)
	}
	if profile.Spec.ClusterManager.Name != placementv1alpha1.ClusterManagerName {
		return fmt.Errorf("ClusterProfile %s is managed by %q, not %s: not unjoining it", key, profile.Spec.ClusterManager.Name, placementv1alpha1.ClusterManagerName)
	}
	if opts.Orphan {
		works := &workv1alpha1.WorkList{}
		if err := c.List(ctx, works, client.InNamespace(names.ClusterNamespace(name))); err != nil {
			return fmt.Errorf("listing the cluster's Works: %w", err)
		}
		for i := range works.Items {
			w := &works.Items[i]
			base := w.DeepCopy()
			if w.Annotations == nil {
				w.Annotations = map[string]string{}
			}
			w.Annotations[lodestarworkv1alpha1.DeletionPolicyAnnotation] = lodestarworkv1alpha1.DeletionPolicyOrphan
			if err := c.Patch(ctx, w, client.MergeFrom(base)); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("marking Work %s/%s to orphan its objects: %w", w.Namespace, w.Name, err)
			}
		}
	}
	if err := c.Delete(ctx, profile); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting ClusterProfile %s: %w", key, err)
	}
	if opts.Wait == 0 {
		return nil
	}
	deadline := time.Now().Add(opts.Wait)
	last := ""
	for {
		err := c.Get(ctx, key, &cpv1alpha1.ClusterProfile{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		works := &workv1alpha1.WorkList{}
		if err := c.List(ctx, works, client.InNamespace(names.ClusterNamespace(name))); err != nil {
			return err
		}
		msg := fmt.Sprintf("waiting for %d Works to be removed from cluster %s", len(works.Items), name)
		if len(works.Items) == 0 {
			msg = "waiting for the hub side of cluster " + name + " to be removed"
		}
		if msg != last && opts.Progress != nil {
			opts.Progress(msg)
			last = msg
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster %s is still leaving after %s (%s); the hub finishes on its own — an unreachable agent is given up on after the hub's --cluster-cleanup-grace-period", name, opts.Wait, msg)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
