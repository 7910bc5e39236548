package placementstatus

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/patch"
	"github.com/lodestar-dev/lodestar/internal/reflection"
	"github.com/lodestar-dev/lodestar/internal/render"
)

// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=placements,verbs=update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// holdReflected keeps a Placement that reflects status with the reflection
// finalizer, and, when it is deleted, takes back the status reflection wrote
// on the hub objects of its current revision before letting it go (its
// revisions stay until the Placement is gone); a Placement that stops
// reflecting is let go as it is. It tells whether the Placement is being
// deleted: nothing more is reported then.
func (r *Reconciler) holdReflected(ctx context.Context, placement *placementv1alpha1.Placement) (bool, error) {
	deleting := !placement.DeletionTimestamp.IsZero()
	reflects := placement.Spec.Reporting.Reflection == placementv1alpha1.ReflectionAggregate
	held := controllerutil.ContainsFinalizer(placement, placementv1alpha1.ReflectionFinalizer)
	switch {
	case deleting && held:
		if err := r.releaseReflected(ctx, placement); err != nil {
			return true, err
		}
		return true, patch.SetFinalizer(ctx, r.Client, placement, placementv1alpha1.ReflectionFinalizer, false)
	case deleting:
		return true, nil
	}
	return false, patch.SetFinalizer(ctx, r.Client, placement, placementv1alpha1.ReflectionFinalizer, reflects)
}

// releaseReflected takes back the status reflection wrote on the hub objects of
// the Placement's current revision (reflection.Release), so that a deleted
// Placement leaves no fleet status behind; a Normal event StatusKept says
// which keep it, and why, and the deletion goes on.
func (r *Reconciler) releaseReflected(ctx context.Context, placement *placementv1alpha1.Placement) error {
	revs, err := lookup.Revisions(ctx, r.Client, placement)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(revs, func(rv placementv1alpha1.PlacementRevision) bool { return rv.Name == placement.Status.Revision })
	if i < 0 {
		return nil
	}
	manifests, err := render.RevisionManifests(&revs[i].Spec)
	if err != nil {
		return err
	}
	kept, err := reflection.Release(ctx, r.Client, placement.Namespace, manifests)
	for _, k := range kept {
		r.Recorder.Eventf(placement, nil, corev1.EventTypeNormal, placementv1alpha1.ReasonStatusKept, "Release",
			"%s %s/%s keeps the status its clusters reported: %s", k.Object.GetKind(), k.Object.GetNamespace(), k.Object.GetName(), message.Truncate(k.Why, 512))
	}
	return err
}
