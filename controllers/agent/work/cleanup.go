package work

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
)

// mergeRecords adds the objects applied now to the records of earlier applies,
// replacing a record of the same object.
func mergeRecords(prev []lodestarworkv1alpha1.AppliedResource, results []result) []lodestarworkv1alpha1.AppliedResource {
	out := slices.Clone(prev)
	at := make(map[string]int, len(out))
	for i, rec := range out {
		at[recordKey(rec)] = i
	}
	for _, res := range results {
		if res.record == nil {
			continue
		}
		if i, ok := at[res.key]; ok {
			out[i] = *res.record
		} else {
			at[res.key] = len(out)
			out = append(out, *res.record)
		}
	}
	return out
}

// desiredKeys returns the objects the Work's manifests name. It returns nil when a
// manifest could not be identified: then nothing is known to be unwanted, and
// nothing is removed.
func desiredKeys(results []result) map[string]bool {
	keys := map[string]bool{}
	for _, res := range results {
		if res.key == "" && res.condition.Reason != lodestarworkv1alpha1.ReasonDuplicate {
			return nil
		}
		keys[res.key] = true
	}
	return keys
}

func recordKey(rec lodestarworkv1alpha1.AppliedResource) string {
	return objectKey(rec.Group, rec.Kind, rec.Namespace, rec.Name)
}

// removeStale deletes (or, with orphan, releases) the recorded objects that
// desired does not name and returns the records still to be answered for, and
// what holds the deletion of those that are being deleted. A nil desired means the
// wanted objects are not known, and nothing is removed. An object is deleted only
// while it has the recorded UID and the AppliedWork among its owners; one that
// other owners also hold is released instead of deleted.
func (r *Reconciler) removeStale(ctx context.Context, records []lodestarworkv1alpha1.AppliedResource, desired map[string]bool, applied *lodestarworkv1alpha1.AppliedWork, orphan bool) ([]lodestarworkv1alpha1.AppliedResource, []string, error) {
	if desired == nil {
		return records, nil, nil
	}
	kept := make([]lodestarworkv1alpha1.AppliedResource, 0, len(records))
	var blocked []string
	for i, rec := range records {
		if desired[recordKey(rec)] {
			kept = append(kept, rec)
			continue
		}
		gone, holder, err := r.removeOne(ctx, rec, applied, orphan)
		if err != nil {
			return append(kept, records[i:]...), blocked, err
		}
		if !gone {
			kept = append(kept, rec)
			blocked = append(blocked, holder)
		}
	}
	if len(blocked) > 0 {
		return kept, blocked, fmt.Errorf("waiting for %d objects to be deleted from the member", len(blocked))
	}
	return kept, nil, nil
}

// removeOne deletes or releases one recorded object and tells whether the agent is
// done with it; if not, what it waits for. With orphan it only releases.
func (r *Reconciler) removeOne(ctx context.Context, rec lodestarworkv1alpha1.AppliedResource, applied *lodestarworkv1alpha1.AppliedWork, orphan bool) (bool, string, error) {
	ref := klog.KRef(rec.Namespace, rec.Name)
	log := ctrl.LoggerFrom(ctx).WithValues("kind", rec.Kind, "object", ref)
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(metav1.GroupVersion{Group: rec.Group, Version: rec.Version}.String())
	obj.SetKind(rec.Kind)
	err := r.Member.Get(ctx, client.ObjectKey{Namespace: rec.Namespace, Name: rec.Name}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return true, "", nil
	case err != nil:
		return false, "", fmt.Errorf("reading %s %s: %w", rec.Kind, ref, err)
	case obj.GetUID() != rec.UID:
		log.Info("Not deleting an object recreated by someone else", "uid", obj.GetUID())
		return true, "", nil
	case !ownedBy(obj, applied) && otherWork(obj) != "":
		log.Info("Not deleting an object that another Work placed since")
		return true, "", nil
	case !obj.GetDeletionTimestamp().IsZero() && !orphan:
		return false, deletionHolder(rec, obj), nil
	}

	if orphan || len(obj.GetOwnerReferences()) > 1 {
		if ownedBy(obj, applied) {
			base := obj.DeepCopy()
			refs := slices.DeleteFunc(obj.GetOwnerReferences(), func(ref metav1.OwnerReference) bool { return ref.UID == applied.UID })
			obj.SetOwnerReferences(refs)
			if err := r.Member.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
				return false, "", fmt.Errorf("releasing %s %s: %w", rec.Kind, ref, err)
			}
		}
		if orphan {
			log.Info("Orphaned an object: it stays on the member, released by the Work")
		} else {
			log.Info("Released an object that other owners still hold")
		}
		return true, "", nil
	}

	uid := rec.UID
	err = r.Member.Delete(ctx, obj, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return true, "", nil // Gone, or replaced by another object with the same name.
	}
	if err != nil {
		return false, "", fmt.Errorf("deleting %s %s: %w", rec.Kind, ref, err)
	}
	log.Info("Deleted an object the Work no longer places")
	err = r.Member.Get(ctx, client.ObjectKey{Namespace: rec.Namespace, Name: rec.Name}, obj)
	if apierrors.IsNotFound(err) || (err == nil && obj.GetUID() != rec.UID) {
		return true, "", nil
	}
	return false, deletionHolder(rec, obj), nil
}

// deletionHolder says what an object being deleted waits for.
func deletionHolder(rec lodestarworkv1alpha1.AppliedResource, obj *unstructured.Unstructured) string {
	what := rec.Kind + " " + klog.KRef(rec.Namespace, rec.Name).String()
	if f := obj.GetFinalizers(); len(f) > 0 {
		return what + " (finalizers " + strings.Join(f, ", ") + ")"
	}
	return what + " (being deleted)"
}

func equalRecords(a, b []lodestarworkv1alpha1.AppliedResource) bool {
	return slices.Equal(a, b)
}
