package workapply

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
)

// Action is what the agent does with one manifest, decided from what it found on
// the member (Decide) and then carried out (the work reconciler's execute).
type Action int

const (
	// ActCreate creates the object: nothing is on the member.
	ActCreate Action = iota
	// ActRecreate creates the object again: the agent had created it from this
	// very manifest and it was deleted on the member (drift, corrected).
	ActRecreate
	// ActUpdate brings the object this Work placed in line with its manifest; a
	// difference that is not a hub change is drift, corrected or reported.
	ActUpdate
	// ActReport compares the member's object with the manifest and writes nothing
	// (ReportOnly).
	ActReport
	// ActReportMissing reports that the object is not on the member (ReportOnly).
	ActReportMissing
	// ActKeep leaves the object this Work created as it is (CreateOnly).
	ActKeep
	// ActTakeOver makes an object nobody placed this Work's (takeover Always, or
	// IfNoDiff once the comparison finds no difference).
	ActTakeOver
	// ActRanOnce leaves a Job that ran and is gone: it is not run again until its
	// manifest changes.
	ActRanOnce
	// ActLeaveDeleted leaves an object deleted on the member deleted and reports it
	// (whenDrifted: Report).
	ActLeaveDeleted
	// ActWaitForDeletion writes nothing to an object being deleted on the member.
	ActWaitForDeletion
	// ActConflictOtherWork leaves the object to the Work that placed it; this Work
	// waits for it and takes the object over, undeleted, when that Work lets go.
	ActConflictOtherWork
	// ActConflictNotOwned leaves an object nobody placed alone (takeover Never).
	ActConflictNotOwned
)

var actionNames = map[Action]string{
	ActCreate: "create", ActRecreate: "recreate", ActUpdate: "update", ActReport: "report",
	ActReportMissing: "report missing", ActKeep: "keep", ActTakeOver: "take over", ActRanOnce: "ran once",
	ActLeaveDeleted: "leave deleted", ActWaitForDeletion: "wait for deletion",
	ActConflictOtherWork: "conflict: another Work", ActConflictNotOwned: "conflict: not owned",
}

func (a Action) String() string { return actionNames[a] }

// Owner is who placed the object found on the member.
type Owner int

// Who placed an object.
const (
	OwnerNone      Owner = iota // the object does not exist
	OwnerThisWork               // this Work placed it
	OwnerOtherWork              // another Work placed it
	OwnerForeign                // it exists and no Work placed it
)

// Ownership tells who placed existing: an AppliedWork owner reference marks an
// object a Work created. An object whose UID the AppliedWork records is this
// Work's even without the reference (lost when the AppliedWork was deleted by hand
// with --cascade=orphan, for example), unless another Work placed it since; so is
// one it waited for and that its holder released (orphaned) without passing it on.
func Ownership(existing *unstructured.Unstructured, applied *lodestarworkv1alpha1.AppliedWork, prev *lodestarworkv1alpha1.AppliedResource) Owner {
	switch {
	case existing == nil:
		return OwnerNone
	case OwnedBy(existing, applied):
		return OwnerThisWork
	case OtherWork(existing) != "":
		return OwnerOtherWork
	case prev != nil && prev.UID == existing.GetUID():
		return OwnerThisWork
	}
	return OwnerForeign
}

// Situation is everything Decide needs: what is on the member, what the agent
// recorded for it before, and how the Work asks to be applied.
type Situation struct {
	Owner Owner
	// BeingDeleted: the object has a deletion timestamp on the member.
	BeingDeleted bool
	// SameManifest: the agent recorded applying this very manifest (same hash)
	// before.
	SameManifest bool
	// RunsOnce: the object's kind does its job once (a Job).
	RunsOnce bool
	Strategy lodestarworkv1alpha1.ApplyStrategy
}

// Decide returns the one action for a manifest. It reads nothing and writes
// nothing; the work reconciler does what it says.
func Decide(s Situation) Action {
	reportOnly := s.Strategy.Type == lodestarworkv1alpha1.ApplyReportOnly
	// Gone, although the agent created it from this very manifest: deleted on the
	// member (or, for a Job, finished and removed).
	deletedOnMember := s.Owner == OwnerNone && s.SameManifest && !reportOnly
	switch {
	case s.Owner == OwnerThisWork && s.BeingDeleted:
		return ActWaitForDeletion
	case deletedOnMember && s.RunsOnce:
		return ActRanOnce
	case deletedOnMember && s.Strategy.WhenDrifted == lodestarworkv1alpha1.DriftReport:
		return ActLeaveDeleted
	case deletedOnMember:
		return ActRecreate
	case s.Owner == OwnerNone && reportOnly:
		return ActReportMissing
	case s.Owner == OwnerNone:
		return ActCreate
	case s.Owner == OwnerOtherWork:
		return ActConflictOtherWork
	case reportOnly:
		return ActReport
	case s.Owner == OwnerThisWork && s.Strategy.Type == lodestarworkv1alpha1.ApplyCreateOnly:
		return ActKeep
	case s.Owner == OwnerThisWork:
		return ActUpdate
	case s.Strategy.Takeover == lodestarworkv1alpha1.TakeoverNever:
		return ActConflictNotOwned
	}
	return ActTakeOver
}
