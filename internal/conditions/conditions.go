// Package conditions computes the metav1.Conditions a reconciler writes: a
// condition merged over the existing ones (keeping its transition time while
// its status holds), the one condition a reconcile decides on, and whether a
// write would change anything a reader acts on.
package conditions

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lodestar-dev/lodestar/internal/message"
)

// MaxMessage is the longest condition message Lodestar writes: conditions stay
// readable in `kubectl get -o wide` and the status small, whatever the cause.
const MaxMessage = 1024

// Merge returns c as it should be written over existing: with the transition
// time of the existing condition of its type when the status did not change, and
// now otherwise.
func Merge(existing []metav1.Condition, c metav1.Condition) metav1.Condition {
	conditions := slices.Clone(existing)
	meta.SetStatusCondition(&conditions, c)
	return *meta.FindStatusCondition(conditions, c.Type)
}

// Same tells whether existing already has c as it would be written: same status,
// reason, message and observed generation. Controllers use it to skip writes
// that would change nothing.
func Same(existing []metav1.Condition, c metav1.Condition) bool {
	old := meta.FindStatusCondition(existing, c.Type)
	return old != nil && old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message && old.ObservedGeneration == c.ObservedGeneration
}

// Moved tells whether c differs from the condition of its type in existing in
// what a reader acts on: its status, reason or observed generation (not only its
// message), or whether there was none.
func Moved(existing []metav1.Condition, c metav1.Condition) bool {
	old := meta.FindStatusCondition(existing, c.Type)
	return old == nil || old.Status != c.Status || old.Reason != c.Reason || old.ObservedGeneration != c.ObservedGeneration
}

// Decision is the one condition a reconcile decides on, kept until the reconcile's
// single status write. It is empty while nothing was decided (for example when the
// reconcile ended on a transient error), and then nothing is written.
type Decision struct {
	condition *metav1.Condition
}

// Set decides the condition of type t; its message is cut to MaxMessage.
func (d *Decision) Set(t string, status metav1.ConditionStatus, reason, format string, args ...any) {
	d.condition = &metav1.Condition{Type: t, Status: status, Reason: reason, Message: message.Truncate(fmt.Sprintf(format, args...), MaxMessage)}
}

// Message is the decided condition's message; empty when nothing was decided.
func (d *Decision) Message() string {
	if d.condition == nil {
		return ""
	}
	return d.condition.Message
}

// Reason is the decided condition's reason; empty when nothing was decided.
func (d *Decision) Reason() string {
	if d.condition == nil {
		return ""
	}
	return d.condition.Reason
}

// Decided tells whether Set was called.
func (d *Decision) Decided() bool { return d.condition != nil }

// For returns the decided condition at generation gen, to be written over
// existing, and false when nothing was decided.
func (d *Decision) For(existing []metav1.Condition, gen int64) (metav1.Condition, bool) {
	if d.condition == nil {
		return metav1.Condition{}, false
	}
	c := *d.condition
	c.ObservedGeneration = gen
	return Merge(existing, c), true
}

// Collect is the conditions a reconcile writes of the types it owns: those it
// decided (decisions, by type), and as they were those it did not (a reconcile
// that ended early), since fields an owner leaves out of an apply are
// removed; changed says whether any differs from existing, moved whether any
// moved (Moved), worth writing at once.
func Collect(existing []metav1.Condition, gen int64, types []string, decisions ...*Decision) (conds []metav1.Condition, changed, moved bool) {
	for i, t := range types {
		if c, ok := decisions[i].For(existing, gen); ok {
			changed = changed || !Same(existing, c)
			moved = moved || Moved(existing, c)
			conds = append(conds, c)
		} else if old := meta.FindStatusCondition(existing, t); old != nil {
			conds = append(conds, *old)
		}
	}
	return conds, changed, moved
}
