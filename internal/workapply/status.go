package workapply

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/claims"
	"github.com/lodestar-dev/lodestar/internal/conditions"
	"github.com/lodestar-dev/lodestar/internal/feedback"
	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/readiness"
)

// optionalConditions are the Work conditions present only in some states.
var optionalConditions = []string{lodestarworkv1alpha1.ConditionStatusFeedback, lodestarworkv1alpha1.ConditionDrifted, lodestarworkv1alpha1.ConditionCleanupBlocked}

// Size budgets of a Work's status. The Work, manifests included, must fit in one
// etcd object; the status is kept well below that whatever the number of manifests.
const (
	// MaxStatusBytes bounds the encoded size of a Work's status.
	MaxStatusBytes = 256 << 10
	// maxFeedbackBytes bounds the feedback message of one manifest.
	maxFeedbackBytes = 4 << 10
	// maxFeedbackTotal bounds the feedback of all manifests of a Work.
	maxFeedbackTotal = 64 << 10
	// maxMessage bounds a condition message.
	maxMessage = 1024
	// maxClaimsBytes bounds the Claims condition of one manifest.
	maxClaimsBytes = 4 << 10
)

// NewWorkStatus computes the Work's status from the results of applying its
// manifests, keeping the transition times of conditions that did not change.
func NewWorkStatus(work *workv1alpha1.Work, results []Result, p Plan, checker *readiness.Checker, blocked []Held) workv1alpha1.WorkStatus {
	previous := map[int][]metav1.Condition{}
	for _, mc := range work.Status.ManifestConditions {
		previous[mc.Identifier.Ordinal] = mc.Conditions
	}
	st := workv1alpha1.WorkStatus{ManifestConditions: make([]workv1alpha1.ManifestCondition, 0, len(results))}
	t := &tally{reportsDrift: p.Strategy.WhenDrifted == lodestarworkv1alpha1.DriftReport && p.Strategy.Type == lodestarworkv1alpha1.ApplyServerSide}
	feedbackLeft := maxFeedbackTotal
	for _, res := range results {
		conds := []metav1.Condition{res.Condition}
		conds = append(conds, manifestReadiness(checker, res)...)
		if t.reportsDrift && res.Condition.Status == metav1.ConditionTrue {
			conds = append(conds, driftCondition(res))
		}
		if c, ok := feedbackCondition(res, p, &feedbackLeft); ok {
			conds = append(conds, c)
		}
		if res.Claims != nil {
			conds = append(conds, claims.Condition(*res.Claims, maxClaimsBytes))
		}
		merged := make([]metav1.Condition, 0, len(conds))
		for _, c := range conds {
			c.ObservedGeneration = work.Generation
			if !encoded(c.Type) {
				c.Message = message.Truncate(c.Message, maxMessage)
			}
			merged = append(merged, conditions.Merge(previous[res.ID.Ordinal], c))
		}
		st.ManifestConditions = append(st.ManifestConditions, workv1alpha1.ManifestCondition{Identifier: res.ID, Conditions: merged})
		t.add(res, merged)
	}
	workConds := t.conditions(len(results), p)
	if len(blocked) > 0 {
		workConds = append(workConds, cleanupBlocked(blocked))
	}
	st.Conditions = workConditions(work, workConds, optionalConditions...)
	if trimmed, steps := trimStatus(&st, MaxStatusBytes); trimmed {
		st.Conditions = workConditions(work, append(workConds, metav1.Condition{
			Type: lodestarworkv1alpha1.ConditionStatusTrimmed, Status: metav1.ConditionTrue, Reason: lodestarworkv1alpha1.ReasonStatusTooLarge,
			Message: fmt.Sprintf("the status was cut to fit %d bytes: %s", MaxStatusBytes, steps),
		}), append(optionalConditions, lodestarworkv1alpha1.ConditionStatusTrimmed)...)
	}
	return st
}

// feedbackCondition is a manifest's StatusFeedback condition, within what is
// left of the Work's feedback budget (left, counted down). Feedback reads only
// objects the Work answers for: never one it only reports on (ReportOnly) or
// waits for.
func feedbackCondition(res Result, p Plan, left *int) (metav1.Condition, bool) {
	if res.Live == nil || res.Record == nil || res.Record.WaitingFor != "" {
		return metav1.Condition{}, false
	}
	values, errs, ok := p.Feedback.Values(res.Live)
	if !ok {
		return metav1.Condition{}, false
	}
	msg, trimmed := feedback.Encode(values, errs, min(maxFeedbackBytes, *left))
	*left -= len(msg)
	reason := lodestarworkv1alpha1.ReasonFeedbackReported
	if trimmed {
		reason = lodestarworkv1alpha1.ReasonFeedbackTrimmed
	}
	return metav1.Condition{Type: lodestarworkv1alpha1.ConditionStatusFeedback, Status: metav1.ConditionTrue, Reason: reason, Message: msg}, true
}

// tally counts the manifests of a Work by what their conditions say, naming
// each, for the Work's own conditions.
type tally struct {
	reportsDrift                                           bool
	notApplied, notAvailable, progressing, degraded, drift []string
}

// add counts one manifest by its result and its conditions.
func (t *tally) add(res Result, conds []metav1.Condition) {
	name := fmt.Sprintf("manifest %d (%s)", res.ID.Ordinal, Describe(res.ID))
	if res.Condition.Status != metav1.ConditionTrue {
		t.notApplied = append(t.notApplied, res.Condition.Message)
	}
	if len(res.Drift) > 0 {
		t.drift = append(t.drift, name+" at "+strings.Join(res.Drift, ", "))
	}
	for _, c := range conds {
		switch {
		case c.Type == lodestarworkv1alpha1.ConditionAvailable && c.Status != metav1.ConditionTrue:
			t.notAvailable = append(t.notAvailable, name+": "+c.Message)
		case c.Type == lodestarworkv1alpha1.ConditionProgressing && c.Status == metav1.ConditionTrue:
			t.progressing = append(t.progressing, name+": "+c.Message)
		case c.Type == lodestarworkv1alpha1.ConditionDegraded && c.Status == metav1.ConditionTrue:
			t.degraded = append(t.degraded, name+": "+c.Message)
		}
	}
}

// conditions are the Work's own conditions over its n manifests.
func (t *tally) conditions(n int, p Plan) []metav1.Condition {
	out := []metav1.Condition{
		summary(lodestarworkv1alpha1.ConditionApplied, len(t.notApplied) == 0, lodestarworkv1alpha1.ReasonAllApplied, lodestarworkv1alpha1.ReasonSomeNotApplied,
			message.All(n, "manifest")+" applied", fmt.Sprintf("%d of %d manifests not applied", len(t.notApplied), n), t.notApplied),
		summary(lodestarworkv1alpha1.ConditionAvailable, len(t.notAvailable) == 0, lodestarworkv1alpha1.ReasonAllAvailable, lodestarworkv1alpha1.ReasonSomeNotAvailable,
			message.All(n, "manifest")+" available", fmt.Sprintf("%d of %d manifests not available", len(t.notAvailable), n), t.notAvailable),
		summary(lodestarworkv1alpha1.ConditionProgressing, len(t.progressing) > 0, lodestarworkv1alpha1.ReasonSomeProgressing, lodestarworkv1alpha1.ReasonNoneProgressing,
			fmt.Sprintf("%d of %d manifests progressing", len(t.progressing), n), "no manifest is progressing", t.progressing),
		summary(lodestarworkv1alpha1.ConditionDegraded, len(t.degraded) > 0, lodestarworkv1alpha1.ReasonSomeDegraded, lodestarworkv1alpha1.ReasonNoneDegraded,
			fmt.Sprintf("%d of %d manifests degraded", len(t.degraded), n), "no manifest is degraded", t.degraded),
	}
	if p.FeedbackErr != nil {
		out = append(out, metav1.Condition{Type: lodestarworkv1alpha1.ConditionStatusFeedback, Status: metav1.ConditionFalse, Reason: lodestarworkv1alpha1.ReasonInvalidFeedback, Message: p.FeedbackErr.Error()})
	}
	if t.reportsDrift {
		out = append(out, summary(lodestarworkv1alpha1.ConditionDrifted, len(t.drift) > 0, lodestarworkv1alpha1.ReasonDriftDetected, lodestarworkv1alpha1.ReasonNoDrift,
			fmt.Sprintf("%d of %d manifests changed on the member and left so (whenDrifted: Report)", len(t.drift), n), "no placed object was changed on the member", t.drift))
	}
	return out
}

// driftCondition is a manifest's Drifted condition.
func driftCondition(res Result) metav1.Condition {
	if len(res.Drift) > 0 {
		return metav1.Condition{Type: lodestarworkv1alpha1.ConditionDrifted, Status: metav1.ConditionTrue, Reason: lodestarworkv1alpha1.ReasonDriftDetected,
			Message: "changed on the member at " + strings.Join(res.Drift, ", ") + "; left so (whenDrifted: Report)"}
	}
	return metav1.Condition{Type: lodestarworkv1alpha1.ConditionDrifted, Status: metav1.ConditionFalse, Reason: lodestarworkv1alpha1.ReasonInSync, Message: "the member's object matches the manifest"}
}

// cleanupBlocked is the Work's CleanupBlocked condition for the objects whose
// removal is held on the member. Its reason is the first object's.
func cleanupBlocked(blocked []Held) metav1.Condition {
	what := make([]string, len(blocked))
	for i, h := range blocked {
		what[i] = h.What
	}
	msg := message.Count(len(blocked), "object") + " being deleted on the member and held there"
	if blocked[0].Reason == lodestarworkv1alpha1.ReasonKindNotServed {
		msg = fmt.Sprintf("%d objects to remove are of a kind the member does not serve now, so the agent cannot look them up; they are kept in the AppliedWork until the kind is served again", len(blocked))
	}
	return summary(lodestarworkv1alpha1.ConditionCleanupBlocked, true, blocked[0].Reason, "",
		msg+fmt.Sprintf("; the Work keeps its finalizer until they are gone, or until its deletion policy is Orphan (annotation %s: %s)",
			lodestarworkv1alpha1.DeletionPolicyAnnotation, lodestarworkv1alpha1.DeletionPolicyOrphan), "", what)
}

// CleanupBlockedStatus is the status of a deleted Work whose objects are held on
// the member: its other conditions as they were, with CleanupBlocked.
func CleanupBlockedStatus(work *workv1alpha1.Work, blocked []Held) workv1alpha1.WorkStatus {
	return workv1alpha1.WorkStatus{
		Conditions:         workConditions(work, []metav1.Condition{cleanupBlocked(blocked)}),
		ManifestConditions: work.Status.ManifestConditions,
	}
}

// InvalidStrategyStatus is the status of a Work whose apply strategy cannot be read:
// nothing was applied.
func InvalidStrategyStatus(work *workv1alpha1.Work, err error) workv1alpha1.WorkStatus {
	return workv1alpha1.WorkStatus{
		Conditions: workConditions(work, []metav1.Condition{{
			Type: lodestarworkv1alpha1.ConditionApplied, Status: metav1.ConditionFalse, Reason: lodestarworkv1alpha1.ReasonInvalidStrategy,
			Message: message.Truncate(err.Error(), maxMessage) + "; nothing was applied",
		}}),
		ManifestConditions: work.Status.ManifestConditions,
	}
}

// workConditions merges conds into the Work's current conditions at its
// generation; conditions of the optional types are dropped when conds lacks them.
func workConditions(work *workv1alpha1.Work, conds []metav1.Condition, optional ...string) []metav1.Condition {
	out := append([]metav1.Condition(nil), work.Status.Conditions...)
	for _, t := range optional {
		meta.RemoveStatusCondition(&out, t)
	}
	for _, c := range conds {
		c.ObservedGeneration = work.Generation
		c.Message = message.Truncate(c.Message, maxMessage)
		meta.SetStatusCondition(&out, c)
	}
	return out
}

func summary(t string, holds bool, trueReason, falseReason, trueMsg, falseMsg string, details []string) metav1.Condition {
	c := metav1.Condition{Type: t, Status: metav1.ConditionFalse, Reason: falseReason, Message: falseMsg}
	if holds {
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, trueReason, trueMsg
	}
	if len(details) > 0 {
		c.Message += ": " + message.List(details, 1, "; ")
	}
	return c
}

// trimStatus cuts st until it encodes in at most budget bytes, in steps that lose
// the least first: feedback values, then long messages, then the details of
// manifests that are applied and available. It returns whether it cut and what.
func trimStatus(st *workv1alpha1.WorkStatus, budget int) (bool, string) {
	size := func() int { b, _ := json.Marshal(st); return len(b) }
	if size() <= budget {
		return false, ""
	}
	steps := []struct {
		what string
		cut  func(*metav1.Condition) bool // returns true to drop the condition
	}{
		{"feedback values dropped", func(c *metav1.Condition) bool {
			if c.Type == lodestarworkv1alpha1.ConditionStatusFeedback {
				c.Reason, c.Message = lodestarworkv1alpha1.ReasonFeedbackTrimmed, `{"values":{},"trimmed":["*"]}`
			}
			return false
		}},
		{"messages shortened", func(c *metav1.Condition) bool {
			if !encoded(c.Type) {
				c.Message = message.Truncate(c.Message, 64)
			}
			return false
		}},
		{"conditions of healthy manifests dropped", nil},
	}
	var done []string
	for _, step := range steps {
		done = append(done, step.what)
		for i := range st.ManifestConditions {
			mc := &st.ManifestConditions[i]
			if step.cut == nil {
				if healthy(mc.Conditions) {
					// A claims report stays: it is what holds a move.
					mc.Conditions = slices.DeleteFunc(mc.Conditions, func(c metav1.Condition) bool { return c.Type != lodestarworkv1alpha1.ConditionClaims })
				}
				continue
			}
			kept := mc.Conditions[:0]
			for j := range mc.Conditions {
				if !step.cut(&mc.Conditions[j]) {
					kept = append(kept, mc.Conditions[j])
				}
			}
			mc.Conditions = kept
		}
		if size() <= budget {
			return true, joinSteps(done)
		}
	}
	// Still too large: keep only the manifests that are not healthy, as many as fit.
	var kept []workv1alpha1.ManifestCondition
	for _, mc := range st.ManifestConditions {
		if len(mc.Conditions) > 0 {
			kept = append(kept, mc)
		}
	}
	st.ManifestConditions = kept
	for size() > budget && len(st.ManifestConditions) > 0 {
		st.ManifestConditions = st.ManifestConditions[:len(st.ManifestConditions)/2]
	}
	return true, joinSteps(append(done, "manifest details beyond the budget dropped"))
}

// encoded tells whether a manifest condition's message is an encoding that
// readers decode (feedback, claims), never cut to a length.
func encoded(conditionType string) bool {
	return conditionType == lodestarworkv1alpha1.ConditionStatusFeedback || conditionType == lodestarworkv1alpha1.ConditionClaims
}

func healthy(conds []metav1.Condition) bool {
	return meta.IsStatusConditionTrue(conds, lodestarworkv1alpha1.ConditionApplied) && meta.IsStatusConditionTrue(conds, lodestarworkv1alpha1.ConditionAvailable)
}

func joinSteps(steps []string) string {
	out := ""
	for i, s := range steps {
		if i > 0 {
			out += ", "
		}
		out += s
	}
	return out
}

// WithOrdinals writes every manifest condition's identifier.ordinal, 0 included:
// the work-api type omits a zero ordinal, and upstream's newer CRD requires it.
func WithOrdinals(status map[string]any) {
	mcs, _ := status["manifestConditions"].([]any)
	for _, mc := range mcs {
		m, ok := mc.(map[string]any)
		if !ok {
			continue
		}
		id, ok := m["identifier"].(map[string]any)
		if !ok {
			id = map[string]any{}
			m["identifier"] = id
		}
		if _, ok := id["ordinal"]; !ok {
			id["ordinal"] = int64(0)
		}
	}
}

// ErrorMessage describes err; for a Secret, only the reason and the field paths
// of the member's answer, never values.
func ErrorMessage(err error, isSecret bool) string {
	if !isSecret {
		return err.Error()
	}
	msg := "the member refused the Secret: " + string(apierrors.ReasonForError(err))
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Details != nil {
		var fields []string
		for _, c := range status.Status().Details.Causes {
			if c.Field != "" {
				fields = append(fields, c.Field)
			}
		}
		if len(fields) > 0 {
			msg += " (fields " + strings.Join(fields, ", ") + ")"
		}
	}
	return msg
}

// Describe names a manifest's object in a message.
func Describe(id workv1alpha1.ResourceIdentifier) string {
	switch {
	case id.Kind == "":
		return "unknown object"
	case id.Namespace == "":
		return id.Kind + " " + id.Name
	default:
		return id.Kind + " " + id.Namespace + "/" + id.Name
	}
}

// AppliedCondition is a manifest's Applied condition.
func AppliedCondition(status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: lodestarworkv1alpha1.ConditionApplied, Status: status, Reason: reason, Message: message}
}

// manifestReadiness is the Available, Progressing and Degraded conditions of a manifest.
func manifestReadiness(checker *readiness.Checker, res Result) []metav1.Condition {
	switch {
	case res.RanOnce:
		return []metav1.Condition{{Type: lodestarworkv1alpha1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: lodestarworkv1alpha1.ReasonRanOnce, Message: "the Job ran and is gone from the member"}}
	case res.Live == nil && res.Condition.Status == metav1.ConditionTrue:
		return []metav1.Condition{{Type: lodestarworkv1alpha1.ConditionAvailable, Status: metav1.ConditionFalse, Reason: lodestarworkv1alpha1.ReasonNotFound, Message: "the object is not on the member"}}
	case res.Live == nil || res.Condition.Status != metav1.ConditionTrue && res.Condition.Reason != lodestarworkv1alpha1.ReasonOutOfSync:
		return []metav1.Condition{{Type: lodestarworkv1alpha1.ConditionAvailable, Status: metav1.ConditionFalse, Reason: lodestarworkv1alpha1.ReasonNotApplied, Message: "the object is not applied"}}
	}
	h := BlockerReadiness(checker.Evaluate(res.Live), res)
	status := func(b bool) metav1.ConditionStatus {
		if b {
			return metav1.ConditionTrue
		}
		return metav1.ConditionFalse
	}
	return []metav1.Condition{
		{Type: lodestarworkv1alpha1.ConditionAvailable, Status: status(h.Available), Reason: h.Reason, Message: h.Message},
		{Type: lodestarworkv1alpha1.ConditionProgressing, Status: status(h.Progressing), Reason: h.Reason, Message: h.Message},
		{Type: lodestarworkv1alpha1.ConditionDegraded, Status: status(h.Degraded), Reason: h.Reason, Message: h.Message},
	}
}
