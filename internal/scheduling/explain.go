package scheduling

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/message"
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
)

// Verdict is one filter's judgement of one cluster.
type Verdict struct {
	// Filter names the filter (Filter*).
	Filter string `json:"filter"`
	// Passed is true when the filter lets the cluster through.
	Passed bool `json:"passed"`
	// Reason is the scheduler's reason when the filter does not (Reason*).
	Reason string `json:"reason,omitempty"`
	// Detail says what was compared.
	Detail string `json:"detail"`
}

// Explanation is every filter's verdict on one cluster for one Placement, and the
// reason the scheduler itself gives (empty when the cluster passes every filter).
type Explanation struct {
	Cluster  string    `json:"cluster"`
	Verdicts []Verdict `json:"verdicts"`
	Reason   string    `json:"reason,omitempty"`
}

// Explain judges one cluster with the scheduler's own filters, reporting every
// filter rather than only the first that fails. current tells whether the
// Placement chose the cluster before (some filters keep a chosen cluster). Reason
// is what Schedule's filter returns, so that the first failing verdict and the
// scheduler cannot tell two stories.
func Explain(c Cluster, current bool, p Policy, now time.Time) Explanation {
	e := Explanation{Cluster: c.Name}
	_, e.Reason, _ = filter(c, current, p, now)
	add := func(v Verdict) { e.Verdicts = append(e.Verdicts, v) }

	if p.Exclude[c.Name] {
		add(Verdict{Filter: FilterFailover, Reason: placementv1alpha1.ExclusionFailedOver, Detail: "the cluster's agent has been unreachable longer than spec.scheduling.failover allows: it is being replaced"})
	}
	if p.Names != nil {
		names := make([]string, 0, len(p.Names))
		for n := range p.Names {
			names = append(names, n)
		}
		sort.Strings(names)
		v := Verdict{Filter: FilterNames, Passed: p.Names[c.Name], Detail: "clusterNames: " + strings.Join(names, ", ")}
		if !v.Passed {
			v.Reason = placementv1alpha1.ExclusionNotInClusterNames
		}
		add(v)
	}
	v := Verdict{Filter: FilterLabels, Passed: p.Selector.Matches(labels.Set(c.Labels)),
		Detail: fmt.Sprintf("selector %q against labels %q", selectorString(p.Selector), labels.Set(c.Labels).String())}
	if !v.Passed {
		v.Reason = placementv1alpha1.ExclusionLabelsMismatch
	}
	add(v)

	v = Verdict{Filter: FilterHealth, Passed: true, Detail: conditionsString(c)}
	switch {
	case !c.HealthReported() && current:
		v.Detail += "; health not reported yet, kept as chosen before"
	case !c.HealthReported():
		v.Passed, v.Reason = false, placementv1alpha1.ExclusionHealthNotReported
		v.Detail += "; health not reported yet"
	case !c.Healthy() && current:
		v.Detail += "; unhealthy, kept as chosen before"
	case !c.Healthy():
		v.Passed, v.Reason = false, placementv1alpha1.ExclusionUnhealthy
	}
	add(v)

	taints := c.Taints
	if c.TaintsErr != nil {
		taints = []placementv1alpha1.Taint{{Key: placementv1alpha1.InvalidTaintsKey, Effect: placementv1alpha1.TaintNoSchedule}}
	}
	for _, t := range taints {
		one := c
		one.Taints, one.TaintsErr = []placementv1alpha1.Taint{t}, nil
		reason, avoid, _ := checkTaints(one, current, p.Tolerations, now)
		v := Verdict{Filter: FilterTaint, Passed: reason == "", Reason: reason, Detail: t.String()}
		tol, ok := tolerated(t, p.Tolerations)
		switch {
		case reason == placementv1alpha1.ExclusionTolerationExpired:
			v.Detail += fmt.Sprintf(" tolerated for %ds, which have passed", *tol.TolerationSeconds)
		case ok:
			v.Detail += " tolerated"
		case avoid:
			v.Detail += " not tolerated: the cluster is ranked last"
		case reason == "":
			v.Detail += " not tolerated, kept as chosen before"
		default:
			v.Detail += " not tolerated"
		}
		if c.TaintsErr != nil {
			v.Detail += fmt.Sprintf(" (the taints annotation cannot be read: %v)", c.TaintsErr)
		}
		add(v)
	}

	if p.Expression != nil {
		ok, err := p.Expression.Bool(c)
		v := Verdict{Filter: FilterExpression, Passed: ok && err == nil, Detail: fmt.Sprintf("%s = %v", p.Expression.Source(), ok)}
		switch {
		case err != nil && current:
			v.Passed = true
			v.Detail = fmt.Sprintf("%s: %v; kept as chosen before", p.Expression.Source(), err)
		case err != nil:
			v.Reason, v.Detail = placementv1alpha1.ExclusionExpressionError, fmt.Sprintf("%s: %v", p.Expression.Source(), err)
		case !ok:
			v.Reason = placementv1alpha1.ExclusionExpressionFalse
		}
		add(v)
	}

	for _, want := range []struct {
		filter, property, name string
		q                      *resource.Quantity
	}{{FilterCPU, placementv1alpha1.PropertyCPUFree, "cpu", p.CPU}, {FilterMemory, placementv1alpha1.PropertyMemoryFree, "memory", p.Memory}} {
		if want.q == nil {
			continue
		}
		have, known := quantity(c, want.property)
		v := Verdict{Filter: want.filter, Passed: known && have.Cmp(*want.q) >= 0}
		switch {
		case !known:
			v.Detail = fmt.Sprintf("%s free unknown (property %s), %s asked", want.name, want.property, want.q.String())
		case v.Passed:
			v.Detail = fmt.Sprintf("%s free %s >= %s asked", want.name, have.String(), want.q.String())
		default:
			v.Detail = fmt.Sprintf("%s free %s < %s asked", want.name, have.String(), want.q.String())
		}
		if current && !v.Passed {
			v.Passed = true
			v.Detail += "; not checked for a cluster chosen before"
		}
		if !v.Passed {
			v.Reason = placementv1alpha1.ExclusionInsufficientCapacity
		}
		add(v)
	}
	if len(p.StorageClasses) > 0 {
		add(storageVerdict(c, current, p.StorageClasses))
	}
	return e
}

// storageVerdict judges the cluster's storage classes against those required.
func storageVerdict(c Cluster, current bool, want []string) Verdict {
	missing, ok := missingStorageClasses(c, want)
	have, reported := c.Properties[placementv1alpha1.PropertyStorageClasses]
	v := Verdict{Filter: FilterStorage, Passed: ok, Detail: fmt.Sprintf("storage classes %s required, the cluster has %s", strings.Join(want, ", "), orNone(have))}
	switch {
	case !reported:
		v.Detail = fmt.Sprintf("storage classes %s required; the cluster reports none (property %s)", strings.Join(want, ", "), placementv1alpha1.PropertyStorageClasses)
	case !ok:
		v.Detail = fmt.Sprintf("the cluster lacks storage class %s (it has %s)", strings.Join(missing, ", "), orNone(have))
	}
	if current && !ok {
		v.Passed = true
		v.Detail += "; not checked for a cluster chosen before"
	}
	if !v.Passed {
		v.Reason = placementv1alpha1.ExclusionMissingStorageClass
	}
	return v
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// FirstFailure is the first verdict that keeps the cluster out, if any.
func (e Explanation) FirstFailure() (Verdict, bool) {
	for _, v := range e.Verdicts {
		if !v.Passed {
			return v, true
		}
	}
	return Verdict{}, false
}

func selectorString(s labels.Selector) string {
	if s == nil {
		return "<none>"
	}
	if _, ok := s.Requirements(); !ok {
		return "<nothing>"
	}
	if s.Empty() {
		return "<everything>"
	}
	return s.String()
}

func conditionsString(c Cluster) string {
	var parts []string
	for _, t := range unhealthyWhenFalse {
		parts = append(parts, t+"="+orUnknown(c.Conditions[t]))
	}
	return strings.Join(parts, ", ")
}

func orUnknown(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// maxVerdictDetail bounds a verdict's detail in a Placement's status.
const maxVerdictDetail = 512

// ExplainExcluded explains the first max clusters by name that the result did
// not choose (those clusterNames does not name left out: they were never
// candidates), each with the filters that excluded it, for the Placement's
// status: what `kubectl lodestar why` shows a tenant who may not read the
// ClusterProfiles.
func ExplainExcluded(clusters []Cluster, current map[string]bool, p Policy, res Result, now time.Time, max int) []placementv1alpha1.ExcludedCluster {
	// Each reason's names are sorted: the first max of each are enough to find
	// the first max of all, however large the fleet.
	reasonOf := map[string]string{}
	for reason, names := range res.Excluded {
		if reason == placementv1alpha1.ExclusionNotInClusterNames || reason == placementv1alpha1.KeptWhileUnhealthy ||
			reason == placementv1alpha1.KeptWhileExpressionFails {
			continue
		}
		for _, n := range names[:min(len(names), max)] {
			reasonOf[n] = reason
		}
	}
	excluded := make([]string, 0, len(reasonOf))
	for n := range reasonOf {
		excluded = append(excluded, n)
	}
	sort.Strings(excluded)
	excluded = excluded[:min(len(excluded), max)]
	byName := make(map[string]Cluster, len(excluded))
	for _, c := range clusters {
		if _, ok := reasonOf[c.Name]; ok {
			byName[c.Name] = c
		}
	}
	out := make([]placementv1alpha1.ExcludedCluster, 0, len(excluded))
	for _, n := range excluded {
		c, ok := byName[n]
		if !ok {
			continue
		}
		ec := placementv1alpha1.ExcludedCluster{Name: n, Reason: reasonOf[n]}
		for _, v := range Explain(c, current[n], p, now).Verdicts {
			if v.Passed {
				continue
			}
			if len(ec.Verdicts) < 8 {
				ec.Verdicts = append(ec.Verdicts, placementv1alpha1.FilterVerdict{Filter: v.Filter, Reason: v.Reason,
					Detail: message.Truncate(v.Detail, maxVerdictDetail)})
			}
		}
		out = append(out, ec)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
