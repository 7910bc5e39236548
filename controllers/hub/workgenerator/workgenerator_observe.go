package workgenerator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/claims"
	"github.com/lodestar-dev/lodestar/internal/clusterworks"
	"github.com/lodestar-dev/lodestar/internal/division"
	"github.com/lodestar-dev/lodestar/internal/interpretation"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/percluster"
	"github.com/lodestar-dev/lodestar/internal/phases"
	"github.com/lodestar-dev/lodestar/internal/rollout"
	"github.com/lodestar-dev/lodestar/internal/scheduling"
	"github.com/lodestar-dev/lodestar/internal/workshape"
)

// scope is what one reconcile of a Placement knows and decides, phase by phase.
type scope struct {
	placement *placementv1alpha1.Placement
	// written are the clusters whose Works this reconcile wrote (after the
	// gate's plan was made).
	written   []string
	writtenMu sync.Mutex
	// st is the work generator's part of the Placement's status, as this
	// reconcile finds it; written once, at the end.
	st       *status
	now      time.Time
	strategy rollout.Strategy
	decided  lookup.Decisions
	// target is the revision rolled out, stable the last one every cluster had,
	// revs every revision, newest first.
	target, stable *placementv1alpha1.PlacementRevision
	revs           []placementv1alpha1.PlacementRevision
	// works are each cluster's Works of the Placement that are not being
	// deleted, in part order.
	works map[string][]*workv1alpha1.Work
	// leaving are the clusters the Placement left whose Works are still
	// there, with every fact make-before-break decides on (rollout.Depart).
	leaving []rollout.Leaving
	// held describe the copies the stateful gate keeps (failoverHeld: one of
	// them by a failover).
	held         []string
	failoverHeld bool
	// annotations carry the apply strategy, feedback and health rules to
	// every Work.
	annotations map[string]string
	// interpretations are the hub's ResourceInterpretations in use.
	interpretations *interpretation.Set
	// labels are the selected clusters' labels (Staged).
	labels   map[string]map[string]string
	renderer *percluster.Renderer
	state    rollout.State

	// The gate's: what each selected cluster is, the target rendered for each,
	// the clusters overrides fail on (and why), and the plan.
	clusters []rollout.Cluster
	targetOf map[string]percluster.Content
	failed   map[string]string
	plan     rollout.Plan
	// removal is what becomes of the clusters the Placement left, retained the
	// claims those removed now keep, by cluster.
	removal  rollout.Removal
	retained map[string][]string
	// division is the target revision's division over the selected
	// clusters, surge first; nil when it divides nothing.
	division *division.Assignment
	// retainedBefore is status.rollout.retainedClaims as last written.
	retainedBefore []placementv1alpha1.RetainedClaims
}

// wroteTo records that this reconcile wrote cluster's Works.
func (s *scope) wroteTo(cluster string) {
	s.writtenMu.Lock()
	defer s.writtenMu.Unlock()
	s.written = append(s.written, cluster)
}

// observe reads what the Placement's rollout starts from: its strategy, the
// revision to roll out, its decisions, its Works and the clusters it left. It
// waits when there is nothing to do yet, as the status says.
func (r *Reconciler) observe(ctx context.Context, s *scope) (ctrl.Result, error) {
	placement, st := s.placement, s.st
	var err error
	if s.strategy, err = rollout.StrategyFor(placement.Spec.Strategy); err != nil {
		st.set(metav1.ConditionFalse, placementv1alpha1.ReasonInvalidStrategy, "%v", err)
		r.Recorder.Eventf(placement, nil, corev1.EventTypeWarning, placementv1alpha1.ReasonInvalidStrategy, "Rollout", "%v", err)
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	if ok, err := r.observeRevisions(ctx, s); err != nil {
		return ctrl.Result{}, err
	} else if !ok {
		return phases.Wait(0)
	}
	if s.decided, err = lookup.DecidedIn(ctx, r.Client, placement, r.Scope.Sets); err != nil {
		return ctrl.Result{}, err
	}
	if len(s.decided.Rejected) > 0 {
		ctrl.LoggerFrom(ctx).Info("Ignoring PlacementDecisions that may not send Works", "rejected", s.decided.Rejected)
		r.Recorder.Eventf(placement, nil, corev1.EventTypeWarning, placementv1alpha1.ReasonDecisionRejected, "Decide",
			"ignored: %s", message.List(s.decided.Rejected, 5, "; "))
	}
	if !s.decided.Found {
		// Without decisions nothing is known of where the objects belong: the
		// Works stay as they are.
		msg := "no PlacementDecision names this Placement yet"
		if len(s.decided.Rejected) > 0 {
			msg += "; ignored: " + message.List(s.decided.Rejected, 3, "; ")
		}
		st.set(metav1.ConditionFalse, placementv1alpha1.ReasonWaitingForDecisions, "%s", msg)
		return phases.Wait(0)
	}
	works, err := lookup.Works(ctx, r.Client, placement, client.UnsafeDisableDeepCopy)
	if err != nil {
		return ctrl.Result{}, err
	}
	s.works = clusterworks.ByCluster(slices.DeleteFunc(works, func(w workv1alpha1.Work) bool { return !w.DeletionTimestamp.IsZero() }))
	if err := r.observeLeaving(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.observeClusters(ctx, s)
}

// observeRevisions finds the revision the revision maker names and the one
// every cluster had; false when there is none to roll out, as st says.
func (r *Reconciler) observeRevisions(ctx context.Context, s *scope) (bool, error) {
	st := s.st
	p := s.placement
	// A refused selector (InvalidResourceSelector) still renders the others
	// into status.revision; any other False Rendered made no revision.
	if c := meta.FindStatusCondition(p.Status.Conditions, placementv1alpha1.RenderedCondition); c != nil &&
		c.ObservedGeneration == p.Generation && c.Status == metav1.ConditionFalse && c.Reason != placementv1alpha1.ReasonInvalidResourceSelector {
		st.set(metav1.ConditionFalse, placementv1alpha1.ReasonNotRendered,
			"the selected objects cannot be rendered (Rendered: %s); the Works keep what they hold", c.Reason)
		return false, nil
	}
	revs, err := lookup.Revisions(ctx, r.Client, p)
	if err != nil {
		return false, err
	}
	i := slices.IndexFunc(revs, func(rv placementv1alpha1.PlacementRevision) bool { return rv.Name == p.Status.Revision })
	if i < 0 {
		// The revision maker writes status.revision once its cache, this
		// cache, shows the revision: its creation brings the next reconcile.
		st.set(metav1.ConditionFalse, placementv1alpha1.ReasonWaitingForRevision, "waiting for the revision maker's PlacementRevision %q", p.Status.Revision)
		return false, nil
	}
	s.revs, s.target = revs, &revs[i]
	if ok, err := r.quotaTarget(ctx, s); !ok || err != nil {
		return false, err
	}
	if ro := p.Status.Rollout; ro != nil {
		if j := slices.IndexFunc(revs, func(rv placementv1alpha1.PlacementRevision) bool { return rv.Name == ro.StableRevision }); j >= 0 {
			s.stable = &revs[j]
		}
	}
	hashes := make([]string, len(revs))
	for j := range revs {
		hashes[j] = revs[j].Spec.Hash
	}
	r.compiled.Keep(client.ObjectKeyFromObject(p), hashes)
	return true, nil
}

// observeLeaving finds the clusters the Placement left whose Works are still
// there, marking when each left. Only a consistent set of decisions tells that a
// cluster left.
func (r *Reconciler) observeLeaving(ctx context.Context, s *scope) error {
	if !s.decided.Consistent {
		return nil
	}
	for _, cluster := range slices.Sorted(maps.Keys(s.works)) {
		if slices.Contains(s.decided.Clusters, cluster) {
			continue
		}
		if err := r.markLeaving(ctx, s.works[cluster], s.now); err != nil {
			return err
		}
		ps, err := lookup.StateOf(ctx, r.Client, cluster, s.decided.Sets)
		if err != nil {
			return err
		}
		l := rollout.LeavingOf(cluster, s.works[cluster], ps.Revoked, s.now)
		failover := s.placement.Spec.Scheduling.Failover
		if failover != nil && !ps.Reachable {
			// A failed-over cluster's copy waits for its replacement at most the
			// failover grace period.
			l.Deadline = time.Duration(ptr.Deref(failover.GracePeriodSeconds, 600)) * time.Second
		}
		l.FailedOver = failover != nil && !ps.Reachable
		if s.placement.Namespace != placementv1alpha1.ClusterPlacementNamespace {
			// A forced drain overrules tenants, not the platform's own.
			l.ForcedAt = ps.ForcedAt
		}
		if holding := claims.Holding(s.works[cluster]); len(holding) > 0 {
			l.Claims = claims.DescribeAll(cluster, holding, 3)
			l.ClaimsMove = s.placement.Spec.Strategy.Stateful == placementv1alpha1.StatefulMove || ps.DrainStateful
		}
		if l.Traffic, err = r.trafficOf(ctx, s, cluster); err != nil {
			return err
		}
		s.leaving = append(s.leaving, l)
	}
	return nil
}

// observeClusters reads what the gate and the renderer need of the selected
// clusters, and what every Work carries whatever its revision.
func (r *Reconciler) observeClusters(ctx context.Context, s *scope) error {
	p := s.placement
	staged := s.strategy.Type == placementv1alpha1.RolloutStaged
	var profiles map[string]*cpv1alpha1.ClusterProfile
	if staged || slices.ContainsFunc(s.revs, func(rv placementv1alpha1.PlacementRevision) bool {
		return len(rv.Spec.Overrides) > 0 || rv.Spec.Division != nil
	}) {
		var err error
		if profiles, err = lookup.ProfilesIn(ctx, r.Client, s.decided.Clusters, s.decided.Sets); err != nil {
			return err
		}
	}
	views := make(map[string]scheduling.Cluster, len(profiles))
	for name, profile := range profiles {
		views[name] = scheduling.ClusterOf(profile)
	}
	s.renderer = percluster.NewRenderer(client.ObjectKeyFromObject(p), &r.compiled, views)
	s.renderer.Unseal(func(rev *placementv1alpha1.PlacementRevision) (map[string][]byte, error) {
		data, _, err := lookup.RevisionData(ctx, r.Client, rev.Namespace, names.RevisionData(rev.Spec.Placement, rev.Spec.Hash))
		return data, err
	})
	s.labels = map[string]map[string]string{}
	for name, profile := range profiles {
		if staged {
			s.labels[name] = profile.Labels
		}
	}
	target, err := s.renderer.Revision(s.target)
	if err != nil {
		return err
	}
	if s.interpretations, err = lookup.Interpretations(ctx, r.Client, r.Interpretations); err != nil {
		return err
	}
	if s.annotations, err = workshape.Annotations(p, target.Manifests, s.interpretations); err != nil {
		return fmt.Errorf("the Placement's feedback rules: %w", err)
	}
	s.state = rollout.State{Target: s.target.Spec.Hash, Paused: p.Spec.Strategy.Paused, Leaving: len(s.leaving)}
	if s.held, s.failoverHeld = rollout.Holds(s.leaving); len(s.held) > 0 {
		s.state.Hold = rollout.HoldMessage(s.held)
	} else if s.state.Hold, err = r.quotaHold(ctx, s); err != nil {
		return err
	}
	if s.stable != nil {
		s.state.Stable = s.stable.Spec.Hash
	}
	if prev := p.Status.Rollout; prev != nil && prev.TargetRevision == s.target.Name {
		s.state.Stage, s.state.StageClusters = prev.CurrentStage, prev.StageClusters
		if prev.StageStartTime != nil {
			s.state.StageStarted = prev.StageStartTime.Time
		}
	}
	if staged || s.strategy.Type == placementv1alpha1.RolloutExternal {
		s.state.ApprovedStages, s.state.ApprovedClusters, err = lookup.Approvals(ctx, r.Client, p, s.target.Name)
	}
	return err
}

// markLeaving marks the Works of a cluster the Placement left with when it
// left, those not marked yet.
func (r *Reconciler) markLeaving(ctx context.Context, parts []*workv1alpha1.Work, now time.Time) error {
	for _, w := range parts {
		if _, ok := w.Annotations[placementv1alpha1.LeavingSinceAnnotation]; ok {
			continue
		}
		body := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, placementv1alpha1.LeavingSinceAnnotation, now.UTC().Format(time.RFC3339))
		obj := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: w.Namespace}}
		if err := r.Client.Patch(ctx, obj, client.RawPatch("application/merge-patch+json", body)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("marking Work %s as leaving: %w", klog.KObj(w), err)
		}
	}
	return nil
}
