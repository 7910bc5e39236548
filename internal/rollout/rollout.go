// Package rollout is the gate between a Placement's target revision and its
// clusters: given the clusters, the strategy, what the last look found and the
// time, it says which clusters are given the target revision now, where each one
// is, whether the failure budget is spent and when to look again. It is a pure
// function; the work generator feeds it and carries out its answer.
package rollout

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/requeue"
)

// UnmatchedStage is the stage of the clusters that match no stage of a Staged
// strategy, and of clusters that joined after their stage started; it runs last,
// with the settings of the last stage.
const UnmatchedStage = "unmatched"

// DefaultProgressDeadline is progressDeadlineSeconds when unset.
const DefaultProgressDeadline = 600 * time.Second

// Cluster is what the gate knows of one selected cluster.
type Cluster struct {
	Name   string
	Labels map[string]string
	// Revision is the revision (hash) its Work holds; empty when it has no Work.
	Revision string
	// Since is when its Work was given Revision.
	Since time.Time
	// Applied and Available are the Work's conditions at its current generation;
	// Unknown when not reported.
	Applied, Available metav1.ConditionStatus
	// AvailableSince is when Available last became True.
	AvailableSince time.Time
	// Degraded is set when an object of the Work reports Degraded.
	Degraded bool
	// Message says why it is not applied, or degraded.
	Message string
	// OverrideFailed says why the target revision cannot be rendered for the
	// cluster (an override fails on it). Such a cluster keeps what it has, is
	// Failed at the target, and does not count against maxFailures: nothing on it
	// broke, and the other clusters proceed.
	OverrideFailed string
	// Objects are the objects its Works carry, AvailableObjects those its agent
	// reports Available, by ObjectKey; set (by ObjectsOf) only when clusters
	// are leaving, for Remove to judge object by object. Nil Objects with a
	// Revision mean they were not read: the cluster counts as a whole.
	Objects, AvailableObjects map[string]bool
}

// Stage is one stage of a Staged strategy.
type Stage struct {
	Name           string
	Selector       labels.Selector
	MaxConcurrency intstr.IntOrString
	Soak           time.Duration
	Approval       bool
}

// Strategy is a Placement's rollout strategy, parsed.
type Strategy struct {
	Type           placementv1alpha1.RolloutStrategyType
	MaxUnavailable intstr.IntOrString
	MaxSurge       intstr.IntOrString
	MinAvailable   time.Duration
	Stages         []Stage
	Deadline       time.Duration
	MaxFailures    int
	// MinAvailableClusters is the disruption budget; nil: none.
	MinAvailableClusters *intstr.IntOrString
}

// StrategyFor parses a Placement's spec.strategy; nil is AllAtOnce.
func StrategyFor(s placementv1alpha1.RolloutStrategy) (Strategy, error) {
	out := Strategy{Type: placementv1alpha1.RolloutAllAtOnce, Deadline: DefaultProgressDeadline,
		MaxUnavailable: intstr.FromString("25%"), MaxSurge: intstr.FromString("25%")}
	if s.Type != "" {
		out.Type = s.Type
	}
	if s.ProgressDeadlineSeconds != nil {
		out.Deadline = time.Duration(*s.ProgressDeadlineSeconds) * time.Second
	}
	out.MaxFailures = int(s.MaxFailures)
	if b := s.DisruptionBudget; b != nil {
		out.MinAvailableClusters = &b.MinAvailableClusters
	}
	if r := s.Rolling; r != nil {
		if r.MaxUnavailable != nil {
			out.MaxUnavailable = *r.MaxUnavailable
		}
		if r.MaxSurge != nil {
			out.MaxSurge = *r.MaxSurge
		}
		out.MinAvailable = time.Duration(r.MinAvailableSeconds) * time.Second
	}
	for i, st := range s.Stages {
		sel, err := metav1.LabelSelectorAsSelector(&st.ClusterSelector)
		if err != nil {
			return Strategy{}, fmt.Errorf("spec.strategy.stages[%d].clusterSelector: %w", i, err)
		}
		stage := Stage{Name: st.Name, Selector: sel, MaxConcurrency: intstr.FromInt32(1),
			Soak: time.Duration(st.SoakSeconds) * time.Second, Approval: st.Approval == placementv1alpha1.ApprovalRequired}
		if st.MaxConcurrency != nil {
			stage.MaxConcurrency = *st.MaxConcurrency
		}
		out.Stages = append(out.Stages, stage)
	}
	for _, v := range []intstr.IntOrString{out.MaxUnavailable, out.MaxSurge} {
		if _, err := intstr.GetScaledValueFromIntOrPercent(&v, 100, false); err != nil {
			return Strategy{}, fmt.Errorf("spec.strategy.rolling: %w", err)
		}
	}
	for i, st := range out.Stages {
		if _, err := intstr.GetScaledValueFromIntOrPercent(&st.MaxConcurrency, 100, true); err != nil {
			return Strategy{}, fmt.Errorf("spec.strategy.stages[%d].maxConcurrency: %w", i, err)
		}
	}
	return out, nil
}

// State is what the previous look recorded (status.rollout) and what users said:
// paused, and the RolloutApprovals of the target revision.
type State struct {
	// Target is the revision being rolled out.
	Target string
	// Stable is the last revision every selected cluster had, Available; added
	// clusters get it while a rollout of another revision is under way.
	Stable string
	Paused bool
	// Stage, StageStarted and StageClusters are the stage under way (Staged).
	Stage         string
	StageStarted  time.Time
	StageClusters []string
	// Leaving is how many clusters the Placement left still hold its objects.
	Leaving int
	// Hold, when set, says why clusters without a Work are given none: a
	// cluster the Placement left holds its copy by its claims, and a copy
	// elsewhere would run on new, empty claims.
	Hold string
	// ApprovedStages and ApprovedClusters are what the target's approvals name.
	ApprovedStages   map[string]bool
	ApprovedClusters map[string]bool
}

// ClusterPlan is where one cluster is.
type ClusterPlan struct {
	Name   string
	Stage  string
	State  placementv1alpha1.ClusterRolloutState
	Reason string
	// ByDeadline is set for a cluster Failed by the progress deadline.
	ByDeadline bool
	// OverrideFailed is set for a cluster Failed because an override fails on it.
	OverrideFailed bool
}

// Plan is the gate's answer.
type Plan struct {
	// Start are the clusters to give the target revision now.
	Start []string
	// PlaceStable are clusters without a Work to give the stable revision now: a
	// rollout of another revision is under way and they join its end.
	PlaceStable []string
	// Clusters is every selected cluster's place, sorted by name.
	Clusters []ClusterPlan
	// Stage, StageStarted and StageClusters are the stage state to record.
	Stage         string
	StageStarted  time.Time
	StageClusters []string
	// Failed are the clusters failed at the target revision.
	Failed []string
	// BudgetExceeded is set when more clusters failed than maxFailures allows;
	// no cluster is started then.
	BudgetExceeded bool
	// Done is set when no cluster is left to start or in flight.
	Done bool
	// Complete is set when every selected cluster is Succeeded at the target.
	Complete bool
	// WaitingForApproval names the stage (or "clusters") waiting for approval.
	WaitingForApproval string
	// Blocked is set when maxUnavailable 0 keeps every remaining cluster back.
	Blocked bool
	// RecheckAfter is when a time-based change (a soak ending, a deadline) is due.
	RecheckAfter time.Duration
}

// Rewritten records that the Works of clusters were written after the plan
// was computed (a surge-first division lowering their shares once the raised
// ones are Available): each of them that the plan counts Succeeded is
// Updating again until its agent reports the new Work, and the rollout is
// neither done nor complete.
func (p *Plan) Rewritten(clusters []string) {
	if len(clusters) == 0 {
		return
	}
	written := make(map[string]bool, len(clusters))
	for _, c := range clusters {
		written[c] = true
	}
	for i := range p.Clusters {
		if c := &p.Clusters[i]; written[c.Name] && c.State == placementv1alpha1.ClusterSucceeded {
			c.State, c.Reason = placementv1alpha1.ClusterUpdating, "its Work was just written anew"
			p.Done, p.Complete = false, false
		}
	}
}

// Compute is the gate.
func Compute(clusters []Cluster, s Strategy, st State, now time.Time) Plan {
	clusters = slices.Clone(clusters)
	slices.SortFunc(clusters, func(a, b Cluster) int { return cmp.Compare(a.Name, b.Name) })
	p := &planner{s: s, st: st, now: now, byName: map[string]*ClusterPlan{}}
	for _, c := range clusters {
		cp := &ClusterPlan{Name: c.Name}
		p.byName[c.Name] = cp
		p.order = append(p.order, cp)
		p.clusters = append(p.clusters, c)
	}
	// Where each cluster is at the target.
	for i := range p.clusters {
		p.evaluate(&p.clusters[i], s.MinAvailable)
	}
	if s.Type == placementv1alpha1.RolloutStaged {
		p.staged()
	} else {
		p.flat()
	}
	return p.finish()
}

type planner struct {
	s        Strategy
	st       State
	now      time.Time
	clusters []Cluster
	order    []*ClusterPlan
	byName   map[string]*ClusterPlan
	plan     Plan
	recheck  time.Duration
}

// evaluate sets the state of a cluster from its Work, with soak as the time it
// must have been Available at the target.
func (p *planner) evaluate(c *Cluster, soak time.Duration) {
	cp := p.byName[c.Name]
	cp.ByDeadline, cp.OverrideFailed = false, false
	switch {
	case c.OverrideFailed != "" && c.Revision != p.st.Target:
		cp.State, cp.Reason, cp.OverrideFailed = placementv1alpha1.ClusterFailed, placementv1alpha1.ReasonOverrideFailed+": "+c.OverrideFailed, true
	case c.Revision == "":
		cp.State, cp.Reason = placementv1alpha1.ClusterPending, "no Work yet"
	case c.Revision != p.st.Target:
		cp.State, cp.Reason = placementv1alpha1.ClusterPending, "at revision "+c.Revision
	case c.Applied == metav1.ConditionFalse:
		cp.State, cp.Reason = placementv1alpha1.ClusterFailed, "not applied: "+c.Message
	case c.Degraded:
		cp.State, cp.Reason = placementv1alpha1.ClusterFailed, "degraded: "+c.Message
	case c.Available == metav1.ConditionTrue:
		// Counted from the later of the transition and the revision's arrival:
		// an Available that dates from an earlier revision says nothing of this one.
		from := c.AvailableSince
		if c.Since.After(from) {
			from = c.Since
		}
		if left := from.Add(soak).Sub(p.now); left > 0 {
			cp.State, cp.Reason = placementv1alpha1.ClusterSoaking, fmt.Sprintf("Available; counts as updated after %s at this revision", soak)
			p.recheckIn(left)
			return
		}
		cp.State, cp.Reason = placementv1alpha1.ClusterSucceeded, ""
	case !p.st.Paused && !p.now.Before(c.Since.Add(p.s.Deadline)):
		cp.State, cp.Reason, cp.ByDeadline = placementv1alpha1.ClusterFailed,
			fmt.Sprintf("not Available within the progress deadline (%s)", p.s.Deadline), true
	default:
		cp.State, cp.Reason = placementv1alpha1.ClusterUpdating, "waiting for the objects to be Available"
		if !p.st.Paused {
			p.recheckIn(c.Since.Add(p.s.Deadline).Sub(p.now))
		}
	}
}

func (p *planner) recheckIn(d time.Duration) {
	if d <= 0 {
		d = time.Second
	}
	p.recheck = requeue.Soonest(p.recheck, d)
}

// budget counts the failed clusters and tells whether starting is allowed.
func (p *planner) budget() bool {
	p.plan.Failed = nil
	budgeted := 0
	for _, cp := range p.order {
		if cp.State == placementv1alpha1.ClusterFailed {
			p.plan.Failed = append(p.plan.Failed, cp.Name)
			if !cp.OverrideFailed {
				budgeted++
			}
		}
	}
	p.plan.BudgetExceeded = budgeted > p.s.MaxFailures
	return !p.plan.BudgetExceeded && !p.st.Paused
}

// placeAdded gives clusters without a Work something to run: the stable revision
// while a rollout of another revision is under way (they are updated at its end,
// through its gates), the target otherwise.
func (p *planner) placeAdded() {
	underWay := false
	for _, cp := range p.order {
		if c := p.cluster(cp.Name); c.Revision != "" && c.Revision != p.st.Target {
			underWay = true
			break
		}
	}
	stable := p.s.Type != placementv1alpha1.RolloutAllAtOnce && p.st.Stable != "" && p.st.Stable != p.st.Target && underWay
	// Rolling: at most maxSurge (at least 1) copies beyond the selected clusters
	// while the clusters left keep theirs.
	room := len(p.clusters)
	if p.s.Type == placementv1alpha1.RolloutRolling {
		holding := p.st.Leaving
		for _, c := range p.clusters {
			if c.Revision != "" {
				holding++
			}
		}
		room = len(p.clusters) + max(1, scaled(p.s.MaxSurge, len(p.clusters), true)) - holding
	}
	for i := range p.clusters {
		c := &p.clusters[i]
		cp := p.byName[c.Name]
		if c.Revision != "" || cp.OverrideFailed {
			continue
		}
		if p.st.Hold != "" {
			cp.Reason = "held: " + p.st.Hold
			continue
		}
		if room <= 0 {
			cp.Reason = fmt.Sprintf("waiting: maxSurge %s copies beyond the selected clusters while %s left keep theirs", p.s.MaxSurge.String(), message.Count(p.st.Leaving, "cluster"))
			continue
		}
		room--
		if stable {
			p.plan.PlaceStable = append(p.plan.PlaceStable, c.Name)
			cp.Reason = "joined during the rollout: given the stable revision, updated last"
			continue
		}
		p.start(cp)
	}
}

func (p *planner) cluster(name string) *Cluster {
	i, _ := slices.BinarySearchFunc(p.clusters, name, func(c Cluster, n string) int { return cmp.Compare(c.Name, n) })
	return &p.clusters[i]
}

func (p *planner) start(cp *ClusterPlan) {
	p.plan.Start = append(p.plan.Start, cp.Name)
	cp.State, cp.Reason = placementv1alpha1.ClusterUpdating, "given the target revision"
}

// flat is AllAtOnce, Rolling and External: one group of clusters.
func (p *planner) flat() {
	if !p.budget() {
		return
	}
	p.placeAdded()
	var pending []*ClusterPlan
	inFlight := 0
	for _, cp := range p.order {
		switch cp.State {
		case placementv1alpha1.ClusterUpdating, placementv1alpha1.ClusterSoaking:
			inFlight++
		case placementv1alpha1.ClusterPending:
			if p.cluster(cp.Name).Revision != "" {
				pending = append(pending, cp)
			}
		}
	}
	switch p.s.Type {
	case placementv1alpha1.RolloutExternal:
		for _, cp := range pending {
			if p.st.ApprovedClusters[cp.Name] {
				p.start(cp)
			} else {
				cp.Reason = "waiting for a RolloutApproval naming the cluster"
				p.plan.WaitingForApproval = "clusters"
			}
		}
	case placementv1alpha1.RolloutRolling:
		room := scaled(p.s.MaxUnavailable, len(p.order), false) - inFlight
		// Clusters that are not Available anyway lose nothing by an update, and do
		// not use maxUnavailable.
		sort.SliceStable(pending, func(i, j int) bool {
			return p.cluster(pending[i].Name).Available != metav1.ConditionTrue && p.cluster(pending[j].Name).Available == metav1.ConditionTrue
		})
		for _, cp := range pending {
			if p.cluster(cp.Name).Available != metav1.ConditionTrue {
				p.start(cp)
				continue
			}
			if room <= 0 {
				cp.Reason = fmt.Sprintf("waiting: %s updating, maxUnavailable %s", message.Count(inFlight, "cluster"), p.s.MaxUnavailable.String())
				if inFlight == 0 {
					p.plan.Blocked = true
				}
				continue
			}
			p.start(cp)
			room--
		}
	default:
		for _, cp := range pending {
			p.start(cp)
		}
	}
}

// scaled resolves an integer or percentage of total; a percentage is rounded
// up or down and is at least 1 unless it is 0.
func scaled(v intstr.IntOrString, total int, roundUp bool) int {
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, total, roundUp)
	if err != nil {
		return 1
	}
	if n == 0 && v.Type == intstr.String && v.StrVal != "0%" {
		return 1
	}
	return n
}

// staged walks the stages from the one under way.
func (p *planner) staged() {
	stages := append(slices.Clone(p.s.Stages), p.tail())
	idx := 0
	if p.st.Stage != "" {
		idx = slices.IndexFunc(stages, func(s Stage) bool { return s.Name == p.st.Stage })
		if idx < 0 {
			idx = 0
			p.st.Stage, p.st.StageClusters = "", nil
		}
	}
	// Clusters of stages that did not start yet say which stage they wait for.
	p.labelStages(stages, idx)
	okToStart := p.budget()
	if okToStart {
		p.placeAdded()
	}
	for ; idx < len(stages); idx++ {
		stage := stages[idx]
		started := p.st.Stage == stage.Name && !p.st.StageStarted.IsZero()
		if !started {
			members := p.members(stages, idx)
			if len(members) == 0 || p.allSucceeded(members) {
				continue // an empty or finished stage is skipped, approval or not
			}
			if !okToStart {
				p.setStage(stage.Name, time.Time{}, nil)
				return
			}
			if stage.Approval && !p.st.ApprovedStages[stage.Name] {
				p.setStage(stage.Name, time.Time{}, nil)
				p.plan.WaitingForApproval = stage.Name
				for _, m := range members {
					p.byName[m].Reason = fmt.Sprintf("stage %s waits for a RolloutApproval", stage.Name)
				}
				return
			}
			p.st.Stage, p.st.StageStarted, p.st.StageClusters = stage.Name, p.now, members
		}
		p.setStage(stage.Name, p.st.StageStarted, p.st.StageClusters)
		if !p.runStage(stage, okToStart) {
			return
		}
		p.st.Stage, p.st.StageStarted, p.st.StageClusters = "", time.Time{}, nil
	}
	p.setStage("", time.Time{}, nil)
}

func (p *planner) setStage(name string, started time.Time, members []string) {
	p.plan.Stage, p.plan.StageStarted, p.plan.StageClusters = name, started, members
}

// tail is the stage of unmatched and late clusters, with the last stage's settings.
func (p *planner) tail() Stage {
	t := Stage{Name: UnmatchedStage, Selector: labels.Everything(), MaxConcurrency: intstr.FromInt32(1)}
	if n := len(p.s.Stages); n > 0 {
		last := p.s.Stages[n-1]
		t.MaxConcurrency, t.Soak, t.Approval = last.MaxConcurrency, last.Soak, last.Approval
	}
	return t
}

// members are the selected clusters of stage idx as of now: those its selector
// matches and no earlier stage's; the tail takes every cluster not yet updated.
func (p *planner) members(stages []Stage, idx int) []string {
	var out []string
	for _, c := range p.clusters {
		if idx == len(stages)-1 {
			if cp := p.byName[c.Name]; cp.State != placementv1alpha1.ClusterSucceeded && cp.State != placementv1alpha1.ClusterFailed {
				out = append(out, c.Name)
			}
			continue
		}
		if p.stageOf(stages, c.Labels) == idx {
			out = append(out, c.Name)
		}
	}
	return out
}

func (p *planner) stageOf(stages []Stage, l map[string]string) int {
	for i, s := range stages[:len(stages)-1] {
		if s.Selector.Matches(labels.Set(l)) {
			return i
		}
	}
	return len(stages) - 1
}

func (p *planner) allSucceeded(members []string) bool {
	for _, m := range members {
		if p.byName[m].State != placementv1alpha1.ClusterSucceeded {
			return false
		}
	}
	return true
}

// labelStages names each cluster's stage: the stage under way for its members,
// the stage its labels match for the rest (the tail when that one is past).
func (p *planner) labelStages(stages []Stage, current int) {
	members := map[string]bool{}
	for _, m := range p.st.StageClusters {
		members[m] = true
	}
	for _, c := range p.clusters {
		cp := p.byName[c.Name]
		i := p.stageOf(stages, c.Labels)
		switch {
		case members[c.Name]:
			i = current
		case i < current || (i == current && p.st.Stage == stages[current].Name && !p.st.StageStarted.IsZero()):
			if cp.State != placementv1alpha1.ClusterSucceeded {
				i = len(stages) - 1
			}
		}
		cp.Stage = stages[i].Name
		if cp.State == placementv1alpha1.ClusterPending && c.Revision != "" && i > current {
			cp.Reason = fmt.Sprintf("waiting for stage %s", stages[i].Name)
		}
		// Soak is the stage's own.
		if stages[i].Soak > 0 {
			p.evaluate(p.cluster(c.Name), stages[i].Soak)
		}
	}
}

// runStage starts what the stage's maxConcurrency allows and tells whether the
// stage is done: each of its clusters still selected is Succeeded or Failed.
func (p *planner) runStage(stage Stage, okToStart bool) bool {
	members := p.st.StageClusters
	room := scaled(stage.MaxConcurrency, len(members), true)
	if room < 1 {
		room = 1
	}
	done := true
	var pending []*ClusterPlan
	for _, m := range members {
		cp, ok := p.byName[m]
		if !ok {
			continue // left the Placement: skipped
		}
		switch cp.State {
		case placementv1alpha1.ClusterUpdating, placementv1alpha1.ClusterSoaking:
			room--
			done = false
		case placementv1alpha1.ClusterPending:
			done = false
			if p.cluster(m).Revision != "" {
				pending = append(pending, cp)
			}
		}
	}
	if !okToStart {
		return false
	}
	for _, cp := range pending {
		if room <= 0 {
			cp.Reason = fmt.Sprintf("waiting: stage %s updates %s clusters at a time", stage.Name, stage.MaxConcurrency.String())
			continue
		}
		p.start(cp)
		room--
	}
	return done
}

func (p *planner) finish() Plan {
	plan := p.plan
	plan.RecheckAfter = p.recheck
	plan.Done, plan.Complete = true, true
	for _, cp := range p.order {
		switch cp.State {
		case placementv1alpha1.ClusterSucceeded:
		case placementv1alpha1.ClusterFailed:
			plan.Complete = false
		default:
			plan.Complete, plan.Done = false, false
		}
		plan.Clusters = append(plan.Clusters, *cp)
	}
	if plan.Complete {
		plan.Stage, plan.StageStarted, plan.StageClusters = "", time.Time{}, nil
	}
	return plan
}

// Leaving is a cluster the Placement no longer selects whose Work is still there.
type Leaving struct {
	Name string
	// Since is when it left.
	Since time.Time
	// Available is set when its copy is Available.
	Available bool
	// Revoked is set when the Placement may no longer use the cluster at all (its
	// cluster set, or its ClusterProfile, is gone): it is removed at once.
	Revoked bool
	// Deadline, when set, replaces the progress deadline for this cluster (the
	// failover grace period of an unreachable cluster).
	Deadline time.Duration
	// Claims, when set, describes the bound ReadWriteOnce claims its copy
	// holds there (the stateful gate); ClaimsMove says they do not keep it
	// (spec.strategy.stateful: Move, or a drain with --include-stateful).
	Claims     string
	ClaimsMove bool
	// FailedOver is set when it left because its agent is unreachable.
	FailedOver bool
	// ForcedAt, when set, is when the cluster's forced drain overrules the
	// Placement (a tenant's): from then on its disruption budget keeps no copy
	// there.
	ForcedAt time.Time
	// Traffic is what the importers of the Services its copy exports show;
	// nil when it exports none.
	Traffic *Traffic
	// AvailableObjects, when set, are the objects its copy has Available (by
	// ObjectKey): the copy serves while any of them is, and goes once each is
	// Available on enough selected clusters.
	AvailableObjects map[string]bool
}

// Removal says what becomes of the clusters a Placement left.
type Removal struct {
	// Remove are the clusters whose Work goes now; Forced those among them whose
	// replacements were not Available by the deadline.
	Remove, Forced []string
	// Kept are the clusters kept (until their replacements are Available, by
	// their claims, or for their traffic); Held those among them kept by their
	// claims (Holds), TrafficHeld why those kept for their traffic are.
	Kept, Held  []string
	TrafficHeld []string
	// Moving describe the copies with bound ReadWriteOnce claims that leave
	// anyway (ClaimsMove).
	Moving []string
	// BudgetHeld say which Available copies the disruption budget keeps, and
	// why.
	BudgetHeld []string
	// Overruled are the copies the budget would keep but a forced drain lets
	// go, by cluster: what was overruled.
	Overruled map[string]string
	// Withdraw are the clusters whose endpoints are to be withdrawn from the
	// importers now (the traffic gate's one step that writes).
	Withdraw     []string
	RecheckAfter time.Duration
}

// wholeCopy stands for every object of a cluster known only as a whole.
const wholeCopy = ""

// serves are the objects the copy has Available: its AvailableObjects, or
// the whole copy when it is Available and known only as a whole.
func (l Leaving) serves() map[string]bool {
	if l.AvailableObjects != nil {
		return l.AvailableObjects
	}
	if l.Available {
		return map[string]bool{wholeCopy: true}
	}
	return nil
}

// tally counts, per object, the selected clusters that need it (carry it, or
// will: no Works yet) and the copies that have it Available.
type tally struct {
	need, have map[string]int
	// needAll counts the selected clusters that need every object (no Works
	// yet, or known only as a whole); haveAll those Available as a whole.
	needAll, haveAll int
}

func newTally(selected []Cluster) *tally {
	t := &tally{need: map[string]int{}, have: map[string]int{}}
	for _, c := range selected {
		if c.Revision == "" || c.Objects == nil {
			t.needAll++
			if c.Revision != "" && c.Available == metav1.ConditionTrue {
				t.haveAll++
			}
			continue
		}
		for o := range c.Objects {
			t.need[o]++
		}
		for o := range c.AvailableObjects {
			t.have[o]++
		}
	}
	return t
}

func (t *tally) add(objects map[string]bool, n int) {
	for o := range objects {
		t.have[o] += n
	}
}

// spare tells whether every one of objects would still be Available on at
// least as many clusters as need it, one copy fewer.
func (t *tally) spare(objects map[string]bool) bool {
	for o := range objects {
		have, need := t.have[o]+t.haveAll, t.need[o]+t.needAll
		if o != wholeCopy {
			have += t.have[wholeCopy]
		}
		if have-1 < need {
			return false
		}
	}
	return true
}
