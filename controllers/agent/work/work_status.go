package work

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	"github.com/lodestar-dev/lodestar/internal/kube"
)

// ConditionApplied is the Work and manifest condition that says whether applying
// succeeded.
const ConditionApplied = "Applied"

// Reasons of the Work's Applied condition.
const (
	ReasonAllApplied     = "AllManifestsApplied"
	ReasonSomeNotApplied = "ManifestsNotApplied"
)

// newWorkStatus computes the Work's status from the results of applying its
// manifests, keeping the transition times of conditions that did not change.
func newWorkStatus(work *workv1alpha1.Work, results []result) workv1alpha1.WorkStatus {
	previous := map[int][]metav1.Condition{}
	for _, mc := range work.Status.ManifestConditions {
		previous[mc.Identifier.Ordinal] = mc.Conditions
	}
	st := workv1alpha1.WorkStatus{ManifestConditions: make([]workv1alpha1.ManifestCondition, 0, len(results))}
	failed := 0
	for _, res := range results {
		conds := append([]metav1.Condition(nil), previous[res.id.Ordinal]...)
		c := res.condition
		c.ObservedGeneration = work.Generation
		meta.SetStatusCondition(&conds, c)
		st.ManifestConditions = append(st.ManifestConditions, workv1alpha1.ManifestCondition{Identifier: res.id, Conditions: conds})
		if c.Status != metav1.ConditionTrue {
			failed++
		}
	}
	c := metav1.Condition{Type: ConditionApplied, Status: metav1.ConditionTrue, Reason: ReasonAllApplied,
		Message: fmt.Sprintf("all %d manifests applied", len(results)), ObservedGeneration: work.Generation}
	if failed > 0 {
		c.Status, c.Reason = metav1.ConditionFalse, ReasonSomeNotApplied
		c.Message = fmt.Sprintf("%d of %d manifests not applied: %s", failed, len(results), firstFailure(results))
	}
	st.Conditions = append([]metav1.Condition(nil), work.Status.Conditions...)
	meta.SetStatusCondition(&st.Conditions, c)
	return st
}

func firstFailure(results []result) string {
	for _, res := range results {
		if res.condition.Status != metav1.ConditionTrue {
			return res.condition.Message
		}
	}
	return ""
}

// applyWorkStatus writes the Work's status on the hub; the agent is its only writer.
func (r *Reconciler) applyWorkStatus(ctx context.Context, work *workv1alpha1.Work, st workv1alpha1.WorkStatus) error {
	patch := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: work.Name, Namespace: work.Namespace}, Status: st}
	return kube.ApplyStatus(ctx, r.Hub, patch, FieldManager)
}
