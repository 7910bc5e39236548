package workgenerator

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// placementsOverriding maps a change of a ClusterProfile to the Placements with
// overrides, or that divide replicas (by labels or free capacity), that have a
// Work on the cluster, or whose overrides fail on it.
func (r *Reconciler) placementsOverriding(workPlacement handler.MapFunc) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		keys := map[client.ObjectKey]bool{}
		for _, req := range r.failing.Requests(obj.GetName()) {
			keys[req.NamespacedName] = true
		}
		works := &workv1alpha1.WorkList{}
		if err := r.Client.List(ctx, works, client.InNamespace(names.ClusterNamespace(obj.GetName())), client.UnsafeDisableDeepCopy); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing the Works of a changed cluster", "cluster", obj.GetName())
			return nil
		}
		for i := range works.Items {
			for _, req := range workPlacement(ctx, &works.Items[i]) {
				p := &placementv1alpha1.Placement{}
				if err := r.Client.Get(ctx, req.NamespacedName, p); err == nil && (len(p.Spec.Overrides) > 0 || p.Spec.Scheduling.Replicas != nil) {
					keys[req.NamespacedName] = true
				}
			}
		}
		reqs := make([]reconcile.Request, 0, len(keys))
		for k := range keys {
			reqs = append(reqs, reconcile.Request{NamespacedName: k})
		}
		return reqs
	}
}
