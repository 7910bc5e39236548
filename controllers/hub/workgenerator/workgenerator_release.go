package workgenerator

import (
	corev1 "k8s.io/api/core/v1"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/claims"
	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/names"
)

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
