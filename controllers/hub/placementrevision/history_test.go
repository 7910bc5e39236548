package placementrevision

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

func revisionsOf(sizes ...int) []placementv1alpha1.PlacementRevision {
	revs := make([]placementv1alpha1.PlacementRevision, len(sizes))
	for i, n := range sizes {
		revs[i].Spec.Manifests = []placementv1alpha1.RevisionManifest{{RawExtension: runtime.RawExtension{Raw: make([]byte, n)}}}
	}
	return revs
}

// The kept history is bounded by count and by bytes; the newest revision is
// always kept, however large.
func TestHistoryLength(t *testing.T) {
	g := NewWithT(t)
	const mib = 1 << 20
	g.Expect(historyLength(revisionsOf(10, 10, 10), 10)).To(Equal(3))
	g.Expect(historyLength(revisionsOf(10, 10, 10), 2)).To(Equal(2))
	g.Expect(historyLength(revisionsOf(3*mib, 3*mib, 3*mib, 3*mib), 10)).To(Equal(2), "8 MiB hold two of 3 MiB")
	g.Expect(historyLength(revisionsOf(9*mib, 1), 10)).To(Equal(1), "the newest stays")
	g.Expect(historyLength(nil, 10)).To(Equal(0))
}
