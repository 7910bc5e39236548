package workapply

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lodestar-dev/lodestar/internal/diff"
)

// ApplyPriority orders Namespaces (0) and CRDs (1) before everything else (2).
func ApplyPriority(raw []byte) int {
	u := &unstructured.Unstructured{}
	if u.UnmarshalJSON(raw) != nil {
		return 2
	}
	switch u.GroupVersionKind().GroupKind() {
	case NamespaceKind:
		return 0
	case CRDKind:
		return 1
	}
	return 2
}

// RetainClaims makes a StatefulSet keep its claims on the member when it is
// deleted or scaled down (Claims: Retain): its persistentVolumeClaimRetentionPolicy
// is Retain whatever the manifest says.
func RetainClaims(gvk schema.GroupVersionKind, obj *unstructured.Unstructured) {
	if gvk.Group != "apps" || gvk.Kind != "StatefulSet" {
		return
	}
	policy, found, _ := unstructured.NestedStringMap(obj.Object, "spec", "persistentVolumeClaimRetentionPolicy")
	if !found {
		return // Retain is Kubernetes' default.
	}
	for _, when := range []string{"whenDeleted", "whenScaled"} {
		if policy[when] == "Delete" {
			policy[when] = "Retain"
		}
	}
	_ = unstructured.SetNestedStringMap(obj.Object, policy, "spec", "persistentVolumeClaimRetentionPolicy")
}

// Strip removes what must not be sent with an apply.
func Strip(obj *unstructured.Unstructured) {
	delete(obj.Object, "status")
	for _, f := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink"} {
		unstructured.RemoveNestedField(obj.Object, "metadata", f)
	}
}

// ManifestHash identifies a manifest's content (after strip): 128 bits of SHA-256
// of its JSON, whose map keys encoding/json sorts.
func ManifestHash(obj *unstructured.Unstructured) string {
	b, err := json.Marshal(obj.Object)
	if err != nil {
		return "" // Cannot happen for a decoded manifest; an empty hash never matches.
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// RunsOnce tells whether objects of a kind do their job once: a Job that finished
// and was removed (by its TTL, say) must not be created again, which would run it
// again, while its manifest is the same.
func RunsOnce(gk schema.GroupKind) bool { return gk == JobKind }

// WithIgnored returns obj with the ignored fields set to existing's values (or
// removed when existing has none), so that applying it leaves them as they are
// on the member. Written with at, a member controller's change made between the
// read and the write is never set back.
func WithIgnored(obj, existing *unstructured.Unstructured, ignored []diff.Pointer) *unstructured.Unstructured {
	if existing == nil || len(ignored) == 0 {
		return obj
	}
	out := obj.DeepCopy()
	for _, p := range ignored {
		if v, ok := p.Get(existing.Object); ok {
			p.Set(out.Object, runtime.DeepCopyJSONValue(v))
		} else {
			p.Remove(out.Object)
		}
	}
	return out
}

// OtherWork names another AppliedWork that owns obj, if any.
func OtherWork(obj *unstructured.Unstructured) string {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Kind == "AppliedWork" && ref.APIVersion == lodestarworkv1alpha1.GroupVersion.String() {
			return ref.Name
		}
	}
	return ""
}

// OwnedBy tells whether obj carries the AppliedWork as an owner.
func OwnedBy(obj client.Object, applied *lodestarworkv1alpha1.AppliedWork) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == applied.UID {
			return true
		}
	}
	return false
}

// ObjectKey identifies an object among a Work's: group/kind/namespace/name.
func ObjectKey(group, kind, namespace, name string) string {
	return group + "/" + kind + "/" + namespace + "/" + name
}

// OwnerReference is the owner reference that marks an object the AppliedWork's.
func OwnerReference(applied *lodestarworkv1alpha1.AppliedWork) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: lodestarworkv1alpha1.GroupVersion.String(),
		Kind:       "AppliedWork",
		Name:       applied.Name,
		UID:        applied.UID,
		// Not a controller, and no blocking: the agent deletes what it created itself.
		Controller:         ptr.To(false),
		BlockOwnerDeletion: ptr.To(false),
	}
}

// At returns a copy of obj that is written only over existing: its
// resourceVersion, and its UID, without which an apply to an object deleted
// since it was read would create it again (a finished Job deleted on the
// member would run again). The API server refuses such a write as a conflict.
func At(obj, existing *unstructured.Unstructured) *unstructured.Unstructured {
	out := obj.DeepCopy()
	out.SetResourceVersion(existing.GetResourceVersion())
	out.SetUID(existing.GetUID())
	return out
}
