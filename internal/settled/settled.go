// Package settled says whether a Placement has settled, in the two conditions
// the tools that read any object's status look for (kstatus, as Flux, kpt and
// helm v4's --wait use it; Argo CD's health check for Placements):
// Reconciling is True while the Placement's current generation is not yet
// carried out on every selected cluster, and Stalled is True when it cannot be
// without someone acting (an invalid spec, no cluster to go to, a rollout
// stopped by its failure budget or deadline); a revision the namespace's
// FleetQuotas hold back keeps Reconciling True. They sum up the conditions each
// controller writes, at the Placement's generation. It is pure: the settled
// controller reads and writes.
package settled

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// The conditions kstatus reads.
const (
	ReconcilingCondition = "Reconciling"
	StalledCondition     = "Stalled"
)

// The reasons of Reconciling (InProgress while True) and Stalled when
// neither is True.
const (
	ReasonInProgress = "InProgress"
	ReasonSettled    = "Settled"
	ReasonNotStalled = "NotStalled"
)

// carriedOut are the conditions a settled Placement has True at its
// generation, in the order the work flows.
var carriedOut = []string{
	placementv1alpha1.ScheduledCondition, placementv1alpha1.RenderedCondition, placementv1alpha1.WorkSynchronizedCondition,
	placementv1alpha1.ProgressingCondition, placementv1alpha1.AppliedCondition, placementv1alpha1.AvailableCondition,
}

// stalls are the reasons of a False condition that nothing changes but a
// person: the spec is refused, no cluster may take it, or the rollout
// stopped.
var stalls = map[string]bool{
	placementv1alpha1.ReasonNoClusterSetBinding: true, placementv1alpha1.ReasonNoMatchingClusters: true,
	placementv1alpha1.ReasonCarrierInTheWay: true, placementv1alpha1.ReasonWorkTooLarge: true,
	placementv1alpha1.ReasonNotDivisible: true, placementv1alpha1.ReasonDecisionRejected: true,
	placementv1alpha1.ReasonFailureBudgetExceeded: true, placementv1alpha1.ReasonProgressDeadlineExceeded: true,
	placementv1alpha1.ReasonRolloutBlocked: true, placementv1alpha1.ReasonUnknownClusterNames: true,
}

// done tells whether a condition says its part is carried out: True, and for
// Progressing (True while a rollout goes on, too) a rollout that went as far as
// it goes.
func done(c *metav1.Condition) bool {
	if c.Type == placementv1alpha1.ProgressingCondition {
		return c.Reason == placementv1alpha1.ReasonRolloutComplete || c.Reason == placementv1alpha1.ReasonRolloutCompleteWithFailures
	}
	return c.Status == metav1.ConditionTrue
}

// stalled tells whether a condition's reason needs someone to act: the listed
// ones and every Invalid... reason.
func stalled(c *metav1.Condition) bool {
	return c.Status == metav1.ConditionFalse && (stalls[c.Reason] || strings.HasPrefix(c.Reason, "Invalid"))
}

// Conditions are the Reconciling and Stalled conditions of a Placement at
// generation gen with these conditions. Reconciling's reason and message name
// no step (the other conditions do): it changes twice per generation, when
// the generation starts and when it is carried out, and costs the hub two
// status writes per rollout, not one per step.
func Conditions(existing []metav1.Condition, gen int64) (reconciling, stall metav1.Condition) {
	reconciling = metav1.Condition{Type: ReconcilingCondition, Status: metav1.ConditionFalse, Reason: ReasonSettled, ObservedGeneration: gen,
		Message: fmt.Sprintf("generation %d is carried out on every selected cluster", gen)}
	stall = metav1.Condition{Type: StalledCondition, Status: metav1.ConditionFalse, Reason: ReasonNotStalled, ObservedGeneration: gen,
		Message: "nothing stops the Placement"}
	// An interpretation that does not compile fails its kind's objects until
	// a platform admin fixes it, whatever the generation.
	if c := meta.FindStatusCondition(existing, placementv1alpha1.InterpretedCondition); c != nil && stalled(c) {
		stall.Status, stall.Reason, stall.Message = metav1.ConditionTrue, c.Reason, fmt.Sprintf("%s: %s", c.Type, c.Message)
		reconciling.Reason, reconciling.Message = c.Reason, fmt.Sprintf("stalled: %s is False (%s)", c.Type, c.Reason)
		return reconciling, stall
	}
	inProgress := false
	for _, t := range carriedOut {
		c := meta.FindStatusCondition(existing, t)
		switch {
		case c == nil || c.ObservedGeneration < gen:
			inProgress = true
		case stalled(c):
			stall.Status, stall.Reason, stall.Message = metav1.ConditionTrue, c.Reason, fmt.Sprintf("%s: %s", t, c.Message)
			reconciling.Reason, reconciling.Message = c.Reason, fmt.Sprintf("stalled: %s is False (%s)", t, c.Reason)
			return reconciling, stall
		case !done(c):
			inProgress = true
		}
	}
	// A revision the namespace's FleetQuotas hold back is not carried out,
	// whatever the older revision rolled out in its place says.
	if c := meta.FindStatusCondition(existing, placementv1alpha1.QuotaAdmittedCondition); c != nil && c.Status == metav1.ConditionFalse {
		reconciling.Status, reconciling.Reason = metav1.ConditionTrue, c.Reason
		reconciling.Message = fmt.Sprintf("generation %d waits for the namespace's FleetQuotas (QuotaAdmitted is False): %s", gen, c.Message)
		return reconciling, stall
	}
	if inProgress {
		reconciling.Status, reconciling.Reason = metav1.ConditionTrue, ReasonInProgress
		reconciling.Message = fmt.Sprintf("generation %d is being carried out (Scheduled, Progressing, Applied and Available say where it is)", gen)
	}
	return reconciling, stall
}
