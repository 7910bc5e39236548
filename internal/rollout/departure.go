package rollout

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/requeue"
)

// TrafficRecheck is how often a move of exported Services looks again at the
// importers while it waits for them.
const TrafficRecheck = time.Second

// Traffic is what the importers of the Services a leaving copy exports show,
// for moving their traffic before the copy goes.
type Traffic struct {
	// Services are the Services the copy exports.
	Services []string
	// Unserved, when set, says which importers do not serve the endpoints of a
	// selected cluster that exports each Service yet.
	Unserved string
	// Withdrawn is set once the copy's endpoints are marked withdrawn from the
	// importers, at WithdrawnAt; StillServed, when set, says which importers
	// still serve them.
	Withdrawn   bool
	WithdrawnAt time.Time
	StillServed string
	// Drain is how long after the withdrawal the copy stays
	// (spec.services.drainSeconds).
	Drain time.Duration
}

// heldByClaims tells whether the stateful gate holds the copy: bound
// ReadWriteOnce claims, on a cluster still usable, with spec.strategy.stateful
// Hold and no drain with --include-stateful.
func (l Leaving) heldByClaims() bool {
	return l.Claims != "" && !l.Revoked && !l.ClaimsMove
}

// Holds is what the stateful gate holds among the clusters left: their
// descriptions (State.Hold is made of them: no cluster without a Work is given
// one meanwhile), and whether one of them left by a failover.
func Holds(leaving []Leaving) (held []string, failover bool) {
	for _, l := range leaving {
		if l.heldByClaims() {
			held = append(held, l.Claims)
			failover = failover || l.FailedOver
		}
	}
	return held, failover
}

// Depart decides, once, what becomes of the clusters the Placement left:
// make-before-break, with its three gates.
//
//   - Availability, object by object: a cluster left keeps its copy while an
//     object Available there would be Available on fewer clusters than the
//     selected ones that carry it (a selected cluster without Works yet
//     carries everything), and at most until the deadline from when it left
//     (Leaving.Deadline instead, for a failover). A copy with no object
//     Available serves nothing and goes first; a Placement that selects no
//     cluster any more has nothing to wait for. Clusters known only as a
//     whole (no AvailableObjects) count as one object, their Available. The
//     deadline forces nothing while a selected cluster has not been given the
//     objects yet (the rollout is paused, stopped, waits for approval, or is
//     held): its replacement never had its chance.
//
//   - Claims: a copy with bound ReadWriteOnce claims is held whatever the
//     deadline (Holds), and is not counted as one that lets another go;
//     with ClaimsMove it goes as any other, and is said to move (Moving).
//
//   - Traffic: a copy the availability lets go that exports Services stays
//     until every importer serves a replacement, then its endpoints are
//     withdrawn (Withdraw), then no importer serves them, then the drain
//     time has passed.
//
//   - Budget (Strategy.MinAvailableClusters): a copy Available there goes
//     only while as many clusters as the budget asks stay Available without
//     it, deadline or not; from a forced drain's ForcedAt the budget keeps
//     nothing there (the other gates still apply) and says so (Overruled).
//
// A revoked cluster (the namespace may no longer use it) goes at once,
// whatever its claims, budget and traffic; a removal forced by the deadline
// does not wait for the traffic.
func Depart(leaving []Leaving, selected []Cluster, s Strategy, now time.Time) Removal {
	var r Removal
	deadline := s.Deadline
	budget := newBudget(s.MinAvailableClusters, leaving, selected)
	copies := newTally(selected)
	unplaced := false
	for _, c := range selected {
		unplaced = unplaced || c.Revision == ""
	}
	leaving = slices.Clone(leaving)
	slices.SortFunc(leaving, func(a, b Leaving) int {
		if sa, sb := len(a.serves()), len(b.serves()); sa != sb {
			return cmp.Compare(sa, sb)
		}
		return cmp.Or(a.Since.Compare(b.Since), cmp.Compare(a.Name, b.Name))
	})
	for _, l := range leaving {
		if !l.heldByClaims() {
			copies.add(l.serves(), 1)
		}
		if l.Claims != "" && !l.Revoked && l.ClaimsMove {
			r.Moving = append(r.Moving, l.Claims)
		}
	}
	for _, l := range leaving {
		serves := l.serves()
		switch {
		case l.heldByClaims():
			r.Kept = append(r.Kept, l.Name)
			r.Held = append(r.Held, l.Name)
		case !l.Revoked && len(serves) > 0 && !budget.spare() && !l.overruled(now):
			r.Kept = append(r.Kept, l.Name)
			r.BudgetHeld = append(r.BudgetHeld, budget.holds(l.Name))
			if !l.ForcedAt.IsZero() {
				r.RecheckAfter = requeue.Soonest(r.RecheckAfter, l.ForcedAt.Sub(now))
			}
		case l.Revoked || len(serves) == 0 || copies.spare(serves):
			if !l.Revoked && len(serves) > 0 && !budget.spare() {
				r.overrule(l.Name, budget.overruled(l.Name, l.ForcedAt))
			}
			r.leave(l, now)
			copies.add(serves, -1)
			budget.remove(l)
		case !unplaced && !now.Before(l.Since.Add(cmp.Or(l.Deadline, deadline))):
			if !l.Revoked && len(serves) > 0 && !budget.spare() {
				r.overrule(l.Name, budget.overruled(l.Name, l.ForcedAt))
			}
			r.Remove = append(r.Remove, l.Name)
			r.Forced = append(r.Forced, l.Name)
			copies.add(serves, -1)
			budget.remove(l)
		default:
			r.Kept = append(r.Kept, l.Name)
			if !unplaced {
				r.RecheckAfter = requeue.Soonest(r.RecheckAfter, l.Since.Add(cmp.Or(l.Deadline, deadline)).Sub(now))
			}
		}
	}
	return r
}

// overruled tells whether a forced drain overrules the Placement's budget
// for the copy now.
func (l Leaving) overruled(now time.Time) bool {
	return !l.ForcedAt.IsZero() && !now.Before(l.ForcedAt)
}

// overrule records that a forced drain overruled the budget for cluster.
func (r *Removal) overrule(cluster, why string) {
	if r.Overruled == nil {
		r.Overruled = map[string]string{}
	}
	r.Overruled[cluster] = why
}

// leave removes a copy the availability lets go, unless its traffic keeps it.
func (r *Removal) leave(l Leaving, now time.Time) {
	why, recheck, withdraw := l.trafficWait(now)
	if why == "" {
		r.Remove = append(r.Remove, l.Name)
		return
	}
	r.Kept = append(r.Kept, l.Name)
	r.TrafficHeld = append(r.TrafficHeld, l.Name+": "+why)
	r.RecheckAfter = requeue.Soonest(r.RecheckAfter, recheck)
	if withdraw {
		r.Withdraw = append(r.Withdraw, l.Name)
	}
}

// trafficWait says why the copy waits for its traffic to move ("" when it
// does not), when to look again, and whether its endpoints are to be
// withdrawn now.
func (l Leaving) trafficWait(now time.Time) (string, time.Duration, bool) {
	t := l.Traffic
	switch {
	case t == nil || len(t.Services) == 0 || l.Revoked:
		return "", 0, false
	case t.Unserved != "":
		return t.Unserved, TrafficRecheck, false
	case !t.Withdrawn:
		return fmt.Sprintf("withdrawing its endpoints of %s from the importers", strings.Join(t.Services, ", ")), TrafficRecheck, true
	case t.StillServed != "":
		return t.StillServed, TrafficRecheck, false
	}
	if wait := t.WithdrawnAt.Add(t.Drain).Sub(now); wait > 0 {
		return fmt.Sprintf("draining: its endpoints left every importer; deleted in %s", wait.Round(time.Second)), wait, false
	}
	return "", 0, false
}

// HoldMessage says what the stateful gate holds, and how to let it go.
func HoldMessage(held []string) string {
	return message.List(held, 3, "; ") + "; moving would leave their data behind, so no other cluster is given a copy in its place; " +
		"set spec.strategy.stateful: Move to move anyway (to new, empty claims), or drain the cluster with --include-stateful"
}

// budget is the disruption budget as the removals go: how many clusters the
// Placement has Available, and how many it must keep.
type budget struct {
	set            bool
	min, available int
}

// newBudget counts the clusters Available, selected or left, against the
// budget's minimum (a percentage of all of them, rounded up); no budget keeps
// nothing.
func newBudget(minAvailable *intstr.IntOrString, leaving []Leaving, selected []Cluster) *budget {
	b := &budget{set: minAvailable != nil}
	if !b.set {
		return b
	}
	for _, c := range selected {
		if c.Available == metav1.ConditionTrue {
			b.available++
		}
	}
	for _, l := range leaving {
		if len(l.serves()) > 0 {
			b.available++
		}
	}
	b.min, _ = intstr.GetScaledValueFromIntOrPercent(minAvailable, len(selected)+len(leaving), true)
	return b
}

// spare tells whether one Available copy may go.
func (b *budget) spare() bool { return !b.set || b.available-1 >= b.min }

// remove counts a copy that goes.
func (b *budget) remove(l Leaving) {
	if len(l.serves()) > 0 {
		b.available--
	}
}

// overruled says what a forced drain overruled.
func (b *budget) overruled(cluster string, at time.Time) string {
	return fmt.Sprintf("%s (the disruption budget keeps %s Available, %d without it: the cluster's drain overruled it at %s)",
		cluster, message.Count(b.min, "cluster"), b.available-1, at.UTC().Format(time.RFC3339))
}

// holds says why the budget keeps cluster.
func (b *budget) holds(cluster string) string {
	return fmt.Sprintf("%s (the disruption budget keeps %s Available; without it %d would be)", cluster, message.Count(b.min, "cluster"), b.available-1)
}
