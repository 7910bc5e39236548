package workgenerator

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/conditions"
	"github.com/lodestar-dev/lodestar/internal/patch"
)

// status is the work generator's part of a Placement's status, as one reconcile
// found it: the WorkSynchronized and Progressing conditions and status.rollout.
type status struct {
	synchronized conditions.Decision
	progressing  conditions.Decision
	rollout      *placementv1alpha1.RolloutStatus
	// deferred, when set, is when a write skipped for pace is due.
	deferred time.Duration
}

// statusEvery is the least time between two status writes of a Placement that
// change only counts and per-cluster states; a change of a condition's status or
// reason, of the target, stable revision or stage is written at once.
const statusEvery = time.Second

func (s *status) set(st metav1.ConditionStatus, reason, format string, args ...any) {
	s.synchronized.Set(placementv1alpha1.WorkSynchronizedCondition, st, reason, format, args...)
}

// applyStatus writes the generator's conditions and status.rollout. What a
// reconcile did not decide (it ended early) is written as it was, since fields
// an owner leaves out of an apply are removed; nothing is written when nothing
// changed.
func (r *Reconciler) applyStatus(ctx context.Context, placement *placementv1alpha1.Placement, s *status) error {
	existing := placement.Status.Conditions
	changed, material := false, false
	var conds []metav1.Condition
	for _, d := range []struct {
		decision *conditions.Decision
		t        string
	}{{&s.synchronized, placementv1alpha1.WorkSynchronizedCondition}, {&s.progressing, placementv1alpha1.ProgressingCondition}} {
		if c, ok := d.decision.For(existing, placement.Generation); ok {
			changed = changed || !conditions.Same(existing, c)
			material = material || conditions.Moved(existing, c)
			conds = append(conds, c)
		} else if old := meta.FindStatusCondition(existing, d.t); old != nil {
			conds = append(conds, *old)
		}
	}
	ro := s.rollout
	if ro == nil {
		ro = placement.Status.Rollout
	} else if old := placement.Status.Rollout; !equality.Semantic.DeepEqual(ro, old) {
		changed = true
		material = material || old == nil || old.TargetRevision != ro.TargetRevision || old.StableRevision != ro.StableRevision ||
			old.CurrentStage != ro.CurrentStage || !ptr.Equal(old.FailedClusters, ro.FailedClusters)
	}
	if !changed {
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
