// The record book: each Work's AppliedWork on the member, and in its status the
// objects the agent answers for (created, taken over, or waited for), with their
// UIDs and the hash of the manifest last applied.

package work

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// appliedWork returns the member's AppliedWork for the Work, creating it if needed.
func (r *Reconciler) appliedWork(ctx context.Context, work *workv1alpha1.Work) (*lodestarworkv1alpha1.AppliedWork, error) {
	applied := &lodestarworkv1alpha1.AppliedWork{}
	err := r.Member.Get(ctx, client.ObjectKey{Name: r.appliedWorkName(work)}, applied)
	if err == nil {
		if !applied.DeletionTimestamp.IsZero() {
			// Deleted by hand on the member. The finalizer keeps it, and with it the
			// objects that name it as their owner, while the Work lives.
			ctrl.LoggerFrom(ctx).Info("The AppliedWork was deleted on the member; it is kept while the Work exists")
			if r.Recorder != nil {
				r.Recorder.Eventf(work, nil, corev1.EventTypeWarning, lodestarworkv1alpha1.EventAppliedWorkDeleted, "Apply",
					"the AppliedWork %s was deleted on the member; it is kept (finalizer %s) while this Work exists, so the placed objects stay", applied.Name, lodestarworkv1alpha1.AppliedWorkFinalizer)
			}
		}
		if err := r.holdAppliedWork(ctx, applied, true); err != nil {
			return nil, err
		}
		return applied, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading AppliedWork: %w", err)
	}
	applied = &lodestarworkv1alpha1.AppliedWork{
		ObjectMeta: metav1.ObjectMeta{
			Name:   r.appliedWorkName(work),
			Labels: map[string]string{lodestarworkv1alpha1.HubLabel: r.HubID},
		},
		Spec: lodestarworkv1alpha1.AppliedWorkSpec{WorkNamespace: work.Namespace, WorkName: work.Name},
	}
	return applied, r.createAppliedWork(ctx, applied)
}

// appliedWorkName is the name of a Work's AppliedWork on the member.
func (r *Reconciler) appliedWorkName(work *workv1alpha1.Work) string {
	return names.AppliedWork(r.HubID, work.Namespace, work.Name)
}

// recordedDeletionPolicy is the deletion policy recorded on an AppliedWork.
func recordedDeletionPolicy(applied *lodestarworkv1alpha1.AppliedWork) lodestarworkv1alpha1.DeletionPolicy {
	if v, ok := applied.Annotations[lodestarworkv1alpha1.RecordedDeletionPolicyAnnotation]; ok {
		return lodestarworkv1alpha1.DeletionPolicy(v)
	}
	return lodestarworkv1alpha1.DeletionDelete
}

// recordedClaims is the claim policy an AppliedWork records (Retain when it
// records none).
func recordedClaims(applied *lodestarworkv1alpha1.AppliedWork) lodestarworkv1alpha1.ClaimPolicy {
	if applied.Annotations[lodestarworkv1alpha1.RecordedClaimsAnnotation] == string(lodestarworkv1alpha1.ClaimsDelete) {
		return lodestarworkv1alpha1.ClaimsDelete
	}
	return lodestarworkv1alpha1.ClaimsRetain
}

// workFor names the Work of an AppliedWork of the agent's hub namespace; false for
// another namespace's.
func (r *Reconciler) workFor(ctx context.Context, workNamespace, appliedName string) (string, bool) {
	if name, ok := strings.CutPrefix(appliedName, r.HubID+"."+workNamespace+"."); ok && names.AppliedWork(r.HubID, workNamespace, name) == appliedName {
		return name, true
	}
	if !names.IsShortened(appliedName) {
		return "", false
	}
	applied := &lodestarworkv1alpha1.AppliedWork{}
	if err := r.Member.Get(ctx, client.ObjectKey{Name: appliedName}, applied); err != nil || applied.Spec.WorkNamespace != workNamespace ||
		applied.Labels[lodestarworkv1alpha1.HubLabel] != r.HubID {
		return "", false
	}
	return applied.Spec.WorkName, true
}

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
			// An object taken over stays taken over while it is the same object.
			taken := out[i].TakenOver && out[i].UID == res.record.UID
			out[i] = *res.record
			out[i].TakenOver = out[i].TakenOver || taken
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

// recordIndex indexes the AppliedWork's records by object key.
func recordIndex(applied *lodestarworkv1alpha1.AppliedWork) map[string]*lodestarworkv1alpha1.AppliedResource {
	index := make(map[string]*lodestarworkv1alpha1.AppliedResource, len(applied.Status.AppliedResources))
	for i := range applied.Status.AppliedResources {
		index[recordKey(applied.Status.AppliedResources[i])] = &applied.Status.AppliedResources[i]
	}
	return index
}

// record is what the agent answers for after applying a manifest to live.
func record(live *unstructured.Unstructured, id workv1alpha1.ResourceIdentifier, hash string) *lodestarworkv1alpha1.AppliedResource {
	return &lodestarworkv1alpha1.AppliedResource{
		Group: id.Group, Version: id.Version, Kind: id.Kind, Resource: id.Resource,
		Namespace: live.GetNamespace(), Name: live.GetName(), UID: live.GetUID(), ManifestHash: hash,
	}
}

func equalRecords(a, b []lodestarworkv1alpha1.AppliedResource) bool {
	return slices.Equal(a, b)
}
