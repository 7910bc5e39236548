package workgenerator

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/percluster"
)

// written is the shares annotation last written to a cluster's Works while
// the cache does not show it yet.
func (r *Reconciler) written(placement *placementv1alpha1.Placement, cluster string, parts []*workv1alpha1.Work) (string, bool) {
	return r.sharesWritten.Lookup(expectationKey(placement, cluster), func(shares string) bool {
		return len(parts) > 0 && parts[0].Annotations[placementv1alpha1.SharesAnnotation] == shares
	})
}

// newDivider reads what the chosen clusters carry (what was written to them,
// where the cache does not show it yet), which shares their claims hold, and
// whether they are Available: a percluster.Divider over them.
func (r *Reconciler) newDivider(s *scope) *percluster.Divider {
	hold := s.placement.Spec.Strategy.Stateful != placementv1alpha1.StatefulMove
	chosen := make([]percluster.Chosen, 0, len(s.decided.Clusters))
	for _, name := range s.decided.Clusters {
		view, parts := s.renderer.View(name), s.works[name]
		written, unseen := r.written(s.placement, name, parts)
		chosen = append(chosen, percluster.ChosenOf(view, parts, written, unseen, hold))
	}
	return percluster.NewDivider(string(s.placement.UID), &r.divisions, chosen, s.interpretations)
}

// divisionGate is the Progressing condition of a Placement that divides
// replicas: False (NotEnoughCapacity, NotDivisible) when the target's division
// failed for a workload, with a Warning event when it starts; else the message
// says which shares wait for the increases (surge first), and which sums an
// override changed (with a Warning event when that changes).
func (r *Reconciler) divisionGate(s *scope, cond metav1.ConditionStatus, reason, msg string) (metav1.ConditionStatus, string, string) {
	a := s.division
	if a == nil || len(s.decided.Clusters) == 0 {
		return cond, reason, msg // no cluster to divide over: Progressing says so
	}
	if why, m := percluster.DivisionProblems(a); why != "" {
		r.warnOnce(s.placement, why, m)
		return metav1.ConditionFalse, why, m
	}
	if m := percluster.SurgeMessage(a); m != "" {
		msg += "; " + m
	}
	if m := percluster.OverriddenMessage(a, s.renderer.Overridden()); m != "" {
		if c := meta.FindStatusCondition(s.placement.Status.Conditions, placementv1alpha1.ProgressingCondition); c == nil || !strings.Contains(c.Message, m) {
			r.Recorder.Eventf(s.placement, nil, corev1.EventTypeWarning, placementv1alpha1.ReasonSharesOverridden, "Divide", "%s", m)
		}
		msg += "; " + m
	}
	return cond, reason, msg
}
