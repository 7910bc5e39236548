package workapply

import (
	"slices"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"
)

// RecordedDeletionPolicy is the deletion policy recorded on an AppliedWork.
func RecordedDeletionPolicy(applied *lodestarworkv1alpha1.AppliedWork) lodestarworkv1alpha1.DeletionPolicy {
	if v, ok := applied.Annotations[lodestarworkv1alpha1.RecordedDeletionPolicyAnnotation]; ok {
		return lodestarworkv1alpha1.DeletionPolicy(v)
	}
	return lodestarworkv1alpha1.DeletionDelete
}

// RecordedClaims is the claim policy an AppliedWork records (Retain when it
// records none).
func RecordedClaims(applied *lodestarworkv1alpha1.AppliedWork) lodestarworkv1alpha1.ClaimPolicy {
	if applied.Annotations[lodestarworkv1alpha1.RecordedClaimsAnnotation] == string(lodestarworkv1alpha1.ClaimsDelete) {
		return lodestarworkv1alpha1.ClaimsDelete
	}
	return lodestarworkv1alpha1.ClaimsRetain
}

// MergeRecords adds the objects applied now to the records of earlier applies,
// replacing a record of the same object.
func MergeRecords(prev []lodestarworkv1alpha1.AppliedResource, results []Result) []lodestarworkv1alpha1.AppliedResource {
	out := slices.Clone(prev)
	at := make(map[string]int, len(out))
	for i, rec := range out {
		at[RecordKey(rec)] = i
	}
	for _, res := range results {
		if res.Record == nil {
			continue
		}
		if i, ok := at[res.Key]; ok {
			// An object taken over stays taken over while it is the same object.
			taken := out[i].TakenOver && out[i].UID == res.Record.UID
			out[i] = *res.Record
			out[i].TakenOver = out[i].TakenOver || taken
		} else {
			at[res.Key] = len(out)
			out = append(out, *res.Record)
		}
	}
	return out
}

// DesiredKeys returns the objects the Work's manifests name. It returns nil when a
// manifest could not be identified: then nothing is known to be unwanted, and
// nothing is removed.
func DesiredKeys(results []Result) map[string]bool {
	keys := map[string]bool{}
	for _, res := range results {
		if res.Key == "" && res.Condition.Reason != lodestarworkv1alpha1.ReasonDuplicate {
			return nil
		}
		keys[res.Key] = true
	}
	return keys
}

// RecordKey is the object key of a record.
func RecordKey(rec lodestarworkv1alpha1.AppliedResource) string {
	return ObjectKey(rec.Group, rec.Kind, rec.Namespace, rec.Name)
}

// RecordIndex indexes the AppliedWork's records by object key.
func RecordIndex(applied *lodestarworkv1alpha1.AppliedWork) map[string]*lodestarworkv1alpha1.AppliedResource {
	index := make(map[string]*lodestarworkv1alpha1.AppliedResource, len(applied.Status.AppliedResources))
	for i := range applied.Status.AppliedResources {
		index[RecordKey(applied.Status.AppliedResources[i])] = &applied.Status.AppliedResources[i]
	}
	return index
}

// NewRecord is what the agent answers for after applying a manifest to live.
func NewRecord(live *unstructured.Unstructured, id workv1alpha1.ResourceIdentifier, hash string) *lodestarworkv1alpha1.AppliedResource {
	return &lodestarworkv1alpha1.AppliedResource{
		Group: id.Group, Version: id.Version, Kind: id.Kind, Resource: id.Resource,
		Namespace: live.GetNamespace(), Name: live.GetName(), UID: live.GetUID(), ManifestHash: hash,
	}
}

// EqualRecords tells whether two record lists are the same.
func EqualRecords(a, b []lodestarworkv1alpha1.AppliedResource) bool {
	return slices.Equal(a, b)
}
