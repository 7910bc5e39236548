// Package workgenerator renders the objects a Placement selects into one Work per
// selected cluster, in that cluster's namespace on the hub.
package workgenerator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/feedback"
	"github.com/lodestar-dev/lodestar/internal/handlers"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/metrics"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/overrides"
	"github.com/lodestar-dev/lodestar/internal/patch"
	"github.com/lodestar-dev/lodestar/internal/reflection"
	"github.com/lodestar-dev/lodestar/internal/render"
	"github.com/lodestar-dev/lodestar/internal/requeue"
	"github.com/lodestar-dev/lodestar/internal/rollout"
	"github.com/lodestar-dev/lodestar/internal/selection"
	"github.com/lodestar-dev/lodestar/internal/watches"
)

// Name is the work generator's field owner and event source.
const Name = "lodestar-workgenerator"

// workWriters is how many Works of one Placement are written at once.
const workWriters = 16

// Reconciler generates Works.
type Reconciler struct {
	Client client.Client
	// APIReader reads from the API server, past the cache: a revision made by an
	// earlier reconcile that the cache does not show yet.
	APIReader client.Reader
	Cache     cache.Cache
	Mapper    meta.RESTMapper
	// Discovery lists the kinds the hub serves, for selectors without kind.
	Discovery discovery.DiscoveryInterface
	Recorder  events.EventRecorder
	// Workers is how many Placements are reconciled at once.
	Workers int
	// ClusterSets are the cluster sets the hub manages; a namespace uses those
	// of them its ClusterSetBindings name.
	ClusterSets []string

	controller controller.Controller
	kinds      *watches.ServedKinds
	// Watches, when set, tracks the selected kinds watched on the hub and stops
	// the watch of a kind the hub no longer serves; its Object must make
	// unstructured objects.
	Watches *watches.Set
	// expected are Work writes the cache may not show yet (expectationKey →
	// expectation), so that the gate never counts a cluster twice.
	expected sync.Map
	// active tells, per Placement (client.ObjectKey → activity), how Work status
	// reports concern the generator.
	active sync.Map
	// lastRevision is the PlacementRevision last made for each Placement
	// (client.ObjectKey → madeRevision).
	lastRevision sync.Map
	// statusPace paces status writes that only move counts.
	statusPace handlers.StatusPace
	// compiledSets are the compiled overrides of revisions (hash → *overrides.Set).
	compiledSets sync.Map
	// failing are the clusters each Placement's overrides fail on.
	failing failingIndex
}

// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=placements,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=placements/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=placementdecisions,verbs=get;list;watch
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=works,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=placementrevisions,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=rolloutapprovals,verbs=get;list;watch
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=clustersetbindings,verbs=get;list;watch
// +kubebuilder:rbac:groups=*,resources=*,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;patch

// Reconcile brings the Works of one Placement in line with its selected objects and
// its PlacementDecisions.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	placement := &placementv1alpha1.Placement{}
	if err := r.Client.Get(ctx, req.NamespacedName, placement); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	log := ctrl.LoggerFrom(ctx).WithValues("placement", klog.KObj(placement))
	ctx = ctrl.LoggerInto(ctx, log)

	st := &status{}
	defer func() {
		if err := r.applyStatus(ctx, placement, st); err != nil {
			retErr = errors.Join(retErr, err)
		}
		if d := st.deferred; d > 0 && retErr == nil && requeue.Soonest(d, result.RequeueAfter) == d {
			// Only counts wait: behind the reconciles of changes.
			result.RequeueAfter, result.Priority = d, ptr.To(handler.LowPriority)
		}
	}()

	if !placement.DeletionTimestamp.IsZero() {
		r.forget(placement)
		return ctrl.Result{}, r.reconcileDelete(ctx, placement, st)
	}
	if err := patch.SetFinalizer(ctx, r.Client, placement, placementv1alpha1.PlacementFinalizer, true); err != nil {
		return ctrl.Result{}, err
	}
	if err := lookup.MarkTenant(ctx, r.Client, placement.Namespace); err != nil {
		return ctrl.Result{}, err
	}

	objs, err := r.selectObjects(ctx, placement)
	if err != nil {
		var invalid *selection.InvalidSelectorError
		if errors.As(err, &invalid) {
			st.set(metav1.ConditionFalse, placementv1alpha1.ReasonInvalidResourceSelector, "%s", invalid.Error())
			r.Recorder.Eventf(placement, nil, "Warning", placementv1alpha1.ReasonInvalidResourceSelector, "SelectResources", "%s", invalid.Error())
			return ctrl.Result{}, reconcile.TerminalError(err)
		}
		return ctrl.Result{}, err
	}
	annotations, err := applyAnnotations(placement, objs)
	if err != nil {
		st.set(metav1.ConditionFalse, placementv1alpha1.ReasonInvalidStatusFeedback, "%v", err)
		r.Recorder.Eventf(placement, nil, "Warning", placementv1alpha1.ReasonInvalidStatusFeedback, "Render", "%v", err)
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	if _, err := overrides.Compile(placement.Spec.Overrides); err != nil {
		// Before any Work changes: the rules are the user's to fix.
		st.set(metav1.ConditionFalse, placementv1alpha1.ReasonInvalidOverride, "%v", err)
		r.Recorder.Eventf(placement, nil, corev1.EventTypeWarning, placementv1alpha1.ReasonInvalidOverride, "Render", "%v", err)
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	manifests, revision, err := render.Manifests(objs, reflects(placement))
	if tooLarge := (*render.TooLargeError)(nil); errors.As(err, &tooLarge) {
		// Nothing is written: the Works keep what they carry.
		st.set(metav1.ConditionFalse, placementv1alpha1.ReasonWorkTooLarge, "%v", tooLarge)
		r.Recorder.Eventf(placement, nil, corev1.EventTypeWarning, placementv1alpha1.ReasonWorkTooLarge, "Render", "%v", tooLarge)
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	if err != nil {
		st.set(metav1.ConditionFalse, placementv1alpha1.ReasonRenderFailed, "rendering the selected objects: %v", err)
		return ctrl.Result{}, reconcile.TerminalError(err)
	}

	decided, err := lookup.DecidedIn(ctx, r.Client, placement, r.ClusterSets)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(decided.Rejected) > 0 {
		log.Info("Ignoring PlacementDecisions that may not send Works", "rejected", decided.Rejected)
		r.Recorder.Eventf(placement, nil, corev1.EventTypeWarning, placementv1alpha1.ReasonDecisionRejected, "Decide",
			"ignored: %s", message.List(decided.Rejected, 5, "; "))
	}
	if !decided.Found {
		// Without decisions we know nothing new about where the objects belong:
		// existing Works stay as they are.
		st.set(metav1.ConditionFalse, placementv1alpha1.ReasonWaitingForDecisions, "no PlacementDecision names this Placement yet")
		return ctrl.Result{}, nil
	}

	hash, err := overrides.Hash(revision, placement.Spec.Overrides)
	if err != nil {
		return ctrl.Result{}, err
	}
	return r.rollOut(ctx, placement, st, objs, content{manifests: manifests, hash: hash, overrides: placement.Spec.Overrides}, annotations, decided)
}

// rollOut moves the selected clusters to the target revision through the gate of
// the Placement's strategy, and removes the Works of the clusters it left once
// the clusters added in their place are Available.
func (r *Reconciler) rollOut(ctx context.Context, placement *placementv1alpha1.Placement, st *status,
	objs []*unstructured.Unstructured, rendered content, annotations map[string]string, decided lookup.Decisions) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	now := time.Now()
	strategy, err := rollout.StrategyFor(placement.Spec.Strategy)
	if err != nil {
		st.set(metav1.ConditionFalse, placementv1alpha1.ReasonInvalidStrategy, "%v", err)
		r.Recorder.Eventf(placement, nil, corev1.EventTypeWarning, placementv1alpha1.ReasonInvalidStrategy, "Rollout", "%v", err)
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	target, revs, wait, err := r.targetRevision(ctx, placement, objs, rendered)
	if err != nil {
		return ctrl.Result{}, err
	}
	targetContent := rendered
	if target.Spec.Hash != rendered.hash {
		targetContent = revisionContent(target)
	}

	// Works already up to date are skipped without a copy or a patch: after a
	// restart, or on each event of a large fan-out, most are.
	current, err := lookup.Works(ctx, r.Client, placement, client.UnsafeDisableDeepCopy)
	if err != nil {
		return ctrl.Result{}, err
	}
	byCluster := map[string]*workv1alpha1.Work{}
	for i := range current {
		if cluster, ok := names.ClusterFromNamespace(current[i].Namespace); ok && current[i].DeletionTimestamp.IsZero() {
			byCluster[cluster] = &current[i]
		}
	}
	selected := map[string]bool{}
	for _, c := range decided.Clusters {
		selected[c] = true
	}

	// The clusters the Placement left, kept make-before-break.
	var leaving []rollout.Leaving
	var leavingWorks []*workv1alpha1.Work
	if decided.Consistent {
		for cluster, w := range byCluster {
			if selected[cluster] {
				continue
			}
			since, err := r.leavingSince(ctx, w, now)
			if err != nil {
				return ctrl.Result{}, err
			}
			revoked, reachable, err := r.profileState(ctx, cluster, decided.Sets)
			if err != nil {
				return ctrl.Result{}, err
			}
			l := rollout.Leaving{Name: cluster, Since: since, Available: lookup.WorkAvailability(w) == metav1.ConditionTrue, Revoked: revoked}
			if f := placement.Spec.Scheduling.Failover; f != nil && !reachable {
				// A failed-over cluster's copy waits for its replacement at most
				// the failover grace period.
				l.Deadline = time.Duration(ptr.Deref(f.GracePeriodSeconds, 600)) * time.Second
			}
			leaving = append(leaving, l)
			leavingWorks = append(leavingWorks, w)
		}
	}

	// The clusters' profiles, read once: the stages select by their labels, and
	// overrides render from them.
	staged := strategy.Type == placementv1alpha1.RolloutStaged
	var profiles map[string]*cpv1alpha1.ClusterProfile
	if staged || slices.ContainsFunc(revs, func(rv placementv1alpha1.PlacementRevision) bool { return len(rv.Spec.Overrides) > 0 }) {
		if profiles, err = clusterProfiles(ctx, r.Client, decided.Clusters, decided.Sets); err != nil {
			return ctrl.Result{}, err
		}
	}
	rd := r.newRenderer(profiles)
	labelsOf := map[string]map[string]string{}
	if staged {
		for name, p := range profiles {
			labelsOf[name] = p.Labels
		}
	}
	// What the target revision is on each selected cluster; the clusters an
	// override fails on keep what they have.
	targetOf := map[string]content{}
	failed := map[string]string{}
	for _, c := range decided.Clusters {
		tc, err := rd.content(targetContent, c)
		if why := overrideFailure(err); why != "" {
			failed[c] = why
			continue
		}
		if err != nil {
			return ctrl.Result{}, err
		}
		targetOf[c] = tc
	}
	state := rollout.State{Target: target.Spec.Hash, Paused: placement.Spec.Strategy.Paused, Leaving: len(leaving)}
	var stableRev *placementv1alpha1.PlacementRevision
	if prev := placement.Status.Rollout; prev != nil {
		if i := slices.IndexFunc(revs, func(rv placementv1alpha1.PlacementRevision) bool { return rv.Name == prev.StableRevision }); i >= 0 {
			stableRev = &revs[i]
			state.Stable = stableRev.Spec.Hash
		}
		if prev.TargetRevision == target.Name {
			state.Stage, state.StageClusters = prev.CurrentStage, prev.StageClusters
			if prev.StageStartTime != nil {
				state.StageStarted = prev.StageStartTime.Time
			}
		}
	}
	if strategy.Type == placementv1alpha1.RolloutStaged || strategy.Type == placementv1alpha1.RolloutExternal {
		if state.ApprovedStages, state.ApprovedClusters, err = approvals(ctx, r.Client, placement, target.Name); err != nil {
			return ctrl.Result{}, err
		}
	}
	gate := make([]rollout.Cluster, 0, len(decided.Clusters))
	for _, c := range decided.Clusters {
		g := r.gateCluster(placement, c, byCluster[c], labelsOf[c])
		g.OverrideFailed = failed[c]
		gate = append(gate, g)
	}
	plan := rollout.Compute(gate, strategy, state, now)

	// What each selected cluster's Work carries now.
	contentOf := map[string]content{}
	for _, c := range plan.Start {
		contentOf[c] = targetOf[c]
	}
	for _, c := range plan.PlaceStable {
		sc, err := rd.content(revisionContent(stableRev), c)
		if why := overrideFailure(err); why != "" {
			failed[c] = why
			continue
		}
		if err != nil {
			return ctrl.Result{}, err
		}
		contentOf[c] = sc
	}
	revByHash := map[string]*placementv1alpha1.PlacementRevision{}
	for i := range revs {
		revByHash[revs[i].Spec.Hash] = &revs[i]
	}
	var eg errgroup.Group
	eg.SetLimit(workWriters)
	for _, cluster := range decided.Clusters {
		w := byCluster[cluster]
		c, ok := contentOf[cluster]
		if !ok {
			if w == nil {
				continue // waits for the gate
			}
			// Keeps its revision, rendered anew for the cluster as it is now (its
			// labels may have changed); labels and annotations follow the Placement.
			c = workContent(w)
			if rev := revByHash[c.hash]; rev != nil && len(rev.Spec.Overrides) > 0 {
				rc, err := rd.content(revisionContent(rev), cluster)
				if why := overrideFailure(err); why != "" {
					failed[cluster] = why
				} else if err != nil {
					return ctrl.Result{}, err
				} else {
					c = rc
				}
			}
		}
		since := now.UTC().Format(time.RFC3339)
		if w != nil && w.Annotations[placementv1alpha1.RevisionAnnotation] == c.hash {
			since = w.Annotations[placementv1alpha1.RevisionSinceAnnotation]
			if workUpToDate(w, placement, c.manifests, c.hash, annotations) {
				continue
			}
		}
		eg.Go(func() error {
			if err := r.writeWork(ctx, placement, cluster, c, since, annotations); err != nil {
				return fmt.Errorf("writing the Work for cluster %s: %w", cluster, err)
			}
			if w == nil || w.Annotations[placementv1alpha1.RevisionAnnotation] != c.hash {
				r.expected.Store(expectationKey(placement, cluster), expectation{hash: c.hash, since: parseTime(since, now)})
			}
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		st.set(metav1.ConditionFalse, placementv1alpha1.ReasonWorkFailed, "%v", err)
		return ctrl.Result{}, err
	}

	removal := rollout.Remove(leaving, gate, strategy.Deadline, now)
	for i, w := range leavingWorks {
		cluster, _ := names.ClusterFromNamespace(w.Namespace)
		if !slices.Contains(removal.Remove, cluster) {
			continue
		}
		log.Info("Removing the Work of a cluster the Placement left", "cluster", cluster, "revoked", leaving[i].Revoked,
			"available", leaving[i].Available, "forced", slices.Contains(removal.Forced, cluster), "sets", decided.Sets)
		if err := r.deleteWork(ctx, w); err != nil {
			return ctrl.Result{}, err
		}
		if slices.Contains(removal.Forced, cluster) {
			r.Recorder.Eventf(placement, nil, corev1.EventTypeWarning, placementv1alpha1.ReasonProgressDeadlineExceeded, "Remove",
				"removed the Work of cluster %s, which the Placement left, before the clusters added were Available (progress deadline %s)", cluster, strategy.Deadline)
		}
	}
	stable := ""
	if stableRev != nil {
		stable = stableRev.Name
	}
	if plan.Complete {
		stable = target.Name
	}
	if err := r.pruneRevisions(ctx, placement, revs, current, target.Name, stable); err != nil {
		return ctrl.Result{}, err
	}
	byHash := map[string]string{}
	revName := map[string]string{}
	for i := range revs {
		revName[revs[i].Spec.Hash] = revs[i].Name
	}
	for _, g := range gate {
		byHash[g.Name] = revName[g.Revision]
	}
	for _, w := range leavingWorks {
		cluster, _ := names.ClusterFromNamespace(w.Namespace)
		byHash[cluster] = revName[w.Annotations[placementv1alpha1.RevisionAnnotation]]
	}
	st.rollout = rolloutStatus(target, stable, plan, removal, byHash, strategy.Type == placementv1alpha1.RolloutAllAtOnce)
	status, reason, msg := progressing(target, plan, removal, placement.Spec.Strategy.Paused, len(decided.Clusters))
	st.progressing.Set(placementv1alpha1.ProgressingCondition, status, reason, "%s", msg)
	if reason == placementv1alpha1.ReasonFailureBudgetExceeded {
		r.warnOnce(placement, reason, msg)
	}

	// Work status reports concern this Placement while its rollout, or a removal,
	// is under way: promptly when they open a gate, at a slower pace when they
	// only move the status (AllAtOnce, nothing to remove).
	switch {
	case plan.Complete && len(leaving) == len(removal.Remove):
		r.active.Store(client.ObjectKeyFromObject(placement), idle)
	case strategy.Type == placementv1alpha1.RolloutAllAtOnce && len(leaving) == 0:
		r.active.Store(client.ObjectKeyFromObject(placement), reporting)
	default:
		r.active.Store(client.ObjectKeyFromObject(placement), gating)
	}

	result := ctrl.Result{RequeueAfter: requeue.Soonest(plan.RecheckAfter, removal.RecheckAfter, wait)}
	if !decided.Consistent {
		// The slices are being rewritten: a cluster missing now may be moving from
		// one slice to another. Works are removed once every slice agrees.
		st.set(metav1.ConditionFalse, placementv1alpha1.ReasonWaitingForDecisions,
			"the PlacementDecision slices are being updated; Works of clusters no longer chosen are removed when they agree")
		return result, nil
	}
	log.V(4).Info("Rolled out", "target", target.Spec.Revision, "start", len(plan.Start), "removed", len(removal.Remove))
	r.failing.set(client.ObjectKeyFromObject(placement), slices.Collect(maps.Keys(failed)))
	if len(failed) > 0 {
		msg := overrideFailures(failed, len(decided.Clusters))
		if c := meta.FindStatusCondition(placement.Status.Conditions, placementv1alpha1.WorkSynchronizedCondition); c == nil || c.Message != msg {
			r.Recorder.Eventf(placement, nil, corev1.EventTypeWarning, placementv1alpha1.ReasonOverrideFailed, "Render", "%s", msg)
		}
		st.set(metav1.ConditionFalse, placementv1alpha1.ReasonOverrideFailed, "%s", msg)
		return result, nil
	}
	st.set(metav1.ConditionTrue, placementv1alpha1.ReasonWorkSynchronized,
		"%d objects at revision %d (%s); the Works of %d clusters hold what the rollout gives them", len(objs), target.Spec.Revision, target.Spec.Hash, len(decided.Clusters))
	return result, nil
}

// forget drops what the generator remembers of a Placement being deleted.
func (r *Reconciler) forget(placement *placementv1alpha1.Placement) {
	r.active.Delete(client.ObjectKeyFromObject(placement))
	r.statusPace.Forget(client.ObjectKeyFromObject(placement))
	r.lastRevision.Delete(client.ObjectKeyFromObject(placement))
	r.failing.set(client.ObjectKeyFromObject(placement), nil)
	prefix := expectationKey(placement, "")
	r.expected.Range(func(k, _ any) bool {
		if strings.HasPrefix(k.(string), prefix) {
			r.expected.Delete(k)
		}
		return true
	})
}

// revisionContent is what a PlacementRevision carries.
func revisionContent(rev *placementv1alpha1.PlacementRevision) content {
	c := content{hash: rev.Spec.Hash, overrides: rev.Spec.Overrides}
	for _, m := range rev.Spec.Manifests {
		c.manifests = append(c.manifests, m.RawExtension)
	}
	return c
}

// workContent is what a Work carries now.
func workContent(w *workv1alpha1.Work) content {
	c := content{hash: w.Annotations[placementv1alpha1.RevisionAnnotation]}
	for _, m := range w.Spec.Workload.Manifests {
		c.manifests = append(c.manifests, m.RawExtension)
	}
	return c
}

// profileState tells whether the Placement may no longer use a cluster at all (no
// ClusterProfile of its name that Lodestar manages lies in the sets: revoked),
// and whether its agent is reachable.
func (r *Reconciler) profileState(ctx context.Context, cluster string, sets []string) (revoked, reachable bool, err error) {
	profiles, err := lookup.ClusterProfilesNamed(ctx, r.Client, cluster)
	if err != nil {
		return false, false, err
	}
	for i := range profiles {
		if p := &profiles[i]; lookup.Managed(p) && slices.Contains(sets, p.Namespace) && p.DeletionTimestamp.IsZero() {
			return false, !meta.IsStatusConditionFalse(p.Status.Conditions, placementv1alpha1.AgentReachableCondition) &&
				!meta.IsStatusConditionPresentAndEqual(p.Status.Conditions, placementv1alpha1.AgentReachableCondition, metav1.ConditionUnknown), nil
		}
	}
	return true, false, nil
}

// warnOnce records a Warning event when the Progressing condition changes to the
// reason, not at every reconcile.
func (r *Reconciler) warnOnce(placement *placementv1alpha1.Placement, reason, msg string) {
	if c := meta.FindStatusCondition(placement.Status.Conditions, placementv1alpha1.ProgressingCondition); c != nil && c.Reason == reason {
		return
	}
	r.Recorder.Eventf(placement, nil, corev1.EventTypeWarning, reason, "Rollout", "%s", msg)
}

// reflects tells whether the Placement reflects its objects' status on the hub.
func reflects(placement *placementv1alpha1.Placement) bool {
	return placement.Spec.Reporting.Reflection == placementv1alpha1.ReflectionAggregate
}

// applyAnnotations returns the Work annotations that carry the Placement's apply
// strategy and status feedback rules to the agents: its own rules, and with
// status reflection those that report the placed objects' status. Feedback rules
// whose CEL or JSONPath do not compile are an error.
func applyAnnotations(placement *placementv1alpha1.Placement, objs []*unstructured.Unstructured) (map[string]string, error) {
	out := map[string]string{}
	if s := placement.Spec.ApplyStrategy; s != nil {
		b, err := json.Marshal(s.Defaulted())
		if err != nil {
			return nil, err
		}
		out[lodestarworkv1alpha1.ApplyStrategyAnnotation] = string(b)
	}
	if rules := placement.Spec.Reporting.Feedback; len(rules) > 0 || reflects(placement) {
		if _, err := feedback.Compile(rules); err != nil {
			return nil, fmt.Errorf("spec.reporting.%w", err)
		}
		if reflects(placement) {
			kinds := map[schema.GroupKind]bool{}
			for _, o := range objs {
				kinds[o.GroupVersionKind().GroupKind()] = true
			}
			rules = reflection.Rules(rules, slices.Collect(maps.Keys(kinds)))
		}
		b, err := json.Marshal(rules)
		if err != nil {
			return nil, err
		}
		out[lodestarworkv1alpha1.StatusFeedbackAnnotation] = string(b)
	}
	return out, nil
}

// reconcileDelete deletes every Work of the Placement and releases the Placement
// once they are gone, which is when each member has removed what it applied.
func (r *Reconciler) reconcileDelete(ctx context.Context, placement *placementv1alpha1.Placement, st *status) error {
	remaining, err := lookup.Works(ctx, r.Client, placement, client.UnsafeDisableDeepCopy)
	if err != nil {
		return err
	}
	if err := r.deleteWorks(ctx, remaining, nil); err != nil {
		return err
	}
	if len(remaining) > 0 {
		st.set(metav1.ConditionFalse, placementv1alpha1.ReasonDeleting, "waiting for %d clusters to remove the placed objects", len(remaining))
		return nil // Work deletions trigger the next reconcile.
	}
	if err := lookup.UnmarkTenant(ctx, r.Client, placement.Namespace, placement); err != nil {
		return err
	}
	return patch.SetFinalizer(ctx, r.Client, placement, placementv1alpha1.PlacementFinalizer, false)
}

// writeWork creates or updates the Work that carries the manifests to cluster.
func (r *Reconciler) writeWork(ctx context.Context, placement *placementv1alpha1.Placement, cluster string, c content, since string, annotations map[string]string) error {
	work := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{
		Name:      names.Work(placement.Namespace, placement.Name),
		Namespace: names.ClusterNamespace(cluster),
	}}
	_, err := controllerutil.CreateOrPatch(ctx, r.Client, work, func() error {
		if work.Labels == nil {
			work.Labels = map[string]string{}
		}
		for k, v := range lookup.WorkLabels(placement) {
			work.Labels[k] = v
		}
		work.Labels[placementv1alpha1.ClusterLabel] = names.LabelValue(cluster)
		if work.Annotations == nil {
			work.Annotations = map[string]string{}
		}
		work.Annotations[placementv1alpha1.RevisionAnnotation] = c.hash
		work.Annotations[placementv1alpha1.RevisionSinceAnnotation] = since
		delete(work.Annotations, placementv1alpha1.LeavingSinceAnnotation)
		for _, k := range []string{lodestarworkv1alpha1.ApplyStrategyAnnotation, lodestarworkv1alpha1.StatusFeedbackAnnotation} {
			if v, ok := annotations[k]; ok {
				work.Annotations[k] = v
			} else {
				delete(work.Annotations, k)
			}
		}
		controllerutil.AddFinalizer(work, lodestarworkv1alpha1.WorkFinalizer)
		work.Spec.Workload.Manifests = make([]workv1alpha1.Manifest, 0, len(c.manifests))
		for _, m := range c.manifests {
			work.Spec.Workload.Manifests = append(work.Spec.Workload.Manifests, workv1alpha1.Manifest{RawExtension: m})
		}
		return nil
	})
	return err
}

// workUpToDate tells whether w (a read-only cache object) already is what
// writeWork would make it: labels, annotations, finalizer and the same manifest
// bytes. When in doubt (the API server re-encoded a manifest, say) it says no, and
// writeWork compares properly.
func workUpToDate(w *workv1alpha1.Work, placement *placementv1alpha1.Placement, manifests []runtime.RawExtension, revision string, annotations map[string]string) bool {
	if _, leaving := w.Annotations[placementv1alpha1.LeavingSinceAnnotation]; leaving {
		return false
	}
	if !w.DeletionTimestamp.IsZero() || !controllerutil.ContainsFinalizer(w, lodestarworkv1alpha1.WorkFinalizer) ||
		w.Annotations[placementv1alpha1.RevisionAnnotation] != revision || len(w.Spec.Workload.Manifests) != len(manifests) {
		return false
	}
	for k, v := range lookup.WorkLabels(placement) {
		if w.Labels[k] != v {
			return false
		}
	}
	cluster, ok := names.ClusterFromNamespace(w.Namespace)
	if !ok || w.Labels[placementv1alpha1.ClusterLabel] != names.LabelValue(cluster) {
		return false
	}
	for _, k := range []string{lodestarworkv1alpha1.ApplyStrategyAnnotation, lodestarworkv1alpha1.StatusFeedbackAnnotation} {
		got, has := w.Annotations[k]
		want, wanted := annotations[k]
		if has != wanted || got != want {
			return false
		}
	}
	for i := range manifests {
		if !bytes.Equal(w.Spec.Workload.Manifests[i].Raw, manifests[i].Raw) {
			return false
		}
	}
	return true
}

// deleteWorks deletes those of the Placement's Works (a read-only view of the
// cache: each deletion gets an object of its own) on clusters other than keep.
func (r *Reconciler) deleteWorks(ctx context.Context, works []workv1alpha1.Work, keep []string) error {
	keepNS := map[string]bool{}
	for _, c := range keep {
		keepNS[names.ClusterNamespace(c)] = true
	}
	for i := range works {
		w := &works[i]
		if keepNS[w.Namespace] || !w.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.deleteWork(ctx, w); err != nil {
			return err
		}
	}
	return nil
}

// deleteWork deletes a Work of the Placement.
func (r *Reconciler) deleteWork(ctx context.Context, w *workv1alpha1.Work) error {
	if err := r.Client.Delete(ctx, &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: w.Namespace}}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting Work %s: %w", klog.KObj(w), err)
	}
	ctrl.LoggerFrom(ctx).Info("Deleted Work of a cluster the Placement no longer selects", "work", klog.KObj(w))
	return nil
}

// SetupWithManager registers the work generator. Watches on the kinds that
// Placements select are added as Placements name them.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	workPlacement := lookup.FromLabels(mgr.GetClient(), placementv1alpha1.PlacementNameLabel, placementv1alpha1.PlacementNamespaceLabel)
	r.statusPace.Every = statusEvery
	if r.Discovery != nil {
		r.kinds = &watches.ServedKinds{Discovery: r.Discovery}
	}
	if r.Watches == nil {
		r.Watches = &watches.Set{Cache: r.Cache, Discovery: r.Discovery, Object: UnstructuredObject,
			OnStop: func(gvk schema.GroupVersionKind) { metrics.WatchedKinds.WithLabelValues(gvk.Group, gvk.Kind).Dec() }}
		if r.Discovery != nil {
			if err := mgr.Add(r.Watches); err != nil {
				return err
			}
		}
	}
	crds := &metav1.PartialObjectMetadata{}
	crds.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named("workgenerator").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		For(&placementv1alpha1.Placement{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&cpv1alpha1.PlacementDecision{}, handler.EnqueueRequestsFromMapFunc(lookup.FromLabels(mgr.GetClient(), cpv1alpha1.PlacementKeyLabel, ""))).
		// Edits and deletions of its Works concern the generator; their status
		// reports only while a rollout or a removal of their Placement is under way.
		Watches(&workv1alpha1.Work{}, handler.EnqueueRequestsFromMapFunc(lookup.FromLabels(mgr.GetClient(), placementv1alpha1.PlacementNameLabel, placementv1alpha1.PlacementNamespaceLabel)),
			builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&workv1alpha1.Work{}, handlers.Coalescing(r.activePlacement(workPlacement, gating), statusWindow)).
		Watches(&workv1alpha1.Work{}, handlers.Background(r.activePlacement(workPlacement, reporting), reportWindow)).
		Watches(&placementv1alpha1.RolloutApproval{}, handler.EnqueueRequestsFromMapFunc(approvedPlacement)).
		// A kind added (or removed) may concern the selectors without kind.
		WatchesMetadata(crds, handlers.Rechecking(r.placementsByLabels, watches.KindsRecheck, watches.KindsSettle)).
		// Kinds a platform admin forbids in a namespace are never placed from it.
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(lookup.InNamespace(mgr.GetClient())),
			builder.WithPredicates(predicate.AnnotationChangedPredicate{})).
		// A binding removed revokes its set's clusters, whoever writes the decisions.
		Watches(&placementv1alpha1.ClusterSetBinding{}, handler.EnqueueRequestsFromMapFunc(lookup.InNamespace(mgr.GetClient())),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A cluster's labels or properties may change what overrides make of it.
		Watches(&cpv1alpha1.ClusterProfile{}, handler.EnqueueRequestsFromMapFunc(r.placementsOverriding(workPlacement)), builder.WithPredicates(viewChanged)).
		Build(r)
	r.controller = c
	return err
}

// How Work status reports of a Placement concern the generator.
type activity int

const (
	// gating: a rollout or a removal waits for them (statusWindow).
	gating activity = iota
	// reporting: they only move the rollout's status (reportWindow).
	reporting
	// idle: they do not concern it.
	idle
)

// statusWindow gathers the Work status reports of a Placement whose rollout or
// removal waits for them; reportWindow those that only move its status.
const (
	statusWindow = 250 * time.Millisecond
	reportWindow = time.Second
)

// activePlacement lets through the Placements whose Work status reports are of
// the kind want; a Placement not reconciled yet counts as gating.
func (r *Reconciler) activePlacement(mapFn handler.MapFunc, want activity) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		reqs := mapFn(ctx, obj)
		return slices.DeleteFunc(reqs, func(req reconcile.Request) bool {
			got := gating
			if v, ok := r.active.Load(req.NamespacedName); ok {
				got = v.(activity)
			}
			return got != want
		})
	}
}

// approvedPlacement maps a RolloutApproval to its Placement.
func approvedPlacement(_ context.Context, obj client.Object) []reconcile.Request {
	a, ok := obj.(*placementv1alpha1.RolloutApproval)
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: a.Namespace, Name: a.Spec.Placement}}}
}

// ensureWatch starts watching gvk on the hub the first time a Placement selects it.
func (r *Reconciler) ensureWatch(gvk schema.GroupVersionKind) error {
	if !r.Watches.Add(gvk) {
		return nil
	}
	err := r.controller.Watch(source.Kind[client.Object](r.Cache, UnstructuredObject(gvk), handler.EnqueueRequestsFromMapFunc(r.placementsSelecting(gvk))))
	if err != nil {
		r.Watches.Forget(gvk)
		return fmt.Errorf("watching %s: %w", gvk, err)
	}
	metrics.WatchedKinds.WithLabelValues(gvk.Group, gvk.Kind).Inc()
	return nil
}

// UnstructuredObject is the object the hub's watches of a selected kind are made for.
func UnstructuredObject(gvk schema.GroupVersionKind) client.Object {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	return obj
}
