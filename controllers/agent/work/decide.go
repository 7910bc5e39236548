package work

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
)

// action is what the agent does with one manifest, decided from what it found on
// the member (decide) and then carried out (execute).
type action int

const (
	// actCreate creates the object: nothing is on the member.
	actCreate action = iota
	// actRecreate creates the object again: the agent had created it from this
	// very manifest and it was deleted on the member (drift, corrected).
	actRecreate
	// actUpdate brings the object this Work placed in line with its manifest; a
	// difference that is not a hub change is drift, corrected or reported.
	actUpdate
	// actReport compares the member's object with the manifest and writes nothing
	// (ReportOnly).
	actReport
	// actReportMissing reports that the object is not on the member (ReportOnly).
	actReportMissing
	// actKeep leaves the object this Work created as it is (CreateOnly).
	actKeep
	// actTakeOver makes an object nobody placed this Work's (takeover Always, or
	// IfNoDiff once the comparison finds no difference).
	actTakeOver
	// actRanOnce leaves a Job that ran and is gone: it is not run again until its
	// manifest changes.
	actRanOnce
	// actLeaveDeleted leaves an object deleted on the member deleted and reports it
	// (whenDrifted: Report).
	actLeaveDeleted
	// actWaitForDeletion writes nothing to an object being deleted on the member.
	actWaitForDeletion
	// actConflictOtherWork leaves the object to the Work that placed it; this Work
	// waits for it and takes the object over, undeleted, when that Work lets go.
	actConflictOtherWork
	// actConflictNotOwned leaves an object nobody placed alone (takeover Never).
	actConflictNotOwned
)

var actionNames = map[action]string{
	actCreate: "create", actRecreate: "recreate", actUpdate: "update", actReport: "report",
	actReportMissing: "report missing", actKeep: "keep", actTakeOver: "take over", actRanOnce: "ran once",
	actLeaveDeleted: "leave deleted", actWaitForDeletion: "wait for deletion",
	actConflictOtherWork: "conflict: another Work", actConflictNotOwned: "conflict: not owned",
}

func (a action) String() string { return actionNames[a] }

// owner is who placed the object found on the member.
type owner int

const (
	ownerNone      owner = iota // the object does not exist
	ownerThisWork               // this Work placed it
	ownerOtherWork              // another Work placed it
	ownerForeign                // it exists and no Work placed it
)

// ownership tells who placed existing: an AppliedWork owner reference marks an
// object a Work created. An object whose UID the AppliedWork records is this
// Work's even without the reference (lost when the AppliedWork was deleted by hand
// with --cascade=orphan, for example), unless another Work placed it since; so is
// one it waited for and that its holder released (orphaned) without passing it on.
func ownership(existing *unstructured.Unstructured, applied *lodestarworkv1alpha1.AppliedWork, prev *lodestarworkv1alpha1.AppliedResource) owner {
	switch {
	case existing == nil:
		return ownerNone
	case ownedBy(existing, applied):
		return ownerThisWork
	case otherWork(existing) != "":
		return ownerOtherWork
	case prev != nil && prev.UID == existing.GetUID():
		return ownerThisWork
	}
	return ownerForeign
}

// situation is everything decide needs: what is on the member, what the agent
// recorded for it before, and how the Work asks to be applied.
type situation struct {
	owner owner
	// beingDeleted: the object has a deletion timestamp on the member.
	beingDeleted bool
	// sameManifest: the agent recorded applying this very manifest (same hash)
	// before.
	sameManifest bool
	// runsOnce: the object's kind does its job once (a Job).
	runsOnce bool
	strategy lodestarworkv1alpha1.ApplyStrategy
}

// decide returns the one action for a manifest. It reads nothing and writes
// nothing; execute does what it says.
func decide(s situation) action {
	reportOnly := s.strategy.Type == lodestarworkv1alpha1.ApplyReportOnly
	// Gone, although the agent created it from this very manifest: deleted on the
	// member (or, for a Job, finished and removed).
	deletedOnMember := s.owner == ownerNone && s.sameManifest && !reportOnly
	switch {
	case s.owner == ownerThisWork && s.beingDeleted:
		return actWaitForDeletion
	case deletedOnMember && s.runsOnce:
		return actRanOnce
	case deletedOnMember && s.strategy.WhenDrifted == lodestarworkv1alpha1.DriftReport:
		return actLeaveDeleted
	case deletedOnMember:
		return actRecreate
	case s.owner == ownerNone && reportOnly:
		return actReportMissing
	case s.owner == ownerNone:
		return actCreate
	case s.owner == ownerOtherWork:
		return actConflictOtherWork
	case reportOnly:
		return actReport
	case s.owner == ownerThisWork && s.strategy.Type == lodestarworkv1alpha1.ApplyCreateOnly:
		return actKeep
	case s.owner == ownerThisWork:
		return actUpdate
	case s.strategy.Takeover == lodestarworkv1alpha1.TakeoverNever:
		return actConflictNotOwned
	}
	return actTakeOver
}
