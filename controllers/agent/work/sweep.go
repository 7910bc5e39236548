package work

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/workapply"
)

// DefaultMissingWorkGracePeriod is how long a Work may be missing from the hub
// before the agent removes what it placed for it: long enough to restore a hub
// from a backup taken before the Work existed (OCM waits as long).
const DefaultMissingWorkGracePeriod = 60 * time.Minute

// Sweeper removes what the agent placed for Works that the hub no longer has: a
// Work whose finalizer was removed by hand, or that was lost with the hub's state,
// while the agent was away. A Work counts as missing only when the hub itself
// answers that it does not exist; an unreachable hub, or any other error, counts
// as nothing. The AppliedWork is marked with the time the Work was first found
// missing, and its objects are removed only after the grace period; the Work
// coming back within it cancels that.
type Sweeper struct {
	// Reconciler removes the objects, as for a deleted Work.
	Reconciler *Reconciler
	// HubCache is the agent's cache of the hub, which must be synced before
	// anything is judged missing; HubReader reads the hub directly.
	HubCache interface {
		WaitForCacheSync(ctx context.Context) bool
	}
	HubReader client.Reader
	// Namespace is the cluster's namespace on the hub: AppliedWorks of other
	// namespaces (another agent on the same member) are left alone.
	Namespace string
	// GracePeriod is how long a Work may be missing (default
	// DefaultMissingWorkGracePeriod).
	GracePeriod time.Duration
	// Now returns the time (default time.Now).
	Now func() time.Time
}

// Start sweeps, once the hub cache has synced, then every tenth of the grace
// period (at most every minute), until ctx ends.
func (s *Sweeper) Start(ctx context.Context) error {
	if s.GracePeriod <= 0 {
		s.GracePeriod = DefaultMissingWorkGracePeriod
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithName("sweeper"))
	if !s.HubCache.WaitForCacheSync(ctx) {
		return nil
	}
	every := min(max(s.GracePeriod/10, 100*time.Millisecond), time.Minute)
	for {
		if err := s.sweep(ctx); err != nil && ctx.Err() == nil {
			ctrl.LoggerFrom(ctx).Error(err, "Looking for AppliedWorks whose Work is gone from the hub")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

// NeedLeaderElection is false: the agent runs one replica per member.
func (s *Sweeper) NeedLeaderElection() bool { return false }

func (s *Sweeper) sweep(ctx context.Context) error {
	// Only the records of this agent's hub: another hub's Works are not on this one.
	list := &lodestarworkv1alpha1.AppliedWorkList{}
	if err := s.Reconciler.Member.List(ctx, list, client.MatchingLabels{lodestarworkv1alpha1.HubLabel: s.Reconciler.HubID}); err != nil {
		return err
	}
	for i := range list.Items {
		applied := &list.Items[i]
		if applied.Spec.WorkNamespace != s.Namespace || !applied.DeletionTimestamp.IsZero() && len(applied.Finalizers) == 0 {
			continue
		}
		if err := s.check(ctx, applied); err != nil && ctx.Err() == nil {
			ctrl.LoggerFrom(ctx).Error(err, "Checking an AppliedWork", "appliedWork", applied.Name)
		}
	}
	return nil
}

// check marks, unmarks or removes one AppliedWork.
func (s *Sweeper) check(ctx context.Context, applied *lodestarworkv1alpha1.AppliedWork) error {
	key := client.ObjectKey{Namespace: applied.Spec.WorkNamespace, Name: applied.Spec.WorkName}
	log := ctrl.LoggerFrom(ctx).WithValues("work", klog.KRef(key.Namespace, key.Name))
	found, err := s.workExists(ctx, key)
	if err != nil {
		// The hub did not answer: that is no reason to remove anything.
		log.V(1).Info("Not judging an AppliedWork while the hub does not answer", "error", err.Error())
		return nil
	}
	since, marked := applied.Annotations[lodestarworkv1alpha1.WorkMissingSinceAnnotation]
	switch {
	case found && marked:
		log.Info("The Work is back on the hub: its objects stay")
		return s.Reconciler.onMember().MarkWorkMissing(ctx, applied, "")
	case found:
		return nil
	case !marked:
		log.Info("The Work is gone from the hub; its objects are removed after the grace period unless it comes back", "gracePeriod", s.GracePeriod)
		return s.Reconciler.onMember().MarkWorkMissing(ctx, applied, s.Now().UTC().Format(time.RFC3339))
	}
	t, err := time.Parse(time.RFC3339, since)
	if err != nil {
		return s.Reconciler.onMember().MarkWorkMissing(ctx, applied, s.Now().UTC().Format(time.RFC3339))
	}
	if s.Now().Sub(t) < s.GracePeriod {
		return nil
	}
	policy := workapply.RecordedDeletionPolicy(applied)
	if policy == lodestarworkv1alpha1.DeletionOrphan {
		log.Info("Releasing the objects of an Orphan Work missing from the hub for longer than the grace period", "missingSince", since)
	} else {
		log.Info("Removing the objects of a Work missing from the hub for longer than the grace period", "missingSince", since)
	}
	_, err = s.Reconciler.forget(ctrl.LoggerInto(ctx, log), applied, policy)
	return err
}

// workExists asks the cache, then the hub itself, whether the Work exists.
func (s *Sweeper) workExists(ctx context.Context, key client.ObjectKey) (bool, error) {
	err := s.Reconciler.Hub.Get(ctx, key, &workv1alpha1.Work{})
	if err == nil {
		return true, nil
	}
	if !apierrors.IsNotFound(err) {
		return false, err
	}
	err = s.HubReader.Get(ctx, key, &workv1alpha1.Work{})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, err
}
