package workshape

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
)

// holds agrees with comparing merged: a Work holds what is desired exactly when
// merging changes nothing the work generator manages.
func TestHoldsAgreesWithMerged(t *testing.T) {
	g := NewWithT(t)
	work := func(labels, annotations map[string]string, raw ...string) *workv1alpha1.Work {
		w := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: "w", Labels: labels, Annotations: annotations}}
		for _, r := range raw {
			w.Spec.Workload.Manifests = append(w.Spec.Workload.Manifests, workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(r)}})
		}
		return w
	}
	rev, strategy := placementv1alpha1.RevisionAnnotation, lodestarworkv1alpha1.ApplyStrategyAnnotation
	desired := work(map[string]string{"a": "1"}, map[string]string{rev: "h1", strategy: "s"}, `{"x":1}`)
	existing := work(map[string]string{"a": "1", "theirs": "x"}, map[string]string{rev: "h1", strategy: "s", "theirs": "y"}, `{"x":1}`)
	existing.Status.Conditions = []metav1.Condition{{Type: "Applied", Status: metav1.ConditionTrue}}
	g.Expect(Holds(existing, desired)).To(BeTrue(), "others' labels, annotations and the status are not the generator's")

	for name, changed := range map[string]*workv1alpha1.Work{
		"a manifest":                work(map[string]string{"a": "1"}, map[string]string{rev: "h1"}, `{"x":2}`),
		"one more manifest":         work(map[string]string{"a": "1"}, map[string]string{rev: "h1"}, `{"x":1}`, `{"y":1}`),
		"a label":                   work(map[string]string{"a": "2"}, map[string]string{rev: "h1"}, `{"x":1}`),
		"a managed annotation":      work(map[string]string{"a": "1"}, map[string]string{rev: "h2"}, `{"x":1}`),
		"a managed annotation gone": work(map[string]string{"a": "1"}, nil, `{"x":1}`),
		"a part label":              work(map[string]string{"a": "1", placementv1alpha1.WorkPartLabel: "1"}, map[string]string{rev: "h1"}, `{"x":1}`),
	} {
		g.Expect(Holds(existing, changed)).To(BeFalse(), name)
		g.Expect(Holds(Merged(existing, changed), changed)).To(BeTrue(), name+", once merged")
	}
	parted := work(map[string]string{"a": "1", placementv1alpha1.WorkPartLabel: "1"}, map[string]string{rev: "h1", strategy: "s"}, `{"x":1}`)
	g.Expect(Holds(parted, desired)).To(BeFalse(), "a part label desired no more")
}
