package member

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lodestar-dev/lodestar/internal/workapply"
)

// written is what the agent last applied to an object, and the object as the
// Apply left it: enough to tell from a later read that applying the same again
// would change nothing.
type written struct {
	uid types.UID
	// sent identifies what was applied (sentID).
	sent string
	// resourceVersion, generation and meta are the object's after the apply.
	resourceVersion string
	generation      int64
	meta            string
}

// UnchangedSinceWritten tells whether applying sent to existing would write
// nothing, so that the apply can be left out: the agent applied the same to
// this very object, and the object has not changed since (the same
// resourceVersion), or only its status has. The API server moves an object's
// generation with every change of its spec (of everything but metadata and
// status), so a status change (a Deployment's pods becoming ready), which moves
// neither its generation nor its metadata, needs a fresh read for readiness,
// not a write. For kinds without a generation (ConfigMaps) any change counts.
func (m *Member) UnchangedSinceWritten(key, sent string, existing *unstructured.Unstructured) bool {
	v, ok := m.written.Load(key)
	if !ok {
		return false
	}
	w := v.(written)
	if w.uid != existing.GetUID() || w.sent != sent {
		return false
	}
	if w.resourceVersion == existing.GetResourceVersion() {
		return true
	}
	return existing.GetGeneration() != 0 && w.generation == existing.GetGeneration() && w.meta == metaDigest(existing)
}

// RememberWritten records that sent was applied to the object key, which the
// Apply left as live.
func (m *Member) RememberWritten(key, sent string, live *unstructured.Unstructured) {
	if live.GetUID() == "" || live.GetResourceVersion() == "" {
		m.written.Delete(key)
		return
	}
	m.written.Store(key, written{uid: live.GetUID(), sent: sent, resourceVersion: live.GetResourceVersion(),
		generation: live.GetGeneration(), meta: metaDigest(live)})
}

// ForgetWritten drops what was recorded for the object key (deleted by the agent).
func (m *Member) ForgetWritten(key string) { m.written.Delete(key) }

// metaDigest identifies the metadata an apply may set or another writer may
// change without moving the generation: labels, annotations, owners,
// finalizers, and the fields the agent owns (without their time).
func metaDigest(obj *unstructured.Unstructured) string {
	var own []any
	for _, f := range obj.GetManagedFields() {
		if f.Manager == FieldManager && f.Subresource == "" {
			own = append(own, map[string]any{"operation": string(f.Operation), "apiVersion": f.APIVersion, "fields": f.FieldsV1})
		}
	}
	return workapply.ManifestHash(&unstructured.Unstructured{Object: map[string]any{
		"labels": obj.GetLabels(), "annotations": obj.GetAnnotations(), "owners": obj.GetOwnerReferences(),
		"finalizers": obj.GetFinalizers(), "managed": own,
	}})
}
