package workgenerator

import (
	"context"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/claims"
	"github.com/lodestar-dev/lodestar/internal/clusterworks"
	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/patch"
	"github.com/lodestar-dev/lodestar/internal/reflection"
	"github.com/lodestar-dev/lodestar/internal/render"
)

// releaseReflected takes back the status reflection wrote on the hub objects of
// the Placement's current revision, so that a deleted Placement leaves no
// fleet status behind (`kubectl get deploy` reading 3/2 for ever): server-side
// apply of an empty status by the reflection's field owner removes what only it
// set. Objects whose status something else writes are left as they are, and so
// are those whose kind's rules refuse to undo it (a finished Job): an event
// says so, and the deletion goes on.
func (r *Reconciler) releaseReflected(ctx context.Context, placement *placementv1alpha1.Placement, revs []placementv1alpha1.PlacementRevision) error {
	i := slices.IndexFunc(revs, func(rv placementv1alpha1.PlacementRevision) bool { return rv.Name == placement.Status.Revision })
	if i < 0 {
		return nil
	}
	manifests, err := render.RevisionManifests(&revs[i].Spec)
	if err != nil {
		return err
	}
	for _, m := range manifests {
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(m.Raw); err != nil || obj.GetNamespace() != placement.Namespace {
			continue
		}
		hub := &unstructured.Unstructured{}
		hub.SetGroupVersionKind(obj.GroupVersionKind())
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(obj), hub); err != nil {
			if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
				continue
			}
			return err
		}
		if !slices.ContainsFunc(hub.GetManagedFields(), func(mf metav1.ManagedFieldsEntry) bool {
			return mf.Subresource == "status" && mf.Manager == reflection.FieldOwner
		}) {
			continue
		}
		st, _, _ := unstructured.NestedMap(hub.Object, "status")
		if why := reflection.Kept(obj.GroupVersionKind().GroupKind(), st); why != "" {
			r.statusKept(placement, obj, why)
			continue
		}
		empty := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{}}}
		empty.SetGroupVersionKind(obj.GroupVersionKind())
		empty.SetNamespace(obj.GetNamespace())
		empty.SetName(obj.GetName())
		if err := patch.ApplyStatus(ctx, r.Client, empty, reflection.FieldOwner); apierrors.IsInvalid(err) {
			// A kind's own rules refuse: retrying would refuse again, and
			// the Placement's deletion would wait for ever.
			r.statusKept(placement, obj, "the API server refuses to take it back: "+err.Error())
		} else if err != nil {
			return err
		}
	}
	return nil
}

// statusKept says, in a Normal event StatusKept on the Placement being
// deleted, that a hub object keeps the status reflection wrote, and why.
func (r *Reconciler) statusKept(placement *placementv1alpha1.Placement, obj *unstructured.Unstructured, why string) {
	r.Recorder.Eventf(placement, nil, corev1.EventTypeNormal, placementv1alpha1.ReasonStatusKept, "Release",
		"%s %s/%s keeps the status its clusters reported: %s", obj.GetKind(), obj.GetNamespace(), obj.GetName(), message.Truncate(why, 512))
}

// noteRetainedClaims records, when a Work of a cluster the Placement leaves (or
// of a Placement being deleted) goes, which of its claims the cluster keeps with
// their data (applyStrategy.claims: Retain, the default): the placed claims and
// those placed StatefulSets made there, in a Normal event ClaimsRetained on the
// Placement, once per Work deletion. It returns them, as namespace/name.
func (r *Reconciler) noteRetainedClaims(placement *placementv1alpha1.Placement, w *workv1alpha1.Work) []string {
	if !w.DeletionTimestamp.IsZero() {
		return nil // noted when it was deleted
	}
	if strategy, err := clusterworks.Strategy(w); err != nil || strategy.Claims == lodestarworkv1alpha1.ClaimsDelete {
		return nil
	}
	var kept []string
	for _, id := range clusterworks.ManifestIDs(w) {
		if id.Group == "" && id.Kind == "PersistentVolumeClaim" {
			kept = append(kept, id.Namespace+"/"+id.Name)
		}
	}
	for _, wl := range claims.OfWorks([]*workv1alpha1.Work{w}) {
		if wl.Kind == "PersistentVolumeClaim" {
			continue // listed above, reported or not
		}
		for _, c := range wl.Claims {
			kept = append(kept, wl.Namespace+"/"+c.Name)
		}
	}
	if len(kept) == 0 {
		return nil
	}
	cluster, _ := names.ClusterFromNamespace(w.Namespace)
	r.Recorder.Eventf(placement, nil, corev1.EventTypeNormal, placementv1alpha1.ReasonClaimsRetained, "Remove",
		"cluster %s keeps the claims %s with their data (applyStrategy.claims: Retain); delete them there when they are no longer needed",
		cluster, message.List(kept, 10, ", "))
	return kept
}

// maxRetained bounds status.rollout.retainedClaims, and the claims of an entry.
const maxRetained = 20

// retainedClaims is status.rollout.retainedClaims: what the clusters removed
// now kept, then what was recorded before, without the clusters the Placement
// chooses again, the latest maxRetained.
func retainedClaims(previous []placementv1alpha1.RetainedClaims, now map[string][]string, chosen []string, at time.Time) []placementv1alpha1.RetainedClaims {
	var out []placementv1alpha1.RetainedClaims
	for _, cluster := range slices.Sorted(maps.Keys(now)) {
		kept := slices.Clone(now[cluster])
		slices.Sort(kept)
		out = append(out, placementv1alpha1.RetainedClaims{Cluster: cluster, Claims: kept[:min(len(kept), maxRetained)], Time: metav1.NewTime(at.Truncate(time.Second))})
	}
	for _, rc := range previous {
		if _, ok := now[rc.Cluster]; ok || slices.Contains(chosen, rc.Cluster) {
			continue
		}
		out = append(out, rc)
	}
	return out[:min(len(out), maxRetained)]
}
