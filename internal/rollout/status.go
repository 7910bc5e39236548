package rollout

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/clusterworks"
	"github.com/lodestar-dev/lodestar/internal/message"
)

// Report is what status.rollout is made of: the target revision, the last
// one every cluster had, the plan and the removal, the clusters left, the
// revision each cluster holds (by name), and the retained claims.
type Report struct {
	Target *placementv1alpha1.PlacementRevision
	Stable string
	// Routine is AllAtOnce: clusters merely on their way to the target are
	// not listed.
	Routine  bool
	Plan     Plan
	Removal  Removal
	Leaving  []Leaving
	Holds    map[string]string
	Retained []placementv1alpha1.RetainedClaims
}

// Status is status.rollout for a plan and the clusters being removed. With
// routine (AllAtOnce), clusters merely on their way to the target are not
// listed: every cluster is, and the counts say how far; failed and kept
// clusters are.
func Status(in Report) *placementv1alpha1.RolloutStatus {
	target, plan, removal := in.Target, in.Plan, in.Removal
	st := &placementv1alpha1.RolloutStatus{
		TargetRevision: target.Name, TargetRevisionNumber: target.Spec.Revision, StableRevision: in.Stable,
		CurrentStage: plan.Stage, StageClusters: plan.StageClusters,
		FailedClusters: ptr.To(int32(len(plan.Failed))), RetainedClaims: in.Retained,
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
		if in.Routine && cp.State != placementv1alpha1.ClusterFailed {
			continue
		}
		listed = append(listed, placementv1alpha1.ClusterRollout{Name: cp.Name, Stage: cp.Stage, State: cp.State, Reason: message.Truncate(cp.Reason, 1024)})
	}
	for _, l := range in.Leaving {
		switch {
		case slices.Contains(removal.Held, l.Name):
			listed = append(listed, placementv1alpha1.ClusterRollout{Name: l.Name, State: placementv1alpha1.ClusterSkipped,
				Reason: "left the Placement: held by its claims (spec.strategy.stateful: Hold): " + l.Claims})
		case slices.Contains(removal.Kept, l.Name):
			listed = append(listed, placementv1alpha1.ClusterRollout{Name: l.Name, State: placementv1alpha1.ClusterSkipped,
				Reason: "left the Placement: kept until the selected clusters are Available"})
		}
	}
	for i := range listed {
		listed[i].Revision = in.Holds[listed[i].Name]
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

// Progressing is the Progressing condition for a plan and a removal.
func Progressing(target *placementv1alpha1.PlacementRevision, plan Plan, removal Removal, paused bool, selected int) (metav1.ConditionStatus, string, string) {
	head := fmt.Sprintf("revision %d: %d of %s updated", target.Spec.Revision, selected-len(plan.Failed)-pendingCount(plan), message.Count(selected, "cluster"))
	failed := ""
	if len(plan.Failed) > 0 {
		failed = fmt.Sprintf("; failed: %s", failedSummary(plan))
	}
	switch {
	case plan.BudgetExceeded:
		return metav1.ConditionFalse, placementv1alpha1.ReasonFailureBudgetExceeded, head + failed
	case selected == 0 && len(removal.Kept) == 0:
		// Nothing rolled out is not a rollout complete.
		return metav1.ConditionFalse, placementv1alpha1.ReasonNoClusters,
			fmt.Sprintf("revision %d: no cluster is selected, so it goes nowhere (the Scheduled condition says why)", target.Spec.Revision)
	case plan.Done && len(removal.Kept) == 0:
		if len(removal.Forced) > 0 {
			return metav1.ConditionFalse, placementv1alpha1.ReasonProgressDeadlineExceeded,
				fmt.Sprintf("%s; removed %s before the clusters added were Available (progress deadline)", head, message.List(removal.Forced, 5, ", "))
		}
		if deadline := deadlineFailures(plan); len(deadline) > 0 {
			return metav1.ConditionFalse, placementv1alpha1.ReasonProgressDeadlineExceeded, head + failed
		}
		if len(plan.Failed) > 0 {
			// Within the failure budget, but not everywhere: not "complete".
			return metav1.ConditionFalse, placementv1alpha1.ReasonRolloutCompleteWithFailures, head + failed
		}
		return metav1.ConditionTrue, placementv1alpha1.ReasonRolloutComplete, head
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
		msg += fmt.Sprintf("; keeping %s until the selected clusters are Available", message.List(removal.Kept, 5, ", "))
	}
	return metav1.ConditionTrue, placementv1alpha1.ReasonRolloutInProgress, msg
}

func pendingCount(plan Plan) int {
	n := 0
	for _, c := range plan.Clusters {
		if c.State != placementv1alpha1.ClusterSucceeded && c.State != placementv1alpha1.ClusterFailed {
			n++
		}
	}
	return n
}

func inFlight(plan Plan) int {
	n := 0
	for _, c := range plan.Clusters {
		if c.State == placementv1alpha1.ClusterUpdating || c.State == placementv1alpha1.ClusterSoaking {
			n++
		}
	}
	return n
}

func deadlineFailures(plan Plan) []string {
	var out []string
	for _, c := range plan.Clusters {
		if c.ByDeadline {
			out = append(out, c.Name)
		}
	}
	return out
}

func failedSummary(plan Plan) string {
	var parts []string
	for _, c := range plan.Clusters {
		if c.State == placementv1alpha1.ClusterFailed {
			parts = append(parts, c.Name+" ("+message.Truncate(c.Reason, 200)+")")
		}
	}
	return message.List(parts, 5, ", ")
}

// maxRetained bounds status.rollout.retainedClaims, and the claims of an entry.
const maxRetained = 20

// RetainedClaims is status.rollout.retainedClaims: what the clusters removed
// now kept, then what was recorded before, without the clusters the Placement
// chooses again, the latest maxRetained.
func RetainedClaims(previous []placementv1alpha1.RetainedClaims, now map[string][]string, chosen []string, at time.Time) []placementv1alpha1.RetainedClaims {
	var out []placementv1alpha1.RetainedClaims
	for _, cluster := range slices.Sorted(maps.Keys(now)) {
		kept := slices.Clone(now[cluster])
		slices.Sort(kept)
		out = append(out, placementv1alpha1.RetainedClaims{Cluster: cluster, Claims: kept[:min(len(kept), maxRetained)], Time: metav1.NewTime(at.Truncate(time.Second))})
	}
	for _, rc := range previous {
		if _, ok := now[rc.Cluster]; ok || slices.Contains(chosen, rc.Cluster) {
			continue
		}
		out = append(out, rc)
	}
	return out[:min(len(out), maxRetained)]
}

// StatusMoved tells whether status.rollout moved in what is written at once,
// not at the pace of counts: the target, the stable revision, the stage, the
// failed clusters, and the retained claims (the Works they come from are gone
// by the next reconcile).
func StatusMoved(old, now *placementv1alpha1.RolloutStatus) bool {
	return old == nil || old.TargetRevision != now.TargetRevision || old.StableRevision != now.StableRevision ||
		old.CurrentStage != now.CurrentStage || !ptr.Equal(old.FailedClusters, now.FailedClusters) ||
		!equality.Semantic.DeepEqual(old.RetainedClaims, now.RetainedClaims)
}

// RevisionNames are the names of the revisions the selected clusters and
// those left hold (by cluster; "" for a revision pruned since).
func RevisionNames(selected []Cluster, leaving []Leaving, works map[string][]*workv1alpha1.Work, revs []placementv1alpha1.PlacementRevision) map[string]string {
	hashes := map[string]string{}
	for _, c := range selected {
		hashes[c.Name] = c.Revision
	}
	for _, l := range leaving {
		hashes[l.Name], _ = clusterworks.Revision(works[l.Name])
	}
	out := make(map[string]string, len(hashes))
	for name, hash := range hashes {
		if i := slices.IndexFunc(revs, func(rv placementv1alpha1.PlacementRevision) bool { return rv.Spec.Hash == hash }); i >= 0 && hash != "" {
			out[name] = revs[i].Name
		}
	}
	return out
}
