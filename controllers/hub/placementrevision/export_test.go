package placementrevision

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// PlacementsSelecting is the revision maker's map of a change of an object of
// kind gvk to the Placements it concerns, for the tests.
func (r *Reconciler) PlacementsSelecting(ctx context.Context, gvk schema.GroupVersionKind, obj client.Object) []reconcile.Request {
	return r.placementsSelecting(gvk)(ctx, obj)
}
