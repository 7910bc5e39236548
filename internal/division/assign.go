// Assign: the division of a revision's workloads over a Placement's chosen
// clusters (spec.scheduling.replicas), and surge first: a share lowered waits
// until the increases elsewhere are Available.

package division

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/clusterworks"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/quantity"
)

// Share is one cluster's share of a divided workload.
type Share struct {
	// Replicas is what the cluster's Work carries (a Job's completions);
	// Parallelism a Job's parallelism; Start a StatefulSet's first ordinal.
	Replicas    int64 `json:"replicas"`
	Parallelism int64 `json:"parallelism,omitempty"`
	Start       int64 `json:"start,omitempty"`
	// Target is the division's share: Replicas once nothing waits.
	Target int64 `json:"target"`
	// Overridden, when set, is the replicas an override sets on the cluster
	// instead (what the Work carries).
	Overridden *int64 `json:"overridden,omitempty"`
	// Reason says why the share is what it is.
	Reason string `json:"reason,omitempty"`
}

// Shares are one cluster's shares, by workload key, as a Work's
// placementv1alpha1.SharesAnnotation holds them, and the rebalance token they
// were divided at.
type Shares struct {
	Rebalance string           `json:"rebalance,omitempty"`
	Workloads map[string]Share `json:"workloads,omitempty"`
}

// Encode is the annotation's value.
func (s Shares) Encode() string {
	b, _ := json.Marshal(s)
	return string(b)
}

// ParseShares reads the annotation's value; false when it is not one.
func ParseShares(v string) (Shares, bool) {
	var s Shares
	if v == "" || json.Unmarshal([]byte(v), &s) != nil {
		return Shares{}, false
	}
	return s, true
}

// Candidate is a chosen cluster as a division sees it.
type Candidate struct {
	Name   string
	Labels map[string]string
	// Free is its free capacity by resource name (cpu, memory), as its agent
	// reports it.
	Free map[string]resource.Quantity
	// Prev are the shares its Works carry now, nil when it has none.
	Prev *Shares
}

// Problem is a workload the division could not divide anew: its clusters keep
// the shares they have.
type Problem struct {
	Key string
	// Reason is placementv1alpha1.ReasonNotEnoughCapacity or ReasonNotDivisible.
	Reason, Message string
}

// Assignment is a revision's division over the chosen clusters.
type Assignment struct {
	// Shares are each cluster's shares (Target and Reason set), by cluster and
	// workload key; Replicas is Target until Surge says otherwise.
	Shares map[string]map[string]Share
	// Rebalance is the token divided at.
	Rebalance string
	Problems  []Problem
	// order are the workload keys in the revision's order.
	order []string
	// prevStarts are the StatefulSets' ordinals the clusters run (first and
	// how many), by cluster and workload key.
	prevStarts map[string]map[string]Share
}

// rule is the rule a cluster takes.
type rule struct {
	weight, min, max int64
	matched          bool
}

// rulesFor resolves each candidate's rule: of the rules it matches, the one
// with the highest weight. An invalid selector matches nothing.
func rulesFor(spec *placementv1alpha1.ReplicaDivision, candidates []Candidate) map[string]rule {
	out := make(map[string]rule, len(candidates))
	selectors := make([]labels.Selector, len(spec.Weights))
	for i, w := range spec.Weights {
		if w.ClusterSelector == nil {
			selectors[i] = labels.Everything()
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(w.ClusterSelector)
		if err != nil {
			sel = labels.Nothing()
		}
		selectors[i] = sel
	}
	for _, c := range candidates {
		best := rule{}
		for i, w := range spec.Weights {
			if len(w.ClusterNames) > 0 && !slices.Contains(w.ClusterNames, c.Name) || !selectors[i].Matches(labels.Set(c.Labels)) {
				continue
			}
			weight := int64(ptr.Deref(w.Weight, 1))
			if best.matched && weight <= best.weight {
				continue
			}
			best = rule{weight: weight, matched: true}
			if w.Min != nil {
				best.min = int64(*w.Min)
			}
			if w.Max != nil {
				best.max = int64(*w.Max)
			}
		}
		out[c.Name] = best
	}
	if spec.Method != placementv1alpha1.DivisionWeighted {
		for name, r := range out {
			r.weight = 1
			out[name] = r
		}
		return out
	}
	if !slices.ContainsFunc(candidates, func(c Candidate) bool { return out[c.Name].weight > 0 }) {
		for name, r := range out {
			r.weight = 1 // no chosen cluster has a weight: all weigh the same
			out[name] = r
		}
	}
	return out
}

// Assign divides each workload over the candidates by spec, seeded by the
// Placement's UID. A workload that cannot be divided anew keeps the shares the
// candidates carry (a candidate without one gets none) and is a Problem. A
// Job keeps the shares it was placed with: its completions cannot change once
// it runs.
func Assign(spec *placementv1alpha1.ReplicaDivision, workloads []Workload, candidates []Candidate, seed string, memo *Memo) *Assignment {
	a := &Assignment{Shares: map[string]map[string]Share{}, Rebalance: spec.Rebalance, prevStarts: map[string]map[string]Share{}}
	for _, c := range candidates {
		a.Shares[c.Name] = map[string]Share{}
		if c.Prev == nil {
			continue
		}
		for key, s := range c.Prev.Workloads {
			if isStatefulSet(key) && s.Replicas > 0 {
				if a.prevStarts[c.Name] == nil {
					a.prevStarts[c.Name] = map[string]Share{}
				}
				a.prevStarts[c.Name][key] = s
			}
		}
	}
	rules := rulesFor(spec, candidates)
	for _, w := range workloads {
		a.order = append(a.order, w.Key)
		prev, placed := prevTargets(w.Key, candidates)
		switch {
		case w.Invalid != "":
			a.keep(w, prev, placementv1alpha1.ReasonNotDivisible, w.Invalid)
		case w.Kind == jobKind && placed:
			a.set(w, prev, func(string) string { return "a Job keeps the shares it was placed with" })
		case spec.Method == placementv1alpha1.DivisionCapacity:
			a.byCapacity(memo, w, spec, candidates, rules, prev, placed, seed)
		default:
			a.byWeight(memo, w, spec, candidates, rules, seed)
		}
	}
	return a
}

// prevTargets are the candidates' current targets for key, and whether any
// candidate carries a share of it.
func prevTargets(key string, candidates []Candidate) (map[string]int64, bool) {
	out := map[string]int64{}
	placed := false
	for _, c := range candidates {
		if c.Prev == nil {
			continue
		}
		if s, ok := c.Prev.Workloads[key]; ok {
			out[c.Name] = s.Target
			placed = true
		}
	}
	return out, placed
}

func (a *Assignment) byWeight(memo *Memo, w Workload, spec *placementv1alpha1.ReplicaDivision, candidates []Candidate, rules map[string]rule, seed string) {
	clusters := make([]Cluster, 0, len(candidates))
	var sum int64
	for _, c := range candidates {
		r := rules[c.Name]
		clusters = append(clusters, Cluster{Name: c.Name, Weight: r.weight, Min: r.min, Max: r.max})
		sum += r.weight
	}
	got, err := memo.Divide(w.Total, clusters, seed)
	if err != nil {
		a.fail(w, candidates, err)
		return
	}
	a.set(w, got, func(name string) string {
		r := rules[name]
		why := fmt.Sprintf("weight %d of %d", r.weight, sum)
		if spec.Method == placementv1alpha1.DivisionEven {
			why = fmt.Sprintf("even over %d clusters", len(candidates))
		}
		return bounded(why, got[name], r)
	})
}

// byCapacity divides by the pods each candidate's free capacity holds: anew
// (fresh) when nothing is placed yet or the rebalance token changed, counting
// the workload's own pods there as room; else steadily, leaving the placed
// replicas where they are.
func (a *Assignment) byCapacity(memo *Memo, w Workload, spec *placementv1alpha1.ReplicaDivision, candidates []Candidate, rules map[string]rule, prev map[string]int64, placed bool, seed string) {
	fresh := !placed || slices.ContainsFunc(candidates, func(c Candidate) bool { return c.Prev != nil && c.Prev.Rebalance != spec.Rebalance })
	room := map[string]int64{}
	freshClusters := make([]Cluster, 0, len(candidates))
	steadyClusters := make([]Cluster, 0, len(candidates))
	for _, c := range candidates {
		r := rules[c.Name]
		pods, bounded := Room(c.Free, w.Requests)
		if !bounded {
			pods = MaxValue / 2
		}
		room[c.Name] = pods
		total := min(pods+prev[c.Name], MaxValue)
		freshClusters = append(freshClusters, Cluster{Name: c.Name, Weight: total, Min: min(r.min, total), Max: capped(total, r.max)})
		steadyMax := pods
		if r.max > 0 {
			steadyMax = min(pods, max(r.max-prev[c.Name], 0))
		}
		steadyClusters = append(steadyClusters, Cluster{Name: c.Name, Weight: steadyMax, Max: max(steadyMax, 0)})
	}
	freshShares, freshErr := memo.Divide(w.Total, freshClusters, seed)
	if fresh {
		if freshErr != nil {
			a.fail(w, candidates, freshErr)
			return
		}
		a.set(w, freshShares, func(name string) string { return bounded(roomReason(room[name]), freshShares[name], rules[name]) })
		return
	}
	got, err := steady(memo, w.Total, prev, steadyClusters, seed)
	if err != nil {
		a.fail(w, candidates, err)
		return
	}
	a.set(w, got, func(name string) string {
		why := roomReason(room[name]) + ", steady"
		if freshErr == nil && freshShares[name] != got[name] {
			why += fmt.Sprintf("; a rebalance would make it %d", freshShares[name])
		}
		return why
	})
}

func roomReason(pods int64) string {
	if pods >= MaxValue/2 {
		return "room unbounded (the pods request nothing)"
	}
	if pods == 1 {
		return "room for 1 more pod"
	}
	return fmt.Sprintf("room for %d more pods", pods)
}

// capped is the smaller of room and a rule's maximum (0: none).
func capped(room, ruleMax int64) int64 {
	if ruleMax > 0 {
		return min(room, ruleMax)
	}
	return room
}

// bounded adds to why when the share is at the rule's minimum or maximum.
func bounded(why string, share int64, r rule) string {
	switch {
	case r.max > 0 && share == r.max:
		return why + fmt.Sprintf(", at its max %d", r.max)
	case r.min > 0 && share == r.min:
		return why + fmt.Sprintf(", at its min %d", r.min)
	}
	return why
}

// set records the targets of w, with a Job's parallelism divided in the same
// proportion (at least 1 where it has completions).
func (a *Assignment) set(w Workload, targets map[string]int64, why func(string) string) {
	var par map[string]int64
	if w.Kind == jobKind {
		weights := make([]Cluster, 0, len(targets))
		for name, t := range targets {
			weights = append(weights, Cluster{Name: name, Weight: t})
		}
		par, _ = Divide(min(w.Parallelism, w.Total), weights, "")
	}
	for name, shares := range a.Shares {
		t := targets[name]
		s := Share{Replicas: t, Target: t, Reason: why(name)}
		if par != nil && t > 0 {
			s.Parallelism = max(par[name], 1)
		}
		shares[w.Key] = s
	}
}

// keep records a workload that keeps its current targets, as a Problem.
func (a *Assignment) keep(w Workload, prev map[string]int64, reason, msg string) {
	a.Problems = append(a.Problems, Problem{Key: w.Key, Reason: reason, Message: msg})
	a.set(w, prev, func(string) string { return "kept: " + msg })
}

// fail records a division that failed.
func (a *Assignment) fail(w Workload, candidates []Candidate, err error) {
	prev, _ := prevTargets(w.Key, candidates)
	reason := placementv1alpha1.ReasonNotDivisible
	if errors.Is(err, ErrNotEnoughRoom) {
		reason = placementv1alpha1.ReasonNotEnoughCapacity
	}
	a.keep(w, prev, reason, fmt.Sprintf("%s %s replicas: %v", w.Kind.Kind, w.Key[len(w.Kind.Kind)+1:], err))
}

// Of is a cluster's shares, with the rebalance token.
func (a *Assignment) Of(cluster string) Shares {
	return Shares{Rebalance: a.Rebalance, Workloads: maps.Clone(a.Shares[cluster])}
}

// Surge lowers no share before the increases are in: a cluster whose target
// is below what it carries (prev, by cluster; a cluster without Works carries
// nothing) keeps carrying that until settled, which the caller says when every
// chosen cluster carries at least its target and reports its objects
// Available; and a share held (held says why, for a StatefulSet whose bound
// ReadWriteOnce claims hold it on the cluster) is never lowered. It then
// numbers each StatefulSet's pods across the clusters (spec.ordinals.start).
func (a *Assignment) Surge(prev map[string]map[string]int64, settled bool, held func(cluster, key string) string) {
	names := slices.Sorted(maps.Keys(a.Shares))
	for _, key := range a.order {
		for _, name := range names {
			s, ok := a.Shares[name][key]
			if !ok {
				continue
			}
			have := prev[name][key]
			why := ""
			if held != nil && s.Target < have {
				why = held(name, key)
			}
			switch {
			case why != "":
				s.Replicas = have
				s.Reason = fmt.Sprintf("%s; keeps %d: %s (spec.strategy.stateful: Hold)", s.Reason, have, why)
			case s.Target < have && !settled:
				s.Replicas = have
				s.Reason = fmt.Sprintf("%s; keeps %d until the increases elsewhere are Available", s.Reason, have)
			}
			if s.Replicas > 0 && s.Parallelism == 0 && strings.HasPrefix(key, "Job/") {
				s.Parallelism = 1
			}
			a.Shares[name][key] = s
		}
		if isStatefulSet(key) {
			a.number(key, names)
		}
	}
}

// number gives each cluster's StatefulSet pods a range of ordinals of its own:
// the start it had (prevStarts), while its range overlaps no other's, so that
// a share that changes keeps its pods' names and claims; clusters new to it,
// or whose range now runs into another's, start after the highest range, in
// name order (the first division numbers 0..2 on A, 3..5 on B). The clusters
// that keep the most pods keep their start first.
func (a *Assignment) number(key string, names []string) {
	type span struct{ from, to int64 }
	kept := func(name string) int64 {
		prev, ok := a.prevStarts[name][key]
		if !ok {
			return 0
		}
		return min(prev.Replicas, a.Shares[name][key].Replicas)
	}
	byKept := slices.Clone(names)
	slices.SortStableFunc(byKept, func(x, y string) int { return cmp.Compare(kept(y), kept(x)) })
	var taken []span
	var next int64
	renumber := map[string]bool{}
	for _, name := range byKept {
		s := a.Shares[name][key]
		if s.Replicas == 0 {
			s.Start = 0
			a.Shares[name][key] = s
			continue
		}
		prev, ok := a.prevStarts[name][key]
		from, to := prev.Start, prev.Start+s.Replicas
		if ok && !slices.ContainsFunc(taken, func(t span) bool { return from < t.to && t.from < to }) {
			taken = append(taken, span{from, to})
			next = max(next, to)
			s.Start = from
			a.Shares[name][key] = s
			continue
		}
		renumber[name] = true
	}
	for _, name := range names {
		if !renumber[name] {
			continue
		}
		s := a.Shares[name][key]
		s.Start = next
		next += s.Replicas
		a.Shares[name][key] = s
	}
}

// Reached tells whether what a cluster carries reaches its targets.
func (a *Assignment) Reached(cluster string, carried map[string]int64) bool {
	for key, s := range a.Shares[cluster] {
		if carried[key] < s.Target {
			return false
		}
	}
	return true
}

// Lowering tells whether a cluster only gives replicas back: it carries more
// than its target of some workload, and of every other no more than it had
// (nothing increased there that would have to become Available first).
func (a *Assignment) Lowering(cluster string, carried map[string]int64) bool {
	above := false
	for key, s := range a.Shares[cluster] {
		switch {
		case carried[key] > s.Target:
			above = true
		case s.Target > 0:
			return false
		}
	}
	return above
}

func isStatefulSet(key string) bool { return strings.HasPrefix(key, "StatefulSet/") }

// Keys are the workload keys, in the revision's order.
func (a *Assignment) Keys() []string { return slices.Clone(a.order) }

// Validate checks what the API's schema cannot: that the rules' cluster
// selectors parse.
func Validate(spec *placementv1alpha1.ReplicaDivision) error {
	if spec == nil {
		return nil
	}
	for i, w := range spec.Weights {
		if w.ClusterSelector == nil {
			continue
		}
		if _, err := metav1.LabelSelectorAsSelector(w.ClusterSelector); err != nil {
			return fmt.Errorf("weights[%d].clusterSelector: %w", i, err)
		}
	}
	return nil
}

// Hash is base with the division folded in (base itself without one), as a
// PlacementRevision's hash.
func Hash(base string, spec *placementv1alpha1.ReplicaDivision) string {
	if spec == nil {
		return base
	}
	b, _ := json.Marshal(spec)
	return names.Hash(base + "\ndivision\n" + string(b))[:16]
}

// Carries is what the shares carry, by workload key.
func (s Shares) Carries() map[string]int64 {
	out := make(map[string]int64, len(s.Workloads))
	for key, w := range s.Workloads {
		out[key] = w.Replicas
	}
	return out
}

// Carried reads the shares a cluster's Works (its parts, in part order)
// carry: from part 0's placementv1alpha1.SharesAnnotation, or, for Works
// written before the Placement divided, the replicas of their divisible
// manifests (each cluster ran all of them). The shares are nil without the
// annotation.
func Carried(parts []*workv1alpha1.Work) (*Shares, map[string]int64) {
	carried := map[string]int64{}
	if len(parts) == 0 {
		return nil, carried
	}
	if shares, ok := ParseShares(parts[0].Annotations[placementv1alpha1.SharesAnnotation]); ok {
		return &shares, shares.Carries()
	}
	for _, w := range clusterworks.Current(parts) {
		for _, m := range w.Spec.Workload.Manifests {
			if wl, ok := WorkloadOf(m.Raw, nil); ok { // Works without a shares annotation predate custom kinds' division
				carried[wl.Key] = wl.Total
			}
		}
	}
	return nil, carried
}

// FreeCapacity is a cluster's free capacity, as its agent reports it in its
// ClusterProfile's properties: cpu.free, memory.free, and each extended
// resource's free amount (<name>.free) and the most of it free on one node
// (<name>.largestfree, as <name>+OnOneNode).
func FreeCapacity(properties map[string]string) map[string]resource.Quantity {
	out := map[string]resource.Quantity{}
	for name, prop := range map[string]string{"cpu": placementv1alpha1.PropertyCPUFree, "memory": placementv1alpha1.PropertyMemoryFree} {
		if q, err := quantity.Parse(properties[prop]); err == nil {
			out[name] = q
		}
	}
	for prop, v := range properties {
		name, free := strings.CutSuffix(prop, placementv1alpha1.ResourceFreeSuffix)
		if !free {
			if name, free = strings.CutSuffix(prop, placementv1alpha1.ResourceLargestFreeSuffix); free {
				name += OnOneNode
			}
		}
		if !free || !strings.Contains(name, "/") {
			continue
		}
		if q, err := quantity.Parse(v); err == nil {
			out[name] = q
		}
	}
	return out
}
