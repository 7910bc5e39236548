package clusterworks

import (
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
)

// part is part i of n of a cluster's Works at revision rev, whose agent reported
// its Applied and Available conditions as given (empty: not reported).
func part(cluster string, i, n int, rev string, applied, available metav1.ConditionStatus) workv1alpha1.Work {
	w := workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{
		Name: "ns.web-part" + strconv.Itoa(i), Namespace: "lodestar-cluster-" + cluster, Generation: 2,
		Labels: map[string]string{}, Annotations: map[string]string{placementv1alpha1.RevisionAnnotation: rev},
	}}
	if i > 0 {
		w.Labels[placementv1alpha1.WorkPartLabel] = strconv.Itoa(i)
	}
	if n > 1 {
		w.Annotations[placementv1alpha1.WorkPartsAnnotation] = strconv.Itoa(n)
	}
	for t, s := range map[string]metav1.ConditionStatus{lodestarworkv1alpha1.ConditionApplied: applied, lodestarworkv1alpha1.ConditionAvailable: available} {
		if s != "" {
			w.Status.Conditions = append(w.Status.Conditions, metav1.Condition{Type: t, Status: s, ObservedGeneration: 2})
		}
	}
	return w
}

func TestByClusterInPartOrder(t *testing.T) {
	g := NewWithT(t)
	works := []workv1alpha1.Work{part("b", 0, 1, "r", "", ""), part("a", 2, 3, "r", "", ""), part("a", 0, 3, "r", "", ""), part("a", 1, 3, "r", "", "")}
	works = append(works, workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "tenant"}})
	by := ByCluster(works)
	g.Expect(by).To(HaveLen(2), "a Work outside a cluster namespace is no cluster's")
	g.Expect(by["a"]).To(HaveLen(3))
	for i, w := range by["a"] {
		g.Expect(Part(w)).To(Equal(i))
	}
}

func TestRevisionAndConditionsOverParts(t *testing.T) {
	T, F, U := metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown
	ptrs := func(ws ...workv1alpha1.Work) []*workv1alpha1.Work {
		out := make([]*workv1alpha1.Work, len(ws))
		for i := range ws {
			out[i] = &ws[i]
		}
		return out
	}
	for name, tc := range map[string]struct {
		parts              []*workv1alpha1.Work
		rev                string
		complete           bool
		applied, available metav1.ConditionStatus
	}{
		"no Works": {parts: nil, rev: "", complete: false, applied: U, available: U},
		"one Work, reported": {parts: ptrs(part("a", 0, 1, "r1", T, T)),
			rev: "r1", complete: true, applied: T, available: T},
		"one Work, not reported": {parts: ptrs(part("a", 0, 1, "r1", "", "")),
			rev: "r1", complete: true, applied: U, available: U},
		"two parts, both available": {parts: ptrs(part("a", 0, 2, "r2", T, T), part("a", 1, 2, "r2", T, T)),
			rev: "r2", complete: true, applied: T, available: T},
		"two parts, one not available": {parts: ptrs(part("a", 0, 2, "r2", T, T), part("a", 1, 2, "r2", T, F)),
			rev: "r2", complete: true, applied: T, available: F},
		"a part missing": {parts: ptrs(part("a", 0, 2, "r2", T, T)),
			rev: "r2", complete: false, applied: U, available: U},
		"parts at two revisions": {parts: ptrs(part("a", 0, 2, "r2", T, T), part("a", 1, 2, "r1", T, T)),
			rev: "r2", complete: false, applied: U, available: U},
		"a part beyond the revision's, on its way out": {parts: ptrs(part("a", 0, 1, "r3", T, T), part("a", 1, 2, "r2", F, F)),
			rev: "r3", complete: true, applied: T, available: T},
		"a part failed among many": {parts: ptrs(part("a", 0, 3, "r2", T, T), part("a", 1, 3, "r2", F, U), part("a", 2, 3, "r2", U, U)),
			rev: "r2", complete: true, applied: F, available: U},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			rev, complete := Revision(tc.parts)
			g.Expect(rev).To(Equal(tc.rev))
			g.Expect(complete).To(Equal(tc.complete))
			g.Expect(Applied(tc.parts)).To(Equal(tc.applied))
			g.Expect(Availability(tc.parts)).To(Equal(tc.available))
		})
	}
}

func TestDeletedPartIsNotCurrent(t *testing.T) {
	g := NewWithT(t)
	w := part("a", 0, 1, "r1", metav1.ConditionTrue, metav1.ConditionTrue)
	now := metav1.Now()
	w.DeletionTimestamp = &now
	_, complete := Revision([]*workv1alpha1.Work{&w})
	g.Expect(complete).To(BeFalse())
	g.Expect(WorkAvailability(&w)).To(Equal(metav1.ConditionUnknown))
}
