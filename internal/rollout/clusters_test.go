package rollout

import (
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
)

// work is part i of n of a cluster's Works at rev since since, with the
// conditions its agent reported at its generation.
func work(i, n int, rev string, since time.Time, conds ...metav1.Condition) *workv1alpha1.Work {
	w := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: "ns.web-part" + strconv.Itoa(i), Namespace: "lodestar-cluster-a", Generation: 3,
		Labels: map[string]string{}, Annotations: map[string]string{
			placementv1alpha1.RevisionAnnotation: rev, placementv1alpha1.RevisionSinceAnnotation: since.UTC().Format(time.RFC3339)}}}
	if i > 0 {
		w.Labels[placementv1alpha1.WorkPartLabel] = strconv.Itoa(i)
	}
	if n > 1 {
		w.Annotations[placementv1alpha1.WorkPartsAnnotation] = strconv.Itoa(n)
	}
	for _, c := range conds {
		if c.ObservedGeneration == 0 {
			c.ObservedGeneration = 3
		}
		w.Status.Conditions = append(w.Status.Conditions, c)
	}
	return w
}

func cond(t string, s metav1.ConditionStatus, at time.Time, msg string) metav1.Condition {
	return metav1.Condition{Type: t, Status: s, LastTransitionTime: metav1.NewTime(at), Message: msg}
}

func TestClusterOf(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	applied := cond(lodestarworkv1alpha1.ConditionApplied, metav1.ConditionTrue, t0, "")
	available := func(at time.Time) metav1.Condition {
		return cond(lodestarworkv1alpha1.ConditionAvailable, metav1.ConditionTrue, at, "")
	}
	labels := map[string]string{"env": "prod"}
	for name, tc := range map[string]struct {
		parts    []*workv1alpha1.Work
		expected *Expectation
		want     Cluster
	}{
		"no Works": {
			want: Cluster{Name: "a", Labels: labels, Applied: metav1.ConditionUnknown, Available: metav1.ConditionUnknown},
		},
		"a write the cache does not show stands in": {
			parts:    []*workv1alpha1.Work{work(0, 1, "r1", t0, applied, available(t0))},
			expected: &Expectation{Revision: "r2", Since: t0.Add(time.Minute)},
			want: Cluster{Name: "a", Labels: labels, Revision: "r2", Since: t0.Add(time.Minute),
				Applied: metav1.ConditionUnknown, Available: metav1.ConditionUnknown},
		},
		"an expectation the Works show is theirs": {
			parts:    []*workv1alpha1.Work{work(0, 1, "r2", t0, applied, available(t0.Add(time.Second)))},
			expected: &Expectation{Revision: "r2", Since: t0.Add(time.Minute)},
			want: Cluster{Name: "a", Labels: labels, Revision: "r2", Since: t0,
				Applied: metav1.ConditionTrue, Available: metav1.ConditionTrue, AvailableSince: t0.Add(time.Second)},
		},
		"parts: the latest of their times": {
			parts: []*workv1alpha1.Work{work(0, 2, "r2", t0, applied, available(t0.Add(time.Second))),
				work(1, 2, "r2", t0.Add(2*time.Second), applied, available(t0.Add(3*time.Second)))},
			want: Cluster{Name: "a", Labels: labels, Revision: "r2", Since: t0.Add(2 * time.Second),
				Applied: metav1.ConditionTrue, Available: metav1.ConditionTrue, AvailableSince: t0.Add(3 * time.Second)},
		},
		"a part that failed to apply says why": {
			parts: []*workv1alpha1.Work{work(0, 2, "r2", t0, applied),
				work(1, 2, "r2", t0, cond(lodestarworkv1alpha1.ConditionApplied, metav1.ConditionFalse, t0, "manifest 0: denied"))},
			want: Cluster{Name: "a", Labels: labels, Revision: "r2", Since: t0,
				Applied: metav1.ConditionFalse, Available: metav1.ConditionUnknown, Message: "manifest 0: denied"},
		},
		"degraded wins the message": {
			parts: []*workv1alpha1.Work{work(0, 1, "r2", t0, applied,
				cond(lodestarworkv1alpha1.ConditionAvailable, metav1.ConditionFalse, t0, "not yet"),
				cond(lodestarworkv1alpha1.ConditionDegraded, metav1.ConditionTrue, t0, "crash looping"))},
			want: Cluster{Name: "a", Labels: labels, Revision: "r2", Since: t0,
				Applied: metav1.ConditionTrue, Available: metav1.ConditionFalse, Degraded: true, Message: "crash looping"},
		},
		"a report of an older generation counts as none": {
			parts: []*workv1alpha1.Work{work(0, 1, "r2", t0, metav1.Condition{Type: lodestarworkv1alpha1.ConditionApplied, Status: metav1.ConditionTrue, ObservedGeneration: 2})},
			want: Cluster{Name: "a", Labels: labels, Revision: "r2", Since: t0,
				Applied: metav1.ConditionUnknown, Available: metav1.ConditionUnknown},
		},
	} {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(ClusterOf("a", tc.parts, labels, tc.expected)).To(Equal(tc.want))
		})
	}
}

func TestLeavingOf(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	avail := cond(lodestarworkv1alpha1.ConditionAvailable, metav1.ConditionTrue, now, "")
	unmarked := work(0, 1, "r1", now, avail)
	g.Expect(LeavingOf("a", []*workv1alpha1.Work{unmarked}, false, now)).To(Equal(Leaving{Name: "a", Since: now, Available: true}))

	marked := work(0, 2, "r1", now, avail)
	marked.Annotations[placementv1alpha1.LeavingSinceAnnotation] = now.Add(-time.Minute).Format(time.RFC3339)
	other := work(1, 2, "r1", now)
	other.Annotations[placementv1alpha1.LeavingSinceAnnotation] = now.Add(-2 * time.Minute).Format(time.RFC3339)
	g.Expect(LeavingOf("a", []*workv1alpha1.Work{marked, other}, true, now)).To(Equal(
		Leaving{Name: "a", Since: now.Add(-2 * time.Minute), Available: false, Revoked: true}), "the earliest mark; not available while a part is not")
}
