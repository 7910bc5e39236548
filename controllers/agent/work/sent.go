package work

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/workapply"
)

// sentID identifies what applying m over existing sends: the manifest with the
// ignored fields' values existing has, and the AppliedWork as an owner.
func sentID(m manifest, existing *unstructured.Unstructured, applied *lodestarworkv1alpha1.AppliedWork) string {
	hash := m.hash
	if existing != nil && len(m.ignored) > 0 {
		hash = workapply.ManifestHash(workapply.WithIgnored(m.obj, existing, m.ignored))
	}
	return hash + "/" + string(applied.UID)
}
