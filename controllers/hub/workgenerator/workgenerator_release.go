package workgenerator

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/claims"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/reflection"
	"github.com/lodestar-dev/lodestar/internal/render"
)

// releaseReflected takes back the status reflection wrote on the hub objects of
// the Placement's current revision (reflection.Release); a Normal event
// StatusKept says which keep it, and why, and the deletion goes on.
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

// noteRetainedClaims records, when a Work of a cluster the Placement leaves (or
// of a Placement being deleted) goes, which of its claims the cluster keeps with
// their data (claims.RetainedBy), in a Normal event ClaimsRetained on the
// Placement, once per Work deletion. It returns them, as namespace/name.
func (r *Reconciler) noteRetainedClaims(placement *placementv1alpha1.Placement, w *workv1alpha1.Work) []string {
	if !w.DeletionTimestamp.IsZero() {
		return nil // noted when it was deleted
	}
	kept := claims.RetainedBy(w)
	if len(kept) == 0 {
		return nil
	}
	cluster, _ := names.ClusterFromNamespace(w.Namespace)
	r.Recorder.Eventf(placement, nil, corev1.EventTypeNormal, placementv1alpha1.ReasonClaimsRetained, "Remove",
		"cluster %s keeps the claims %s with their data (applyStrategy.claims: Retain); delete them there when they are no longer needed",
		cluster, message.List(kept, 10, ", "))
	return kept
}
