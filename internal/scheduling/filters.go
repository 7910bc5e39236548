package scheduling

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/requeue"
)

// Filters named in an Explanation, in the order the scheduler applies them.
const (
	FilterFailover   = "failover"
	FilterNames      = "clusterNames"
	FilterLabels     = "clusterSelector"
	FilterHealth     = "health"
	FilterTaint      = "taint"
	FilterExpression = "clusterExpression"
	FilterCPU        = "cpu"
	FilterMemory     = "memory"
	FilterStorage    = "storageClasses"
	FilterResources  = "resources"
)

// judged is one cluster before one Placement's filters: what the filters are
// given.
type judged struct {
	c       Cluster
	current bool
	p       Policy
	now     time.Time
}

// outcome is one filter's check of one cluster.
type outcome struct {
	// reason keeps the cluster out (Exclusion*); "" lets it through.
	reason string
	// recheck is when a toleration of it expires (taints).
	recheck time.Duration
	// avoid ranks it last (a PreferNoSchedule taint not tolerated).
	avoid bool
	// exprValue and exprErr are the clusterExpression's result; exprKept
	// says a chosen cluster is kept while it errs.
	exprValue bool
	exprErr   error
	exprKept  bool
}

// filterStep is one scheduling filter, written once: its name, the check
// Schedule runs (no messages: it runs for every cluster of the fleet), and the
// verdicts Explain shows from that check (none when the filter does not apply
// to the Placement).
type filterStep struct {
	name    string
	check   func(j *judged) outcome
	explain func(j *judged, o outcome) []Verdict
}

// chain are the scheduling filters, in the order they are applied.
var chain = []filterStep{
	{FilterFailover, checkFailover, explainFailover},
	{FilterNames, checkNames, explainNames},
	{FilterLabels, checkLabels, explainLabels},
	{FilterHealth, checkHealth, explainHealth},
	{FilterTaint, checkTaintsOf, explainTaints},
	{FilterExpression, checkExpression, explainExpression},
	{FilterCPU, capacityCheck(placementv1alpha1.PropertyCPUFree, func(p Policy) *resource.Quantity { return p.CPU }),
		capacityExplain(FilterCPU, "cpu", placementv1alpha1.PropertyCPUFree, func(p Policy) *resource.Quantity { return p.CPU })},
	{FilterMemory, capacityCheck(placementv1alpha1.PropertyMemoryFree, func(p Policy) *resource.Quantity { return p.Memory }),
		capacityExplain(FilterMemory, "memory", placementv1alpha1.PropertyMemoryFree, func(p Policy) *resource.Quantity { return p.Memory })},
	{FilterResources, checkResources, explainResources},
	{FilterStorage, checkStorage, explainStorage},
}

// checkResources keeps out a cluster without the free extended resources
// asked (over the cluster, or on one node), checked as CPU is: not for a
// cluster chosen before.
func checkResources(j *judged) outcome {
	if j.current {
		return outcome{}
	}
	for i := range j.p.Resources {
		r := &j.p.Resources[i]
		if !hasCapacity(j.c, r.Property, &r.Quantity) {
			return outcome{reason: placementv1alpha1.ExclusionInsufficientCapacity}
		}
	}
	return outcome{}
}

func explainResources(j *judged, o outcome) []Verdict {
	var out []Verdict
	for i := range j.p.Resources {
		r := &j.p.Resources[i]
		name := r.Name
		if r.OnOneNode {
			name += " on one node"
		}
		out = append(out, capacityExplain(FilterResources, name, r.Property, func(Policy) *resource.Quantity { return &r.Quantity })(j, o)...)
	}
	return out
}

// filter returns the cluster as a candidate, or the reason it is not one, and
// when a toleration of it expires: the chain up to the first filter that keeps
// it out.
func filter(c Cluster, current bool, p Policy, now time.Time) (candidate, string, time.Duration) {
	cand := candidate{Cluster: c, current: current}
	j := &judged{c: c, current: current, p: p, now: now}
	var recheck time.Duration
	for _, f := range chain {
		o := f.check(j)
		recheck = requeue.Soonest(recheck, o.recheck)
		if o.reason != "" {
			return cand, o.reason, recheck
		}
		cand.preferAvoid = cand.preferAvoid || o.avoid
		cand.expressionFails = cand.expressionFails || o.exprKept
	}
	return cand, "", recheck
}

// Explain judges one cluster with the scheduler's own filters, reporting every
// filter rather than only the first that fails. current tells whether the
// Placement chose the cluster before (some filters keep a chosen cluster).
// Reason is the first failing filter's, which is what Schedule gives: the
// verdicts and the scheduler cannot tell two stories.
func Explain(c Cluster, current bool, p Policy, now time.Time) Explanation {
	e := Explanation{Cluster: c.Name}
	j := &judged{c: c, current: current, p: p, now: now}
	for _, f := range chain {
		o := f.check(j)
		if e.Reason == "" {
			e.Reason = o.reason
		}
		e.Verdicts = append(e.Verdicts, f.explain(j, o)...)
	}
	return e
}

// verdict is the verdict of filter for an outcome, with its detail.
func verdict(filter string, o outcome, detail string) Verdict {
	return Verdict{Filter: filter, Passed: o.reason == "", Reason: o.reason, Detail: detail}
}

func checkFailover(j *judged) outcome {
	if j.p.Exclude[j.c.Name] {
		return outcome{reason: placementv1alpha1.ExclusionFailedOver}
	}
	return outcome{}
}

func explainFailover(_ *judged, o outcome) []Verdict {
	if o.reason == "" {
		return nil
	}
	return []Verdict{verdict(FilterFailover, o, "the cluster's agent has been unreachable longer than spec.scheduling.failover allows: it is being replaced")}
}

func checkNames(j *judged) outcome {
	if j.p.Names != nil && !j.p.Names[j.c.Name] {
		return outcome{reason: placementv1alpha1.ExclusionNotInClusterNames}
	}
	return outcome{}
}

func explainNames(j *judged, o outcome) []Verdict {
	if j.p.Names == nil {
		return nil
	}
	names := make([]string, 0, len(j.p.Names))
	for n := range j.p.Names {
		names = append(names, n)
	}
	sort.Strings(names)
	return []Verdict{verdict(FilterNames, o, "clusterNames: "+strings.Join(names, ", "))}
}

func checkLabels(j *judged) outcome {
	if !j.p.Selector.Matches(labels.Set(j.c.Labels)) {
		return outcome{reason: placementv1alpha1.ExclusionLabelsMismatch}
	}
	return outcome{}
}

func explainLabels(j *judged, o outcome) []Verdict {
	return []Verdict{verdict(FilterLabels, o, fmt.Sprintf("selector %q against labels %q", selectorString(j.p.Selector), labels.Set(j.c.Labels).String()))}
}

// checkHealth keeps out a cluster whose health is not reported yet, or is
// unhealthy, unless it was chosen before.
func checkHealth(j *judged) outcome {
	switch {
	case j.current:
		return outcome{}
	case !j.c.HealthReported():
		return outcome{reason: placementv1alpha1.ExclusionHealthNotReported}
	case !j.c.Healthy():
		return outcome{reason: placementv1alpha1.ExclusionUnhealthy}
	}
	return outcome{}
}

func explainHealth(j *judged, o outcome) []Verdict {
	detail := conditionsString(j.c)
	switch {
	case !j.c.HealthReported() && j.current:
		detail += "; health not reported yet, kept as chosen before"
	case !j.c.HealthReported():
		detail += "; health not reported yet"
	case !j.c.Healthy() && j.current:
		detail += "; unhealthy, kept as chosen before"
	}
	return []Verdict{verdict(FilterHealth, o, detail)}
}

// taintsOf are the cluster's taints; taints that cannot be read keep it from
// new placements.
func taintsOf(c Cluster) []placementv1alpha1.Taint {
	if c.TaintsErr != nil {
		return []placementv1alpha1.Taint{{Key: placementv1alpha1.InvalidTaintsKey, Effect: placementv1alpha1.TaintNoSchedule}}
	}
	return c.Taints
}

// forcedFor tells whether the toleration of t ended when a forced drain
// overruled the tenant, not by its own tolerationSeconds.
func forcedFor(t placementv1alpha1.Taint, tol placementv1alpha1.Toleration, p Policy, now time.Time) bool {
	forced, ok := t.ForcedAt()
	end, _ := tolerationEnd(t, tol, p.Tenant, now)
	return ok && p.Tenant && end.Equal(forced)
}

func checkTaintsOf(j *judged) outcome {
	reason, avoid, recheck := checkTaints(taintsOf(j.c), j.current, j.p, j.now)
	return outcome{reason: reason, avoid: avoid, recheck: recheck}
}

// explainTaints judges each taint on its own.
func explainTaints(j *judged, _ outcome) []Verdict {
	var out []Verdict
	for _, t := range taintsOf(j.c) {
		reason, avoid, _ := checkTaints([]placementv1alpha1.Taint{t}, j.current, j.p, j.now)
		detail := t.String()
		tol, ok := tolerated(t, j.p.Tolerations)
		switch {
		case reason == placementv1alpha1.ExclusionTolerationExpired && forcedFor(t, tol, j.p, j.now):
			detail += " tolerated until the drain overruled tenants (forceAt " + t.ForceAt + ")"
		case reason == placementv1alpha1.ExclusionTolerationExpired:
			detail += fmt.Sprintf(" tolerated for %ds, which have passed", *tol.TolerationSeconds)
		case ok:
			detail += " tolerated"
		case avoid:
			detail += " not tolerated: the cluster is ranked last"
		case reason == "":
			detail += " not tolerated, kept as chosen before"
		default:
			detail += " not tolerated"
		}
		if j.c.TaintsErr != nil {
			detail += fmt.Sprintf(" (the taints annotation cannot be read: %v)", j.c.TaintsErr)
		}
		out = append(out, verdict(FilterTaint, outcome{reason: reason}, detail))
	}
	return out
}

// checkExpression keeps out a cluster the expression is false for, or errs on
// (a chosen cluster is kept while it errs).
func checkExpression(j *judged) outcome {
	if j.p.Expression == nil {
		return outcome{}
	}
	ok, err := j.p.Expression.Bool(j.c)
	o := outcome{exprValue: ok, exprErr: err}
	switch {
	case err != nil && j.current:
		o.exprKept = true
	case err != nil:
		o.reason = placementv1alpha1.ExclusionExpressionError
	case !ok:
		o.reason = placementv1alpha1.ExclusionExpressionFalse
	}
	return o
}

func explainExpression(j *judged, o outcome) []Verdict {
	if j.p.Expression == nil {
		return nil
	}
	detail := fmt.Sprintf("%s = %v", j.p.Expression.Source(), o.exprValue)
	switch {
	case o.exprKept:
		detail = fmt.Sprintf("%s: %v; kept as chosen before", j.p.Expression.Source(), o.exprErr)
	case o.exprErr != nil:
		detail = fmt.Sprintf("%s: %v", j.p.Expression.Source(), o.exprErr)
	}
	return []Verdict{verdict(FilterExpression, o, detail)}
}

// capacityCheck keeps out a cluster without the free capacity asked. Free
// capacity is checked when a cluster is chosen, as kube-scheduler checks a
// node's: what the Placement itself placed there is no longer free, and a
// chosen cluster must not be evicted by its own workload.
func capacityCheck(property string, asked func(Policy) *resource.Quantity) func(*judged) outcome {
	return func(j *judged) outcome {
		if !j.current && !hasCapacity(j.c, property, asked(j.p)) {
			return outcome{reason: placementv1alpha1.ExclusionInsufficientCapacity}
		}
		return outcome{}
	}
}

func capacityExplain(filter, name, property string, asked func(Policy) *resource.Quantity) func(*judged, outcome) []Verdict {
	return func(j *judged, o outcome) []Verdict {
		want := asked(j.p)
		if want == nil {
			return nil
		}
		have, known := quantity(j.c, property)
		var detail string
		switch {
		case !known:
			detail = fmt.Sprintf("%s free unknown (property %s), %s asked", name, property, want.String())
		case have.Cmp(*want) >= 0:
			detail = fmt.Sprintf("%s free %s >= %s asked", name, have.String(), want.String())
		default:
			detail = fmt.Sprintf("%s free %s < %s asked", name, have.String(), want.String())
		}
		if j.current && !hasCapacity(j.c, property, want) {
			detail += "; not checked for a cluster chosen before"
		}
		return []Verdict{verdict(filter, o, detail)}
	}
}

// checkStorage keeps out a cluster that lacks a storage class asked, unless it
// was chosen before.
func checkStorage(j *judged) outcome {
	if _, ok := missingStorageClasses(j.c, j.p.StorageClasses); !ok && !j.current {
		return outcome{reason: placementv1alpha1.ExclusionMissingStorageClass}
	}
	return outcome{}
}

func explainStorage(j *judged, o outcome) []Verdict {
	want := j.p.StorageClasses
	if len(want) == 0 {
		return nil
	}
	missing, ok := missingStorageClasses(j.c, want)
	have, reported := j.c.Properties[placementv1alpha1.PropertyStorageClasses]
	detail := fmt.Sprintf("storage classes %s required, the cluster has %s", strings.Join(want, ", "), orNone(have))
	switch {
	case !reported:
		detail = fmt.Sprintf("storage classes %s required; the cluster reports none (property %s)", strings.Join(want, ", "), placementv1alpha1.PropertyStorageClasses)
	case !ok:
		detail = fmt.Sprintf("the cluster lacks storage class %s (it has %s)", strings.Join(missing, ", "), orNone(have))
	}
	if j.current && !ok {
		detail += "; not checked for a cluster chosen before"
	}
	return []Verdict{verdict(FilterStorage, o, detail)}
}
