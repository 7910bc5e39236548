// Package scheduling chooses member clusters for a Placement: filters (names,
// labels, health, taints and tolerations, a CEL expression, free capacity), then,
// when a Placement asks for a number of clusters, a ranking by weighted
// preferences with topology spread and a deterministic tiebreak. It works on plain
// values so that every rule is a unit-testable function.
package scheduling

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	qty "github.com/lodestar-dev/lodestar/internal/quantity"
	"github.com/lodestar-dev/lodestar/internal/requeue"
)

// MaxDecisionsPerSlice is the most clusters one PlacementDecision may name.
const MaxDecisionsPerSlice = 100

// Cluster is what the scheduler knows of a member cluster.
type Cluster struct {
	// Name is the cluster's name (its ClusterProfile's name).
	Name string
	// Namespace is the namespace of its ClusterProfile (its cluster set).
	Namespace string
	// Labels are its ClusterProfile's labels.
	Labels map[string]string
	// Properties are its ClusterProfile's status.properties, by name.
	Properties map[string]string
	// Version is its Kubernetes version.
	Version string
	// Conditions are its ClusterProfile's conditions, type to status.
	Conditions map[string]string
	// Taints are its taints; TaintsErr says why they could not be read.
	Taints    []placementv1alpha1.Taint
	TaintsErr error
	// UnreachableSince is when its agent was last found unreachable (the
	// AgentReachable condition's transition time, when not True).
	UnreachableSince time.Time
	// NeverConnected is set while its agent has never renewed its Lease (a
	// cluster joined and not yet running its agent).
	NeverConnected bool
}

// Unhealthy conditions: a cluster with one of these False is not chosen anew.
var unhealthyWhenFalse = []string{placementv1alpha1.ControlPlaneHealthyCondition, placementv1alpha1.AgentReachableCondition}

// HealthReported tells whether the hub has judged the cluster's health yet: the
// cluster health controller sets ControlPlaneHealthy (Unknown while the agent has
// not connected) as soon as it sees a ClusterProfile. A cluster is not chosen
// before, so that it is never chosen and then kept while its first report says
// it is unhealthy.
//
// A cluster whose agent never connected is not chosen either: a joined cluster
// without its agent must not hold every broad Placement waiting for it.
func (c Cluster) HealthReported() bool {
	_, ok := c.Conditions[placementv1alpha1.ControlPlaneHealthyCondition]
	return ok && !c.NeverConnected
}

// Healthy tells whether the cluster's health conditions allow new placements.
func (c Cluster) Healthy() bool {
	for _, t := range unhealthyWhenFalse {
		if c.Conditions[t] == "False" {
			return false
		}
	}
	return true
}

// Policy is a Placement's scheduling rules, checked and compiled.
type Policy struct {
	// Selector matches cluster labels; Nothing() when the Placement sets neither a
	// selector nor names.
	Selector labels.Selector
	// Names, when not nil, are the only clusters allowed.
	Names map[string]bool
	// Expression, when set, must yield true.
	Expression *Expression
	// CPU and Memory, when set, are the free capacity required.
	CPU, Memory *resource.Quantity
	// Resources are the free amounts of extended resources required.
	Resources []ResourceAsk
	// StorageClasses are the storage classes a cluster must offer.
	StorageClasses []string
	// Tolerations are the Placement's tolerations.
	Tolerations []placementv1alpha1.Toleration
	// Tenant is set for a tenant's Placement (not a ClusterPlacement's
	// carrier): a forced drain (the drain taint's forceAt) ends its toleration
	// of the drain.
	Tenant bool
	// N, when set, is the number of clusters to pick.
	N *int
	// Preferences rank eligible clusters when N is set.
	Preferences []Preference
	// SpreadKey and MaxSkew spread the picked clusters; SpreadKey is a label key or
	// "property:<name>".
	SpreadKey string
	MaxSkew   int
	// Seed makes the tiebreak deterministic per Placement.
	Seed string
	// FailoverAfter, when set (spec.scheduling.failover), is how long a chosen cluster's
	// agent may be unreachable before the cluster is replaced.
	FailoverAfter *time.Duration
	// Exclude are clusters not to choose: those being failed over.
	Exclude map[string]bool
}

// Preference is a compiled preference.
type Preference struct {
	Weight int
	// Expression or Property (with Descending) scores a cluster.
	Expression *Expression
	Property   string
	Descending bool
}

// Result is what the scheduler decided.
type Result struct {
	// Selected are the chosen clusters, ordered by namespace and name.
	Selected []Cluster
	// Eligible is how many clusters passed every filter.
	Eligible int
	// Excluded names, by reason, the clusters not chosen (and KeptWhileUnhealthy).
	Excluded map[string][]string
	// Unsatisfied is set when fewer clusters than N could be picked.
	Unsatisfied bool
	// RecheckAfter, when not zero, is when a toleration expires and the decision
	// must be made again.
	RecheckAfter time.Duration
}

func (r *Result) exclude(reason, name string) {
	if r.Excluded == nil {
		r.Excluded = map[string][]string{}
	}
	r.Excluded[reason] = append(r.Excluded[reason], name)
}

type candidate struct {
	Cluster
	current     bool
	preferAvoid bool // tainted PreferNoSchedule
	// expressionFails is set for a chosen cluster kept while its expression errs.
	expressionFails bool
	score           float64
	tiebreak        uint64
}

// Schedule chooses clusters. current names the clusters chosen before: they stay
// while they remain eligible (and, for NoSchedule taints and lost health, even
// then), so decisions do not churn.
func Schedule(clusters []Cluster, current map[string]bool, p Policy, now time.Time) Result {
	var res Result
	var eligible []candidate
	for _, c := range clusters {
		cand, reason, recheck := filter(c, current[c.Name], p, now)
		res.RecheckAfter = requeue.Soonest(res.RecheckAfter, recheck)
		if reason != "" {
			res.exclude(reason, c.Name)
			continue
		}
		if current[c.Name] && !c.Healthy() {
			res.exclude(placementv1alpha1.KeptWhileUnhealthy, c.Name)
		}
		if cand.expressionFails {
			res.exclude(placementv1alpha1.KeptWhileExpressionFails, c.Name)
		}
		eligible = append(eligible, cand)
	}
	res.Eligible = len(eligible)

	if p.N == nil {
		for _, c := range eligible {
			res.Selected = append(res.Selected, c.Cluster)
		}
	} else {
		res.Selected, res.Unsatisfied = pick(eligible, p, &res)
	}
	sortClusters(res.Selected)
	for reason := range res.Excluded {
		sort.Strings(res.Excluded[reason])
	}
	return res
}

// checkTaints applies a cluster's taints (taintsOf) to the Placement's
// tolerations.
func checkTaints(taints []placementv1alpha1.Taint, current bool, p Policy, now time.Time) (string, bool, time.Duration) {
	tolerations := p.Tolerations
	var avoid bool
	var recheck time.Duration
	for _, t := range taints {
		tol, ok := tolerated(t, tolerations)
		switch t.Effect {
		case placementv1alpha1.TaintPreferNoSchedule:
			avoid = avoid || !ok
		case placementv1alpha1.TaintNoSchedule:
			if !ok && !current {
				return placementv1alpha1.ExclusionTainted, false, 0
			}
		case placementv1alpha1.TaintNoExecute:
			if !ok {
				return placementv1alpha1.ExclusionTainted, false, 0
			}
			end, ends := tolerationEnd(t, tol, p.Tenant, now)
			if !ends {
				continue
			}
			left := end.Sub(now)
			if left <= 0 {
				return placementv1alpha1.ExclusionTolerationExpired, false, 0
			}
			if !current {
				// Not chosen anew only to be evicted soon.
				return placementv1alpha1.ExclusionTainted, false, 0
			}
			recheck = requeue.Soonest(recheck, left)
		}
	}
	return "", avoid, recheck
}

// tolerationEnd is when a toleration of a NoExecute taint ends, if it does:
// its tolerationSeconds from when the taint was added, or, for a tenant, the
// forced drain's forceAt if that comes first.
func tolerationEnd(t placementv1alpha1.Taint, tol placementv1alpha1.Toleration, tenant bool, now time.Time) (time.Time, bool) {
	var end time.Time
	ends := false
	if tol.TolerationSeconds != nil {
		added, err := time.Parse(time.RFC3339, t.TimeAdded)
		if err != nil {
			added = now
		}
		end, ends = added.Add(time.Duration(*tol.TolerationSeconds)*time.Second), true
	}
	if forced, ok := t.ForcedAt(); ok && tenant && (!ends || forced.Before(end)) {
		end, ends = forced, true
	}
	return end, ends
}

// reservedTaints are Lodestar's own taint keys: a wildcard toleration (Exists
// without a key) does not tolerate them, so that a tenant cannot keep its
// workload on a cluster the platform team drains or quarantines; only a
// toleration that names the key does.
var reservedTaints = map[string]bool{
	placementv1alpha1.CordonTaintKey:   true,
	placementv1alpha1.DrainTaintKey:    true,
	placementv1alpha1.InvalidTaintsKey: true,
}

// tolerated returns the toleration that tolerates t, if any.
func tolerated(t placementv1alpha1.Taint, tolerations []placementv1alpha1.Toleration) (placementv1alpha1.Toleration, bool) {
	for _, tol := range tolerations {
		if tol.Effect != "" && tol.Effect != t.Effect {
			continue
		}
		switch tol.Operator {
		case placementv1alpha1.TolerationExists:
			if tol.Key == "" && !reservedTaints[t.Key] || tol.Key == t.Key {
				return tol, true
			}
		default:
			if tol.Key == t.Key && tol.Value == t.Value {
				return tol, true
			}
		}
	}
	return placementv1alpha1.Toleration{}, false
}

// ResourceAsk is a free amount of an extended resource a cluster must have, and
// the property that says how much it has.
type ResourceAsk struct {
	Name     string
	Quantity resource.Quantity
	// OnOneNode reads the largest free on one node.
	OnOneNode bool
	Property  string
}

func hasCapacity(c Cluster, property string, want *resource.Quantity) bool {
	if want == nil {
		return true
	}
	q, ok := quantity(c, property)
	return ok && q.Cmp(*want) >= 0
}

// missingStorageClasses are the classes of want the cluster does not report,
// and whether it has them all; a cluster that reports no classes has none.
func missingStorageClasses(c Cluster, want []string) ([]string, bool) {
	if len(want) == 0 {
		return nil, true
	}
	have := strings.Split(c.Properties[placementv1alpha1.PropertyStorageClasses], ",")
	var missing []string
	for _, w := range want {
		if !slices.Contains(have, w) {
			missing = append(missing, w)
		}
	}
	return missing, len(missing) == 0
}

func quantity(c Cluster, property string) (resource.Quantity, bool) {
	v, ok := c.Properties[property]
	if !ok {
		return resource.Quantity{}, false
	}
	q, err := qty.Parse(v)
	return q, err == nil
}

// pick chooses N of the eligible clusters: those chosen before first (while
// eligible), then by preference, honouring the topology spread.
func pick(eligible []candidate, p Policy, res *Result) ([]Cluster, bool) {
	n := *p.N
	score(eligible, p)
	for i := range eligible {
		eligible[i].tiebreak = tiebreak(p.Seed, eligible[i].Name)
	}
	sort.SliceStable(eligible, func(i, j int) bool {
		a, b := eligible[i], eligible[j]
		if a.current != b.current {
			return a.current
		}
		if a.preferAvoid != b.preferAvoid {
			return !a.preferAvoid
		}
		if a.score != b.score {
			return a.score > b.score
		}
		return a.tiebreak < b.tiebreak
	})

	var picked []Cluster
	domains := map[string]int{}
	var unpicked []candidate
	if p.SpreadKey != "" {
		var withKey []candidate
		for _, c := range eligible {
			d, ok := domain(c.Cluster, p.SpreadKey)
			if !ok {
				res.exclude(placementv1alpha1.ExclusionMissingTopologyKey, c.Name)
				continue
			}
			domains[d] += 0
			withKey = append(withKey, c)
		}
		eligible = withKey
	}
	for _, c := range eligible {
		if len(picked) >= n {
			unpicked = append(unpicked, c)
			continue
		}
		if p.SpreadKey != "" && !c.current {
			d, _ := domain(c.Cluster, p.SpreadKey)
			if domains[d]+1-minCount(domains) > p.MaxSkew {
				unpicked = append(unpicked, c)
				continue
			}
			domains[d]++
		} else if p.SpreadKey != "" {
			d, _ := domain(c.Cluster, p.SpreadKey)
			domains[d]++
		}
		picked = append(picked, c.Cluster)
	}
	// A second pass: the skew bound may have loosened as other domains filled.
	if p.SpreadKey != "" && len(picked) < n {
		var still []candidate
		for progress := true; progress && len(picked) < n; {
			progress = false
			still = still[:0]
			for _, c := range unpicked {
				d, _ := domain(c.Cluster, p.SpreadKey)
				if len(picked) < n && domains[d]+1-minCount(domains) <= p.MaxSkew {
					domains[d]++
					picked = append(picked, c.Cluster)
					progress = true
					continue
				}
				still = append(still, c)
			}
			unpicked = append([]candidate(nil), still...)
		}
	}
	for _, c := range unpicked {
		reason := placementv1alpha1.ExclusionNotPicked
		if len(picked) < n {
			reason = placementv1alpha1.ExclusionTopologySkew
		}
		res.exclude(reason, c.Name)
	}
	return picked, len(picked) < n
}

func minCount(domains map[string]int) int {
	m := math.MaxInt
	for _, n := range domains {
		m = min(m, n)
	}
	if m == math.MaxInt {
		return 0
	}
	return m
}

// domain returns the cluster's value of the topology key.
func domain(c Cluster, key string) (string, bool) {
	if name, ok := cutPrefix(key, "property:"); ok {
		v, found := c.Properties[name]
		return v, found
	}
	v, ok := c.Labels[key]
	return v, ok
}

func cutPrefix(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):], true
	}
	return "", false
}

// score sets each candidate's score: the weighted sum of its preferences, each
// scaled to 0..1 across the candidates.
func score(cands []candidate, p Policy) {
	prefs := p.Preferences
	if p.CPU != nil {
		prefs = append(prefs, Preference{Weight: 10, Property: placementv1alpha1.PropertyCPUFree, Descending: true})
	}
	if p.Memory != nil {
		prefs = append(prefs, Preference{Weight: 10, Property: placementv1alpha1.PropertyMemoryFree, Descending: true})
	}
	for _, r := range p.Resources {
		prefs = append(prefs, Preference{Weight: 10, Property: r.Property, Descending: true})
	}
	for _, pref := range prefs {
		raw := make([]float64, len(cands))
		valid := make([]bool, len(cands))
		lo, hi := math.Inf(1), math.Inf(-1)
		for i, c := range cands {
			v, ok := pref.value(c.Cluster)
			if !ok {
				continue
			}
			raw[i], valid[i] = v, true
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
		for i := range cands {
			if !valid[i] {
				continue // A cluster without the value scores nothing for it.
			}
			norm := 1.0
			if hi > lo {
				norm = (raw[i] - lo) / (hi - lo)
			}
			cands[i].score += float64(pref.Weight) * norm
		}
	}
}

func (pref Preference) value(c Cluster) (float64, bool) {
	if pref.Expression != nil {
		v, err := pref.Expression.Number(c)
		return v, err == nil
	}
	q, ok := quantity(c, pref.Property)
	if !ok {
		return 0, false
	}
	v := q.AsApproximateFloat64()
	if !pref.Descending {
		v = -v
	}
	return v, true
}

func tiebreak(seed, name string) uint64 {
	h := fnv.New64a()
	_, _ = fmt.Fprintf(h, "%s/%s", seed, name)
	return h.Sum64()
}

func sortClusters(cs []Cluster) {
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].Namespace != cs[j].Namespace {
			return cs[i].Namespace < cs[j].Namespace
		}
		return cs[i].Name < cs[j].Name
	})
}

// Slices splits clusters into consecutive slices of at most size clusters. It
// returns no slices for no clusters.
func Slices(clusters []Cluster, size int) [][]Cluster {
	var out [][]Cluster
	for start := 0; start < len(clusters); start += size {
		out = append(out, clusters[start:min(start+size, len(clusters))])
	}
	return out
}
