package workgenerator

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/rollout"
)

// revisionWindow gathers rapid edits: a new PlacementRevision is made at most
// once per window per Placement; the edits in between land in the next one.
const revisionWindow = time.Second

// expectationTTL bounds how long a Work write not yet seen in the cache stands in
// for what the cache says.
const expectationTTL = time.Minute

// content is what a Work carries: manifests and their hash.
type content struct {
	manifests []runtime.RawExtension
	hash      string
	// overrides render the manifests per cluster; none once rendered.
	overrides []placementv1alpha1.Override
}

// madeRevision is a PlacementRevision this manager made, which the cache may not
// show yet.
type madeRevision struct {
	number int64
	at     time.Time
}

// expectation is a Work write the cache may not show yet.
type expectation struct {
	hash  string
	since time.Time
}

// targetRevision returns the PlacementRevision the Placement rolls out: the one of
// the current rendering, made when new. Within revisionWindow of the last one, a
// new rendering waits (the returned duration) and the previous target stays.
func (r *Reconciler) targetRevision(ctx context.Context, placement *placementv1alpha1.Placement, objs []*unstructured.Unstructured, c content) (*placementv1alpha1.PlacementRevision, []placementv1alpha1.PlacementRevision, time.Duration, error) {
	revs, err := r.revisions(ctx, r.Client, placement)
	if err != nil {
		return nil, nil, 0, err
	}
	for i := range revs {
		if revs[i].Spec.Hash == c.hash {
			return &revs[i], revs, 0, nil
		}
	}
	// The newest revision: the cache's, or one made a moment ago that the cache
	// does not show yet (so that a revision is never numbered twice).
	var number int64
	var newestAt time.Time
	var previous *placementv1alpha1.PlacementRevision
	if len(revs) > 0 {
		previous = &revs[0]
		number, newestAt = revs[0].Spec.Revision, revs[0].CreationTimestamp.Time
	}
	key := client.ObjectKeyFromObject(placement)
	if v, ok := r.lastRevision.Load(key); ok {
		if made := v.(madeRevision); made.number >= number {
			number, newestAt = made.number, made.at
		}
	}
	if st := placement.Status.Rollout; st != nil && st.TargetRevisionNumber > number {
		number = st.TargetRevisionNumber
	}
	if !newestAt.IsZero() {
		if wait := time.Until(newestAt.Add(revisionWindow)); wait > 0 && len(revs) > 0 {
			prev := &revs[0]
			if st := placement.Status.Rollout; st != nil {
				if i := slices.IndexFunc(revs, func(rv placementv1alpha1.PlacementRevision) bool { return rv.Name == st.TargetRevision }); i >= 0 {
					prev = &revs[i]
				}
			}
			return prev, revs, wait, nil
		}
	}
	number++
	rev := &placementv1alpha1.PlacementRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name: names.Revision(placement.Name, c.hash), Namespace: placement.Namespace,
			Labels: map[string]string{
				placementv1alpha1.PlacementNameLabel: names.LabelValue(placement.Name),
				placementv1alpha1.RevisionHashLabel:  c.hash,
			},
		},
		Spec: placementv1alpha1.PlacementRevisionSpec{
			Placement: placement.Name, Revision: number, Hash: c.hash,
			ChangeCause: changeCause(placement, previous, objs, c), Overrides: c.overrides,
		},
	}
	for _, m := range c.manifests {
		rev.Spec.Manifests = append(rev.Spec.Manifests, placementv1alpha1.RevisionManifest{RawExtension: m})
	}
	if err := controllerutil.SetControllerReference(placement, rev, r.Client.Scheme()); err != nil {
		return nil, nil, 0, err
	}
	if err := r.Client.Create(ctx, rev); err == nil {
		r.lastRevision.Store(key, madeRevision{number: number, at: time.Now()})
	} else if apierrors.IsAlreadyExists(err) {
		// Made by an earlier reconcile the cache does not show yet.
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(rev), rev); err != nil {
			return nil, nil, 0, fmt.Errorf("reading PlacementRevision %s: %w", rev.Name, err)
		}
	} else if err != nil {
		return nil, nil, 0, fmt.Errorf("creating PlacementRevision %s: %w", rev.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("New revision", "revision", rev.Spec.Revision, "hash", c.hash, "cause", rev.Spec.ChangeCause)
	return rev, append([]placementv1alpha1.PlacementRevision{*rev}, revs...), 0, nil
}

// revisions lists the Placement's PlacementRevisions, newest first.
func (r *Reconciler) revisions(ctx context.Context, c client.Reader, placement *placementv1alpha1.Placement) ([]placementv1alpha1.PlacementRevision, error) {
	list := &placementv1alpha1.PlacementRevisionList{}
	if err := c.List(ctx, list, client.InNamespace(placement.Namespace),
		client.MatchingLabels{placementv1alpha1.PlacementNameLabel: names.LabelValue(placement.Name)}); err != nil {
		return nil, fmt.Errorf("listing PlacementRevisions: %w", err)
	}
	out := slices.DeleteFunc(list.Items, func(rv placementv1alpha1.PlacementRevision) bool {
		return rv.Spec.Placement != placement.Name || !metav1.IsControlledBy(&rv, placement)
	})
	slices.SortFunc(out, func(a, b placementv1alpha1.PlacementRevision) int {
		return cmp.Compare(b.Spec.Revision, a.Spec.Revision)
	})
	return out, nil
}

// changeCause is the Placement's change-cause annotation, or what changed since
// the previous revision.
func changeCause(placement *placementv1alpha1.Placement, previous *placementv1alpha1.PlacementRevision, objs []*unstructured.Unstructured, c content) string {
	if cause := placement.Annotations[placementv1alpha1.ChangeCauseAnnotation]; cause != "" {
		return message.Truncate(cause, 1024)
	}
	if previous == nil {
		return fmt.Sprintf("first revision: %d objects", len(objs))
	}
	before := map[string][]byte{}
	for _, m := range previous.Spec.Manifests {
		before[manifestKey(m.Raw)] = m.Raw
	}
	var added, changed []string
	for _, m := range c.manifests {
		k := manifestKey(m.Raw)
		old, ok := before[k]
		switch {
		case !ok:
			added = append(added, k)
		case !bytes.Equal(old, m.Raw):
			changed = append(changed, k)
		}
		delete(before, k)
	}
	var removed []string
	for k := range before {
		removed = append(removed, k)
	}
	slices.Sort(removed)
	var parts []string
	if !equality.Semantic.DeepEqual(previous.Spec.Overrides, c.overrides) {
		parts = append(parts, "changed overrides")
	}
	for _, p := range []struct {
		verb string
		keys []string
	}{{"changed", changed}, {"added", added}, {"removed", removed}} {
		if len(p.keys) > 0 {
			parts = append(parts, p.verb+" "+message.List(p.keys, 5, ", "))
		}
	}
	return message.Truncate(strings.Join(parts, "; "), 1024)
}

// manifestKey is Kind/name of a rendered manifest.
func manifestKey(raw []byte) string {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		return "?"
	}
	return u.GetKind() + "/" + u.GetName()
}

// pruneRevisions deletes the revisions beyond spec.revisionHistoryLimit that no
// Work holds and the rollout does not name.
func (r *Reconciler) pruneRevisions(ctx context.Context, placement *placementv1alpha1.Placement, revs []placementv1alpha1.PlacementRevision, works []workv1alpha1.Work, keep ...string) error {
	limit := 10
	if l := placement.Spec.RevisionHistoryLimit; l != nil {
		limit = int(*l)
	}
	if len(revs) <= limit {
		return nil
	}
	held := map[string]bool{}
	for i := range works {
		held[works[i].Annotations[placementv1alpha1.RevisionAnnotation]] = true
	}
	for i := range revs {
		rv := &revs[i]
		if i < limit || held[rv.Spec.Hash] || slices.Contains(keep, rv.Name) {
			continue
		}
		if err := r.Client.Delete(ctx, rv); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting PlacementRevision %s: %w", rv.Name, err)
		}
		r.compiledSets.Delete(rv.Spec.Hash)
		ctrl.LoggerFrom(ctx).V(1).Info("Pruned revision", "revision", rv.Spec.Revision)
	}
	return nil
}

// gateCluster is what the gate knows of a selected cluster from its Work (nil
// when it has none), with a write the cache does not show yet standing in.
func (r *Reconciler) gateCluster(placement *placementv1alpha1.Placement, name string, w *workv1alpha1.Work, labels map[string]string) rollout.Cluster {
	c := rollout.Cluster{Name: name, Labels: labels, Applied: metav1.ConditionUnknown, Available: metav1.ConditionUnknown}
	key := expectationKey(placement, name)
	if v, ok := r.expected.Load(key); ok {
		e := v.(expectation)
		switch {
		case w != nil && w.Annotations[placementv1alpha1.RevisionAnnotation] == e.hash:
			r.expected.Delete(key)
		case time.Since(e.since) < expectationTTL:
			c.Revision, c.Since = e.hash, e.since
			return c
		default:
			r.expected.Delete(key)
		}
	}
	if w == nil {
		return c
	}
	c.Revision = w.Annotations[placementv1alpha1.RevisionAnnotation]
	c.Since = parseTime(w.Annotations[placementv1alpha1.RevisionSinceAnnotation], w.CreationTimestamp.Time)
	c.Available = lookup.WorkAvailability(w)
	if a := meta.FindStatusCondition(w.Status.Conditions, lodestarworkv1alpha1.ConditionAvailable); a != nil && c.Available == metav1.ConditionTrue {
		c.AvailableSince = a.LastTransitionTime.Time
	}
	if a := meta.FindStatusCondition(w.Status.Conditions, lodestarworkv1alpha1.ConditionApplied); a != nil && a.ObservedGeneration == w.Generation {
		c.Applied = a.Status
		if a.Status == metav1.ConditionFalse {
			c.Message = message.Truncate(a.Message, 512)
		}
	}
	if d := meta.FindStatusCondition(w.Status.Conditions, lodestarworkv1alpha1.ConditionDegraded); d != nil && d.ObservedGeneration == w.Generation && d.Status == metav1.ConditionTrue {
		c.Degraded, c.Message = true, message.Truncate(d.Message, 512)
	}
	return c
}

func expectationKey(placement *placementv1alpha1.Placement, cluster string) string {
	return placement.Namespace + "/" + placement.Name + "/" + cluster
}

func parseTime(s string, fallback time.Time) time.Time {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t
	}
	return fallback
}

// approvals returns what the RolloutApprovals of the Placement's target revision
// approve; approvals of other revisions do nothing.
func approvals(ctx context.Context, c client.Reader, placement *placementv1alpha1.Placement, target string) (map[string]bool, map[string]bool, error) {
	list := &placementv1alpha1.RolloutApprovalList{}
	if err := c.List(ctx, list, client.InNamespace(placement.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, fmt.Errorf("listing RolloutApprovals: %w", err)
	}
	stages, clusters := map[string]bool{}, map[string]bool{}
	for _, a := range list.Items {
		if a.Spec.Placement != placement.Name || a.Spec.Revision != target || !a.DeletionTimestamp.IsZero() {
			continue
		}
		if a.Spec.Stage != "" {
			stages[a.Spec.Stage] = true
		}
		for _, cl := range a.Spec.Clusters {
			clusters[cl] = true
		}
	}
	return stages, clusters, nil
}

// leavingSince returns when the cluster of w left, marking the Work the first time.
func (r *Reconciler) leavingSince(ctx context.Context, w *workv1alpha1.Work, now time.Time) (time.Time, error) {
	if s, ok := w.Annotations[placementv1alpha1.LeavingSinceAnnotation]; ok {
		return parseTime(s, now), nil
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, placementv1alpha1.LeavingSinceAnnotation, now.UTC().Format(time.RFC3339))
	obj := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: w.Namespace}}
	if err := r.Client.Patch(ctx, obj, client.RawPatch("application/merge-patch+json", patch)); err != nil && !apierrors.IsNotFound(err) {
		return now, fmt.Errorf("marking Work %s as leaving: %w", klog.KObj(w), err)
	}
	return now, nil
}

// rolloutStatus is status.rollout for a plan and the clusters being removed.
// With routine (AllAtOnce), clusters merely on their way to the target are not
// listed: every cluster is, and the counts say how far; failed and kept clusters
// are.
func rolloutStatus(target *placementv1alpha1.PlacementRevision, stable string, plan rollout.Plan, removal rollout.Removal, byHash map[string]string, routine bool) *placementv1alpha1.RolloutStatus {
	st := &placementv1alpha1.RolloutStatus{
		TargetRevision: target.Name, TargetRevisionNumber: target.Spec.Revision, StableRevision: stable,
		CurrentStage: plan.Stage, StageClusters: plan.StageClusters,
		FailedClusters: ptr.To(int32(len(plan.Failed))),
	}
	updated := int32(0)
	defer func() { st.UpdatedClusters = ptr.To(updated) }()
	if !plan.StageStarted.IsZero() {
		st.StageStartTime = &metav1.Time{Time: plan.StageStarted.Truncate(time.Second)}
	}
	rank := map[placementv1alpha1.ClusterRolloutState]int{
		placementv1alpha1.ClusterFailed: 0, placementv1alpha1.ClusterUpdating: 1, placementv1alpha1.ClusterSoaking: 2,
		placementv1alpha1.ClusterSkipped: 3, placementv1alpha1.ClusterPending: 4,
	}
	var listed []placementv1alpha1.ClusterRollout
	for _, cp := range plan.Clusters {
		if cp.State == placementv1alpha1.ClusterSucceeded {
			updated++
			continue
		}
		if routine && cp.State != placementv1alpha1.ClusterFailed {
			continue
		}
		listed = append(listed, placementv1alpha1.ClusterRollout{Name: cp.Name, Stage: cp.Stage, State: cp.State, Reason: message.Truncate(cp.Reason, 1024)})
	}
	for _, name := range removal.Kept {
		listed = append(listed, placementv1alpha1.ClusterRollout{Name: name, State: placementv1alpha1.ClusterSkipped,
			Reason: "left the Placement: kept until the clusters added are Available"})
	}
	for i := range listed {
		listed[i].Revision = byHash[listed[i].Name]
	}
	slices.SortStableFunc(listed, func(a, b placementv1alpha1.ClusterRollout) int {
		return cmp.Or(cmp.Compare(rank[a.State], rank[b.State]), cmp.Compare(a.Name, b.Name))
	})
	if len(listed) > maxListedRollout {
		listed = listed[:maxListedRollout]
	}
	slices.SortFunc(listed, func(a, b placementv1alpha1.ClusterRollout) int { return cmp.Compare(a.Name, b.Name) })
	st.Clusters = listed
	return st
}

// maxListedRollout caps status.rollout.clusters.
const maxListedRollout = 100

// progressing is the Progressing condition for a plan and a removal.
func progressing(target *placementv1alpha1.PlacementRevision, plan rollout.Plan, removal rollout.Removal, paused bool, selected int) (metav1.ConditionStatus, string, string) {
	head := fmt.Sprintf("revision %d: %d of %d clusters updated", target.Spec.Revision, selected-len(plan.Failed)-pendingCount(plan), selected)
	failed := ""
	if len(plan.Failed) > 0 {
		failed = fmt.Sprintf("; failed: %s", failedSummary(plan))
	}
	switch {
	case plan.BudgetExceeded:
		return metav1.ConditionFalse, placementv1alpha1.ReasonFailureBudgetExceeded, head + failed
	case plan.Done && len(removal.Kept) == 0:
		if len(removal.Forced) > 0 {
			return metav1.ConditionFalse, placementv1alpha1.ReasonProgressDeadlineExceeded,
				fmt.Sprintf("%s; removed %s before the clusters added were Available (progress deadline)", head, message.List(removal.Forced, 5, ", "))
		}
		if deadline := deadlineFailures(plan); len(deadline) > 0 {
			return metav1.ConditionFalse, placementv1alpha1.ReasonProgressDeadlineExceeded, head + failed
		}
		return metav1.ConditionTrue, placementv1alpha1.ReasonRolloutComplete, head + failed
	case paused:
		return metav1.ConditionUnknown, placementv1alpha1.ReasonRolloutPaused, head + "; paused" + failed
	case plan.WaitingForApproval != "" && inFlight(plan) == 0:
		what := "stage " + plan.WaitingForApproval
		if plan.WaitingForApproval == "clusters" {
			what = "clusters"
		}
		return metav1.ConditionUnknown, placementv1alpha1.ReasonWaitingForApproval,
			fmt.Sprintf("%s; %s waits for a RolloutApproval of revision %s%s", head, what, target.Name, failed)
	case plan.Blocked && inFlight(plan) == 0:
		return metav1.ConditionFalse, placementv1alpha1.ReasonRolloutBlocked, head + "; maxUnavailable is 0 and every cluster left is Available" + failed
	}
	msg := head + failed
	if len(removal.Kept) > 0 {
		msg += fmt.Sprintf("; keeping %s until the clusters added are Available", message.List(removal.Kept, 5, ", "))
	}
	return metav1.ConditionTrue, placementv1alpha1.ReasonRolloutInProgress, msg
}

func pendingCount(plan rollout.Plan) int {
	n := 0
	for _, c := range plan.Clusters {
		if c.State != placementv1alpha1.ClusterSucceeded && c.State != placementv1alpha1.ClusterFailed {
			n++
		}
	}
	return n
}

func inFlight(plan rollout.Plan) int {
	n := 0
	for _, c := range plan.Clusters {
		if c.State == placementv1alpha1.ClusterUpdating || c.State == placementv1alpha1.ClusterSoaking {
			n++
		}
	}
	return n
}

func deadlineFailures(plan rollout.Plan) []string {
	var out []string
	for _, c := range plan.Clusters {
		if c.ByDeadline {
			out = append(out, c.Name)
		}
	}
	return out
}

func failedSummary(plan rollout.Plan) string {
	var parts []string
	for _, c := range plan.Clusters {
		if c.State == placementv1alpha1.ClusterFailed {
			parts = append(parts, c.Name+" ("+message.Truncate(c.Reason, 200)+")")
		}
	}
	return message.List(parts, 5, ", ")
}
