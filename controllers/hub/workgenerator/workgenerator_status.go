package workgenerator

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/conditions"
	"github.com/lodestar-dev/lodestar/internal/handlers"
	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/patch"
	"github.com/lodestar-dev/lodestar/internal/percluster"
	"github.com/lodestar-dev/lodestar/internal/requeue"
	"github.com/lodestar-dev/lodestar/internal/rollout"
)

// status is the work generator's part of a Placement's status, as one reconcile
// found it: the WorkSynchronized and Progressing conditions and status.rollout.
type status struct {
	synchronized conditions.Decision
	progressing  conditions.Decision
	rollout      *placementv1alpha1.RolloutStatus
	// deferred, when set, is when to look again: a write skipped for pace is
	// due, or a write of a moment ago may be in the cache.
	deferred time.Duration
}

// statusEvery is the least time between two status writes of a Placement that
// change only counts and per-cluster states; a change of a condition's status or
// reason, of the target, stable revision or stage is written at once.
const statusEvery = time.Second

// rolloutBackstop is the longest a rollout under way (not paused) goes
// without a reconcile (lookAgain): one per such Placement every 30 s at most,
// writing nothing when nothing moved.
const rolloutBackstop = 30 * time.Second

func (s *status) set(st metav1.ConditionStatus, reason, format string, args ...any) {
	s.synchronized.Set(placementv1alpha1.WorkSynchronizedCondition, st, reason, format, args...)
}

// applyStatus writes the generator's conditions and status.rollout. What a
// reconcile did not decide (it ended early) is written as it was, since fields
// an owner leaves out of an apply are removed; nothing is written when nothing
// changed.
func (r *Reconciler) applyStatus(ctx context.Context, placement *placementv1alpha1.Placement, s *status) error {
	conds, changed, material := conditions.Collect(placement.Status.Conditions, placement.Generation,
		[]string{placementv1alpha1.WorkSynchronizedCondition, placementv1alpha1.ProgressingCondition}, &s.synchronized, &s.progressing)
	ro := s.rollout
	if ro == nil {
		ro = placement.Status.Rollout
	} else if old := placement.Status.Rollout; !equality.Semantic.DeepEqual(ro, old) {
		changed, material = true, material || rollout.StatusMoved(old, ro)
	}
	if !changed {
		// As far as the cache shows; it may not show a write of a moment ago
		// yet: look again, first once the Work reports' window has passed.
		s.deferred = r.statusPace.Recheck(client.ObjectKeyFromObject(placement), time.Now(), statusWindow)
		return nil
	}
	if wait := r.statusPace.Wait(client.ObjectKeyFromObject(placement), material, time.Now()); wait > 0 {
		s.deferred = wait
		return nil
	}
	desired := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: placement.Name, Namespace: placement.Namespace}}
	desired.Status.Conditions = conds
	desired.Status.Rollout = ro
	return patch.ApplyStatus(ctx, r.Client, desired, Name)
}

// report is the rollout's status from what the reconcile found and did: the
// rollout and its Progressing condition, WorkSynchronized, how Work status
// reports concern the Placement from now on, and when to look again.
func (r *Reconciler) report(_ context.Context, s *scope) (ctrl.Result, error) {
	st := s.st
	key := client.ObjectKeyFromObject(s.placement)
	stable := ""
	if s.stable != nil {
		stable = s.stable.Name
	}
	// A Work written now is not Succeeded yet, whatever the plan found before.
	s.plan.Rewritten(s.written)
	if s.plan.Complete {
		stable = s.target.Name
	}
	s.retainedBefore = r.retainedBefore(s.placement)
	st.rollout = rollout.Status(s.rolloutReport(stable))
	if len(s.retained) > 0 {
		r.retainedWritten.Store(expectationKey(s.placement, ""), st.rollout.RetainedClaims, s.now)
	}
	cond, reason, msg := rollout.Progressing(s.target, s.plan, s.removal, s.placement.Spec.Strategy.Paused, len(s.decided.Clusters))
	cond, reason, msg = r.statefulGate(s, cond, reason, msg)
	cond, reason, msg = r.divisionGate(s, cond, reason, msg)
	msg += removalNotes(s.removal)
	st.progressing.Set(placementv1alpha1.ProgressingCondition, cond, reason, "%s", msg)
	if reason == placementv1alpha1.ReasonFailureBudgetExceeded {
		r.warnOnce(s.placement, reason, msg)
	}
	// Work status reports concern this Placement while its rollout, or a removal,
	// is under way: promptly when they open a gate, at a slower pace when they
	// only move the status (AllAtOnce, nothing to remove).
	interest := handlers.Gating
	switch {
	case s.renderer.Surging():
		interest = handlers.Gating // surge first waits for the increases
	case s.plan.Complete && len(s.leaving) == len(s.removal.Remove):
		interest = handlers.Idle
	case s.strategy.Type == placementv1alpha1.RolloutAllAtOnce && len(s.leaving) == 0:
		interest = handlers.Reporting
	}
	result := ctrl.Result{RequeueAfter: lookAgain(interest, s.placement.Spec.Strategy.Paused, s.plan.RecheckAfter, s.removal.RecheckAfter)}
	if r.active.Swap(key, interest) == handlers.Idle && interest != handlers.Idle {
		// The reports that came while this reconcile ran were dropped as
		// of no concern: look again once they are all in the cache, or the
		// last of them may never be seen.
		result.RequeueAfter = requeue.Soonest(result.RequeueAfter, statusWindow)
	}
	if !s.decided.Consistent {
		// The slices are being rewritten: a cluster missing now may be moving from
		// one slice to another. Works are removed once every slice agrees.
		st.set(metav1.ConditionFalse, placementv1alpha1.ReasonWaitingForDecisions,
			"the PlacementDecision slices are being updated; Works of clusters no longer chosen are removed when they agree")
		return result, nil
	}
	r.failing.Set(key, slices.Collect(maps.Keys(s.failed)))
	r.held.Set(key, s.removal.Held)
	if len(s.failed) > 0 {
		msg := percluster.OverrideFailures(s.failed, len(s.decided.Clusters))
		if c := meta.FindStatusCondition(s.placement.Status.Conditions, placementv1alpha1.WorkSynchronizedCondition); c == nil || c.Message != msg {
			r.Recorder.Eventf(s.placement, nil, corev1.EventTypeWarning, placementv1alpha1.ReasonOverrideFailed, "Render", "%s", msg)
		}
		st.set(metav1.ConditionFalse, placementv1alpha1.ReasonOverrideFailed, "%s", msg)
		return result, nil
	}
	st.set(metav1.ConditionTrue, placementv1alpha1.ReasonWorkSynchronized,
		"revision %d (%s); the Works of %s hold what the rollout gives them", s.target.Spec.Revision, s.target.Spec.Hash, message.Count(len(s.decided.Clusters), "cluster"))
	return result, nil
}

// lookAgain is when a reconcile that did what it could looks again: the
// soonest of what its plan and removal asked for, and no later than
// rolloutBackstop while Work status reports concern the Placement and it is not
// paused. The rollout advances on those reports; one that no reconcile saw
// must not hold it for good.
func lookAgain(interest handlers.Interest, paused bool, asked ...time.Duration) time.Duration {
	if interest != handlers.Idle && !paused {
		asked = append(asked, rolloutBackstop)
	}
	return requeue.Soonest(asked...)
}

// retainedBefore is status.rollout.retainedClaims as the generator last wrote
// it: the cache's, unless a write the cache does not show yet is newer. The
// Works those claims come from are gone by the next reconcile, so a stale cache
// must not write them away.
func (r *Reconciler) retainedBefore(p *placementv1alpha1.Placement) []placementv1alpha1.RetainedClaims {
	var cached []placementv1alpha1.RetainedClaims
	if ro := p.Status.Rollout; ro != nil {
		cached = ro.RetainedClaims
	}
	written, ok := r.retainedWritten.Lookup(expectationKey(p, ""), func(w []placementv1alpha1.RetainedClaims) bool {
		return equality.Semantic.DeepEqual(w, cached)
	})
	if !ok {
		return cached
	}
	return written
}

// statefulGate is the Progressing condition when the stateful gate holds a
// copy (StatefulMoveBlocked, or FailoverBlocked for a failover), with a
// Warning event when it starts holding; and a copy with bound ReadWriteOnce
// claims that moves anyway is said in the message, with an event when it
// starts moving.
func (r *Reconciler) statefulGate(s *scope, cond metav1.ConditionStatus, reason, msg string) (metav1.ConditionStatus, string, string) {
	if len(s.held) > 0 {
		reason = placementv1alpha1.ReasonStatefulMoveBlocked
		if s.failoverHeld {
			reason = placementv1alpha1.ReasonFailoverBlocked
		}
		msg = s.state.Hold
		r.warnOnce(s.placement, reason, msg)
		return metav1.ConditionFalse, reason, msg
	}
	if len(s.removal.Moving) == 0 || len(s.removal.Kept) == 0 {
		return cond, reason, msg
	}
	moving := "moving anyway (spec.strategy.stateful: Move, or a drain with --include-stateful): " + message.List(s.removal.Moving, 3, "; ") +
		"; the claims of the clusters added are new and empty, and the data stays on the cluster left"
	if c := meta.FindStatusCondition(s.placement.Status.Conditions, placementv1alpha1.ProgressingCondition); c == nil || !strings.Contains(c.Message, moving) {
		r.Recorder.Eventf(s.placement, nil, corev1.EventTypeWarning, placementv1alpha1.ReasonStatefulMove, "Rollout", "%s", moving)
	}
	return cond, reason, msg + "; " + moving
}

// warnOnce records a Warning event when the Progressing condition changes to the
// reason, not at every reconcile.
func (r *Reconciler) warnOnce(placement *placementv1alpha1.Placement, reason, msg string) {
	if c := meta.FindStatusCondition(placement.Status.Conditions, placementv1alpha1.ProgressingCondition); c != nil && c.Reason == reason {
		return
	}
	r.Recorder.Eventf(placement, nil, corev1.EventTypeWarning, reason, "Rollout", "%s", msg)
}

// rolloutReport is what status.rollout is made of, from what the reconcile
// found and did.
func (s *scope) rolloutReport(stable string) rollout.Report {
	return rollout.Report{Target: s.target, Stable: stable, Routine: s.strategy.Type == placementv1alpha1.RolloutAllAtOnce,
		Plan: s.plan, Removal: s.removal, Leaving: s.leaving, Holds: rollout.RevisionNames(s.clusters, s.leaving, s.works, s.revs),
		Retained: rollout.RetainedClaims(s.retainedBefore, s.retained, s.decided.Clusters, s.now)}
}

// removalNotes says what keeps the copies of clusters the Placement left
// beyond their replacements' availability: their traffic, the disruption
// budget.
func removalNotes(removal rollout.Removal) string {
	var notes string
	if len(removal.TrafficHeld) > 0 {
		notes += "; moving the traffic of exported Services before removing a copy: " + strings.Join(removal.TrafficHeld, "; ")
	}
	if len(removal.BudgetHeld) > 0 {
		notes += "; kept by spec.strategy.disruptionBudget: " + message.List(removal.BudgetHeld, 5, "; ")
	}
	if len(removal.Overruled) > 0 {
		notes += "; spec.strategy.disruptionBudget overruled by a forced drain: " + message.List(slices.Sorted(maps.Values(removal.Overruled)), 5, "; ")
	}
	return notes
}
