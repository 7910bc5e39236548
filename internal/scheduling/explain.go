package scheduling

import (
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/message"
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
