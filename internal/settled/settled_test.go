package settled

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// all is a Placement's conditions at generation gen, each True with its own
// type as reason, Progressing complete, changed by edits (type → condition).
func all(gen int64, edits ...metav1.Condition) []metav1.Condition {
	var out []metav1.Condition
	for _, t := range carriedOut {
		c := metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: t, ObservedGeneration: gen}
		if t == placementv1alpha1.ProgressingCondition {
			c.Reason = placementv1alpha1.ReasonRolloutComplete
		}
		for _, e := range edits {
			if e.Type == t {
				c = e
			}
		}
		out = append(out, c)
	}
	return out
}

func TestConditions(t *testing.T) {
	for _, tc := range []struct {
		name              string
		conditions        []metav1.Condition
		reconciling, stop metav1.ConditionStatus
		reason            string
	}{
		{"carried out", all(3), metav1.ConditionFalse, metav1.ConditionFalse, ReasonSettled},
		{"an earlier generation", all(2), metav1.ConditionTrue, metav1.ConditionFalse, ReasonInProgress},
		{"nothing written yet", nil, metav1.ConditionTrue, metav1.ConditionFalse, ReasonInProgress},
		{"a rollout going on", all(3, metav1.Condition{Type: placementv1alpha1.ProgressingCondition, Status: metav1.ConditionTrue,
			Reason: placementv1alpha1.ReasonRolloutInProgress, ObservedGeneration: 3}), metav1.ConditionTrue, metav1.ConditionFalse, ReasonInProgress},
		{"waiting for approval", all(3, metav1.Condition{Type: placementv1alpha1.ProgressingCondition, Status: metav1.ConditionUnknown,
			Reason: placementv1alpha1.ReasonWaitingForApproval, ObservedGeneration: 3}), metav1.ConditionTrue, metav1.ConditionFalse, ReasonInProgress},
		{"not available yet", all(3, metav1.Condition{Type: placementv1alpha1.AvailableCondition, Status: metav1.ConditionFalse,
			Reason: placementv1alpha1.ReasonNotAvailable, ObservedGeneration: 3}), metav1.ConditionTrue, metav1.ConditionFalse, ReasonInProgress},
		{"an invalid override", all(3, metav1.Condition{Type: placementv1alpha1.RenderedCondition, Status: metav1.ConditionFalse,
			Reason: placementv1alpha1.ReasonInvalidOverride, ObservedGeneration: 3}), metav1.ConditionFalse, metav1.ConditionTrue, placementv1alpha1.ReasonInvalidOverride},
		{"no binding", all(3, metav1.Condition{Type: placementv1alpha1.ScheduledCondition, Status: metav1.ConditionFalse,
			Reason: placementv1alpha1.ReasonNoClusterSetBinding, ObservedGeneration: 3}), metav1.ConditionFalse, metav1.ConditionTrue, placementv1alpha1.ReasonNoClusterSetBinding},
		{"the failure budget spent", all(3, metav1.Condition{Type: placementv1alpha1.ProgressingCondition, Status: metav1.ConditionFalse,
			Reason: placementv1alpha1.ReasonFailureBudgetExceeded, ObservedGeneration: 3}), metav1.ConditionFalse, metav1.ConditionTrue, placementv1alpha1.ReasonFailureBudgetExceeded},
		{"an invalid interpretation, written at an earlier generation", append(all(3, metav1.Condition{Type: placementv1alpha1.AvailableCondition, Status: metav1.ConditionFalse,
			Reason: placementv1alpha1.ReasonNotAvailable, ObservedGeneration: 3}), metav1.Condition{Type: placementv1alpha1.InterpretedCondition, Status: metav1.ConditionFalse,
			Reason: placementv1alpha1.ReasonInvalidInterpretation, ObservedGeneration: 2}), metav1.ConditionFalse, metav1.ConditionTrue, placementv1alpha1.ReasonInvalidInterpretation},
		{"a valid interpretation", append(all(3), metav1.Condition{Type: placementv1alpha1.InterpretedCondition, Status: metav1.ConditionTrue,
			Reason: placementv1alpha1.ReasonInterpreted, ObservedGeneration: 3}), metav1.ConditionFalse, metav1.ConditionFalse, ReasonSettled},
		{"a revision the quota holds, an older one rolled out", append(all(3), metav1.Condition{Type: placementv1alpha1.QuotaAdmittedCondition, Status: metav1.ConditionFalse,
			Reason: placementv1alpha1.ReasonQuotaExceeded, ObservedGeneration: 3}), metav1.ConditionTrue, metav1.ConditionFalse, placementv1alpha1.ReasonQuotaExceeded},
		{"a revision the quota admitted", append(all(3), metav1.Condition{Type: placementv1alpha1.QuotaAdmittedCondition, Status: metav1.ConditionTrue,
			Reason: placementv1alpha1.ReasonQuotaAdmitted, ObservedGeneration: 3}), metav1.ConditionFalse, metav1.ConditionFalse, ReasonSettled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r, s := Conditions(tc.conditions, 3)
			g.Expect(r.Status).To(Equal(tc.reconciling), r.Message)
			g.Expect(s.Status).To(Equal(tc.stop), s.Message)
			if tc.stop == metav1.ConditionTrue {
				g.Expect(s.Reason).To(Equal(tc.reason))
			} else {
				g.Expect(r.Reason).To(Equal(tc.reason))
			}
			g.Expect(r.ObservedGeneration).To(BeEquivalentTo(3))
		})
	}
	// Every step of a rollout reads the same: no write per step.
	a, _ := Conditions(all(3, metav1.Condition{Type: placementv1alpha1.ProgressingCondition, Status: metav1.ConditionTrue,
		Reason: placementv1alpha1.ReasonRolloutInProgress, ObservedGeneration: 3}), 3)
	b, _ := Conditions(all(3, metav1.Condition{Type: placementv1alpha1.AvailableCondition, Status: metav1.ConditionFalse,
		Reason: placementv1alpha1.ReasonNotAvailable, ObservedGeneration: 3}), 3)
	NewWithT(t).Expect(a).To(Equal(b))
}
