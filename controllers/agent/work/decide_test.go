package work

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
		s    situation
		want action
	}{
		{"nothing on the member: create", situation{owner: ownerNone, strategy: defaults}, actCreate},
		{"nothing on the member, a new manifest: create", situation{owner: ownerNone, strategy: reportDrift}, actCreate},
		{"created from this manifest and deleted on the member: create again", situation{owner: ownerNone, sameManifest: true, strategy: defaults}, actRecreate},
		{"deleted on the member, CreateOnly: create again", situation{owner: ownerNone, sameManifest: true, strategy: createOnly}, actRecreate},
		{"deleted on the member, whenDrifted Report: leave it deleted", situation{owner: ownerNone, sameManifest: true, strategy: reportDrift}, actLeaveDeleted},
		{"a Job that ran and is gone: not run again", situation{owner: ownerNone, sameManifest: true, runsOnce: true, strategy: defaults}, actRanOnce},
		{"a Job gone, whenDrifted Report: still ran once", situation{owner: ownerNone, sameManifest: true, runsOnce: true, strategy: reportDrift}, actRanOnce},
		{"a Job whose manifest changed: a new run", situation{owner: ownerNone, runsOnce: true, strategy: defaults}, actCreate},
		{"ReportOnly and nothing there", situation{owner: ownerNone, strategy: reportOnly}, actReportMissing},
		{"ReportOnly and nothing there, recorded before", situation{owner: ownerNone, sameManifest: true, strategy: reportOnly}, actReportMissing},
		{"ReportOnly and there: compare", situation{owner: ownerForeign, strategy: reportOnly}, actReport},
		{"ReportOnly and placed by this Work: compare", situation{owner: ownerThisWork, strategy: reportOnly}, actReport},
		{"placed by this Work: update", situation{owner: ownerThisWork, sameManifest: true, strategy: defaults}, actUpdate},
		{"placed by this Work, whenDrifted Report: update (reports drift)", situation{owner: ownerThisWork, sameManifest: true, strategy: reportDrift}, actUpdate},
		{"placed by this Work, CreateOnly: keep", situation{owner: ownerThisWork, strategy: createOnly}, actKeep},
		{"placed by this Work and being deleted: wait", situation{owner: ownerThisWork, beingDeleted: true, strategy: defaults}, actWaitForDeletion},
		{"placed by this Work, being deleted, CreateOnly: wait", situation{owner: ownerThisWork, beingDeleted: true, strategy: createOnly}, actWaitForDeletion},
		{"placed by another Work: conflict, wait for it", situation{owner: ownerOtherWork, strategy: always}, actConflictOtherWork},
		{"placed by another Work, ReportOnly: still the other Work's", situation{owner: ownerOtherWork, strategy: reportOnly}, actConflictOtherWork},
		{"placed by nobody, takeover Never: conflict", situation{owner: ownerForeign, strategy: never}, actConflictNotOwned},
		{"placed by nobody, takeover IfNoDiff: take over (after comparing)", situation{owner: ownerForeign, strategy: ifNoDiff}, actTakeOver},
		{"placed by nobody, takeover Always: take over", situation{owner: ownerForeign, strategy: always}, actTakeOver},
		{"placed by nobody, CreateOnly, takeover Always: take over (adopt)", situation{owner: ownerForeign, strategy: func() lodestarworkv1alpha1.ApplyStrategy {
			s := createOnly
			s.Takeover = lodestarworkv1alpha1.TakeoverAlways
			return s
		}()}, actTakeOver},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(decide(tc.s)).To(Equal(tc.want), "got %s, want %s", decide(tc.s), tc.want)
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

	g.Expect(ownership(nil, applied, rec)).To(Equal(ownerNone))
	g.Expect(ownership(obj("obj-uid", ownerReference(applied)), applied, nil)).To(Equal(ownerThisWork))
	g.Expect(ownership(obj("obj-uid"), applied, rec)).To(Equal(ownerThisWork), "recorded UID, owner reference lost")
	g.Expect(ownership(obj("new-uid"), applied, rec)).To(Equal(ownerForeign), "recreated by someone else")
	g.Expect(ownership(obj("obj-uid", other), applied, rec)).To(Equal(ownerOtherWork))
}
