package workapply

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
)

func TestDecide(t *testing.T) {
	strategy := func(mutate func(*lodestarworkv1alpha1.ApplyStrategy)) lodestarworkv1alpha1.ApplyStrategy {
		s := lodestarworkv1alpha1.ApplyStrategy{}.Defaulted()
		if mutate != nil {
			mutate(&s)
		}
		return s
	}
	createOnly := strategy(func(s *lodestarworkv1alpha1.ApplyStrategy) { s.Type = lodestarworkv1alpha1.ApplyCreateOnly })
	reportOnly := strategy(func(s *lodestarworkv1alpha1.ApplyStrategy) { s.Type = lodestarworkv1alpha1.ApplyReportOnly })
	reportDrift := strategy(func(s *lodestarworkv1alpha1.ApplyStrategy) { s.WhenDrifted = lodestarworkv1alpha1.DriftReport })
	never := strategy(func(s *lodestarworkv1alpha1.ApplyStrategy) { s.Takeover = lodestarworkv1alpha1.TakeoverNever })
	ifNoDiff := strategy(func(s *lodestarworkv1alpha1.ApplyStrategy) { s.Takeover = lodestarworkv1alpha1.TakeoverIfNoDiff })
	always := strategy(func(s *lodestarworkv1alpha1.ApplyStrategy) { s.Takeover = lodestarworkv1alpha1.TakeoverAlways })
	defaults := strategy(nil)

	for _, tc := range []struct {
		name string
		s    Situation
		want Action
	}{
		{"nothing on the member: create", Situation{Owner: OwnerNone, Strategy: defaults}, ActCreate},
		{"nothing on the member, a new manifest: create", Situation{Owner: OwnerNone, Strategy: reportDrift}, ActCreate},
		{"created from this manifest and deleted on the member: create again", Situation{Owner: OwnerNone, SameManifest: true, Strategy: defaults}, ActRecreate},
		{"deleted on the member, CreateOnly: create again", Situation{Owner: OwnerNone, SameManifest: true, Strategy: createOnly}, ActRecreate},
		{"deleted on the member, whenDrifted Report: leave it deleted", Situation{Owner: OwnerNone, SameManifest: true, Strategy: reportDrift}, ActLeaveDeleted},
		{"a Job that ran and is gone: not run again", Situation{Owner: OwnerNone, SameManifest: true, RunsOnce: true, Strategy: defaults}, ActRanOnce},
		{"a Job gone, whenDrifted Report: still ran once", Situation{Owner: OwnerNone, SameManifest: true, RunsOnce: true, Strategy: reportDrift}, ActRanOnce},
		{"a Job whose manifest changed: a new run", Situation{Owner: OwnerNone, RunsOnce: true, Strategy: defaults}, ActCreate},
		{"ReportOnly and nothing there", Situation{Owner: OwnerNone, Strategy: reportOnly}, ActReportMissing},
		{"ReportOnly and nothing there, recorded before", Situation{Owner: OwnerNone, SameManifest: true, Strategy: reportOnly}, ActReportMissing},
		{"ReportOnly and there: compare", Situation{Owner: OwnerForeign, Strategy: reportOnly}, ActReport},
		{"ReportOnly and placed by this Work: compare", Situation{Owner: OwnerThisWork, Strategy: reportOnly}, ActReport},
		{"placed by this Work: update", Situation{Owner: OwnerThisWork, SameManifest: true, Strategy: defaults}, ActUpdate},
		{"placed by this Work, whenDrifted Report: update (reports drift)", Situation{Owner: OwnerThisWork, SameManifest: true, Strategy: reportDrift}, ActUpdate},
		{"placed by this Work, CreateOnly: keep", Situation{Owner: OwnerThisWork, Strategy: createOnly}, ActKeep},
		{"placed by this Work and being deleted: wait", Situation{Owner: OwnerThisWork, BeingDeleted: true, Strategy: defaults}, ActWaitForDeletion},
		{"placed by this Work, being deleted, CreateOnly: wait", Situation{Owner: OwnerThisWork, BeingDeleted: true, Strategy: createOnly}, ActWaitForDeletion},
		{"placed by another Work: conflict, wait for it", Situation{Owner: OwnerOtherWork, Strategy: always}, ActConflictOtherWork},
		{"placed by another Work, ReportOnly: still the other Work's", Situation{Owner: OwnerOtherWork, Strategy: reportOnly}, ActConflictOtherWork},
		{"placed by nobody, takeover Never: conflict", Situation{Owner: OwnerForeign, Strategy: never}, ActConflictNotOwned},
		{"placed by nobody, takeover IfNoDiff: take over (after comparing)", Situation{Owner: OwnerForeign, Strategy: ifNoDiff}, ActTakeOver},
		{"placed by nobody, takeover Always: take over", Situation{Owner: OwnerForeign, Strategy: always}, ActTakeOver},
		{"placed by nobody, CreateOnly, takeover Always: take over (adopt)", Situation{Owner: OwnerForeign, Strategy: func() lodestarworkv1alpha1.ApplyStrategy {
			s := createOnly
			s.Takeover = lodestarworkv1alpha1.TakeoverAlways
			return s
		}()}, ActTakeOver},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(Decide(tc.s)).To(Equal(tc.want), "got %s, want %s", Decide(tc.s), tc.want)
		})
	}
}

func TestOwnership(t *testing.T) {
	g := NewWithT(t)
	applied := &lodestarworkv1alpha1.AppliedWork{ObjectMeta: metav1.ObjectMeta{Name: "w", UID: "applied-uid"}}
	obj := func(uid types.UID, owners ...metav1.OwnerReference) *unstructured.Unstructured {
		u := deployment(1, "x")
		u.SetUID(uid)
		u.SetOwnerReferences(owners)
		return u
	}
	rec := &lodestarworkv1alpha1.AppliedResource{UID: "obj-uid"}
	other := metav1.OwnerReference{APIVersion: lodestarworkv1alpha1.GroupVersion.String(), Kind: "AppliedWork", Name: "other", UID: "other-uid"}

	g.Expect(Ownership(nil, applied, rec)).To(Equal(OwnerNone))
	g.Expect(Ownership(obj("obj-uid", OwnerReference(applied)), applied, nil)).To(Equal(OwnerThisWork))
	g.Expect(Ownership(obj("obj-uid"), applied, rec)).To(Equal(OwnerThisWork), "recorded UID, owner reference lost")
	g.Expect(Ownership(obj("new-uid"), applied, rec)).To(Equal(OwnerForeign), "recreated by someone else")
	g.Expect(Ownership(obj("obj-uid", other), applied, rec)).To(Equal(OwnerOtherWork))
}
