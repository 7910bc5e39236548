package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/rolloutctl"
)

// Placement is one Placement as the placements view lists it.
type Placement struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Selected  int32  `json:"selected"`
	Applied   int32  `json:"applied"`
	Available int32  `json:"available"`
	// Strategy is the rollout strategy's type; Paused whether it is paused.
	Strategy string `json:"strategy"`
	Paused   bool   `json:"paused,omitempty"`
	// Rollout is the Progressing condition (reason: message).
	Rollout    string      `json:"rollout,omitempty"`
	Conditions []Condition `json:"conditions"`
}

// PlacementPage is one page of a namespace's Placements.
type PlacementPage struct {
	Total int         `json:"total"`
	Items []Placement `json:"items"`
}

func (s *Server) placements(r *http.Request) (any, error) {
	args, err := required(r, "namespace")
	if err != nil {
		return nil, err
	}
	list := &placementv1alpha1.PlacementList{}
	if err := s.c.List(r.Context(), list, client.InNamespace(args[0])); err != nil {
		return nil, err
	}
	q := r.URL.Query().Get("q")
	var all []Placement
	for i := range list.Items {
		if q == "" || contains(list.Items[i].Name, q) {
			all = append(all, placementOf(&list.Items[i]))
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	offset, limit := page(r)
	return PlacementPage{Total: len(all), Items: window(all, offset, limit)}, nil
}

func placementOf(p *placementv1alpha1.Placement) Placement {
	out := Placement{Name: p.Name, Namespace: p.Namespace, Strategy: string(p.Spec.Strategy.Type), Paused: p.Spec.Strategy.Paused,
		Conditions: conditionsOf(p.Status.Conditions)}
	if out.Strategy == "" {
		out.Strategy = string(placementv1alpha1.RolloutAllAtOnce)
	}
	for _, n := range []struct {
		to   *int32
		from *int32
	}{{&out.Selected, p.Status.SelectedClusters}, {&out.Applied, p.Status.AppliedClusters}, {&out.Available, p.Status.AvailableClusters}} {
		if n.from != nil {
			*n.to = *n.from
		}
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, placementv1alpha1.ProgressingCondition); c != nil {
		out.Rollout = c.Reason + ": " + c.Message
	}
	return out
}

// PlacementDetail is one Placement in full: where it runs and how, the
// clusters it left out and why, its rollout and revisions.
type PlacementDetail struct {
	Placement
	Clusters []placementv1alpha1.ClusterStatus `json:"clusters"`
	// Unlisted counts clusters beyond the ones status lists.
	Unlisted int32 `json:"unlisted,omitempty"`
	// Excluded is why clusters were not chosen (counts by reason, and some
	// clusters by name).
	Excluded []placementv1alpha1.Exclusion       `json:"excluded,omitempty"`
	WhyNot   []placementv1alpha1.ExcludedCluster `json:"whyNot,omitempty"`
	Rollout  *Rollout                            `json:"rolloutStatus,omitempty"`
	// Revisions are the PlacementRevisions, newest first.
	Revisions []Revision `json:"revisions,omitempty"`
}

// Rollout is where the rollout is: its target and stable revisions, the
// stage it is in, each stage (and which wait for an approval), each cluster.
type Rollout struct {
	Target       int64                              `json:"target"`
	Stable       bool                               `json:"stable"`
	CurrentStage string                             `json:"currentStage,omitempty"`
	Waiting      bool                               `json:"waitingForApproval,omitempty"`
	Stages       []Stage                            `json:"stages,omitempty"`
	Clusters     []placementv1alpha1.ClusterRollout `json:"clusters,omitempty"`
}

// Stage is a stage of a Staged strategy.
type Stage struct {
	Name     string `json:"name"`
	Approval bool   `json:"approval,omitempty"`
}

// Revision is one PlacementRevision.
type Revision struct {
	Number  int64  `json:"number"`
	Name    string `json:"name"`
	Created string `json:"created"`
}

func (s *Server) placement(r *http.Request) (any, error) {
	args, err := required(r, "namespace", "name")
	if err != nil {
		return nil, err
	}
	p := &placementv1alpha1.Placement{}
	if err := s.c.Get(r.Context(), client.ObjectKey{Namespace: args[0], Name: args[1]}, p); err != nil {
		return nil, err
	}
	out := PlacementDetail{Placement: placementOf(p), Clusters: p.Status.Clusters}
	if out.Clusters == nil {
		out.Clusters = []placementv1alpha1.ClusterStatus{}
	}
	if p.Status.UnlistedClusters != nil {
		out.Unlisted = *p.Status.UnlistedClusters
	}
	if sc := p.Status.Scheduling; sc != nil {
		out.Excluded, out.WhyNot = sc.Excluded, sc.Clusters
	}
	if ro := p.Status.Rollout; ro != nil {
		out.Rollout = &Rollout{Target: ro.TargetRevisionNumber, Stable: ro.TargetRevision == ro.StableRevision,
			CurrentStage: ro.CurrentStage, Clusters: ro.Clusters}
		if c := meta.FindStatusCondition(p.Status.Conditions, placementv1alpha1.ProgressingCondition); c != nil {
			out.Rollout.Waiting = c.Reason == placementv1alpha1.ReasonWaitingForApproval
		}
		for _, st := range p.Spec.Strategy.Stages {
			out.Rollout.Stages = append(out.Rollout.Stages, Stage{Name: st.Name, Approval: st.Approval == placementv1alpha1.ApprovalRequired})
		}
	}
	// Revisions are the user's to read or not: without them, none are listed.
	if revs, err := rolloutctl.History(r.Context(), s.typed, client.ObjectKeyFromObject(p)); err == nil {
		for i := len(revs) - 1; i >= 0; i-- {
			out.Revisions = append(out.Revisions, Revision{Number: revs[i].Spec.Revision, Name: revs[i].Name,
				Created: revs[i].CreationTimestamp.UTC().Format(time.RFC3339)})
		}
	}
	return out, nil
}

// Action is a rollout button: what `kubectl lodestar rollout <action>` does.
type Action struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Action is approve, pause, resume or undo.
	Action string `json:"action"`
	// Stage is the stage to approve.
	Stage string `json:"stage,omitempty"`
	// Revision is undo's target (0: the one before the current).
	Revision int64 `json:"revision,omitempty"`
}

// rollout runs an Action with the user's credentials, through the code the
// CLI runs (rolloutctl).
func (s *Server) rollout(r *http.Request) (any, error) {
	var a Action
	if err := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<16)).Decode(&a); err != nil {
		return nil, &badRequest{"the action is not JSON: " + err.Error()}
	}
	if a.Namespace == "" || a.Name == "" {
		return nil, &badRequest{"the action names no Placement"}
	}
	key := client.ObjectKey{Namespace: a.Namespace, Name: a.Name}
	ctx := r.Context()
	switch a.Action {
	case "approve":
		if a.Stage == "" {
			return nil, &badRequest{"approve needs a stage"}
		}
		approval, err := rolloutctl.Approve(ctx, s.c, key, a.Stage, nil, 0)
		if err != nil {
			return nil, err
		}
		return map[string]string{"message": fmt.Sprintf("placement %s: stage %s approved for revision %s (RolloutApproval %s)", a.Name, a.Stage, approval.Spec.Revision, approval.Name)}, nil
	case "pause", "resume":
		if err := rolloutctl.SetPaused(ctx, s.typed, key, a.Action == "pause"); err != nil {
			return nil, err
		}
		return map[string]string{"message": fmt.Sprintf("placement %s %sd", a.Name, a.Action)}, nil
	case "undo":
		rev, err := rolloutctl.Undo(ctx, s.c, s.typed, key, a.Revision)
		if err != nil {
			return nil, err
		}
		return map[string]string{"message": fmt.Sprintf("placement %s rolled back to revision %d", a.Name, rev.Spec.Revision)}, nil
	}
	return nil, &badRequest{fmt.Sprintf("unknown action %q: want approve, pause, resume or undo", a.Action)}
}
