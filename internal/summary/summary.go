// Package summary reduces status feedback values reported by many clusters: Sum,
// Min, Max, Avg and Count, over all of them or per group (a feedback value or a
// cluster label), with the groups capped. It is pure: the status aggregator gives
// it what the Works say and writes what it returns.
package summary

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"k8s.io/utils/ptr"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/message"
)

// DefaultMaxGroups is how many groups a summary reports unless it says otherwise.
const DefaultMaxGroups = 20

// NoGroup is the key of the group of objects without the groupBy value or label.
const NoGroup = "(none)"

const maxKey = 256

// Observation is what one cluster reports for one object a summary reads.
type Observation struct {
	// Cluster is the cluster's name.
	Cluster string
	// Labels are the cluster's ClusterProfile labels.
	Labels map[string]string
	// Values are the object's feedback values; numbers are json.Number.
	Values map[string]any
}

// Input is everything a summary is computed from.
type Input struct {
	// Observations are the current reports of the objects the summary reads.
	Observations []Observation
	// Stale is how many clusters have no current report.
	Stale int
	// Err, when set, says why the summary cannot be computed at all.
	Err error
}

// Reduce computes one summary.
func Reduce(spec placementv1alpha1.StatusSummary, in Input) placementv1alpha1.SummaryStatus {
	var missing, invalid int32
	out := placementv1alpha1.SummaryStatus{Name: spec.Name, Stale: ptr.To(int32(in.Stale)), Count: ptr.To[int32](0)}
	if in.Err != nil {
		out.Message = "cannot be computed: " + in.Err.Error()
		return out
	}
	all := &reducer{op: spec.Operation}
	groups := map[string]*reducer{}
	for _, o := range in.Observations {
		v, has := o.Values[spec.Value]
		if spec.Value == "" {
			v, has = nil, true // Count of the objects that report.
		}
		if !has {
			missing++
			continue
		}
		ok := all.add(v)
		if !ok {
			invalid++
			continue
		}
		if spec.GroupBy != nil {
			key := groupKey(spec.GroupBy, o)
			g := groups[key]
			if g == nil {
				g = &reducer{op: spec.Operation}
				groups[key] = g
			}
			g.add(v)
		}
	}
	out.Count, out.Missing, out.Invalid = ptr.To(int32(all.count)), ptr.To(missing), ptr.To(invalid)
	out.Value = all.result()
	if spec.GroupBy != nil {
		var omitted int32
		out.Groups, omitted = capped(groups, maxGroups(spec))
		out.OmittedGroups = ptr.To(omitted)
		if omitted > 0 {
			out.Message = fmt.Sprintf("%d groups beyond maxGroups (%d) are left out", omitted, maxGroups(spec))
		}
	}
	if invalid > 0 {
		out.Message = join(out.Message, fmt.Sprintf("%s a %s that is not a number", message.Count(invalid, "object")+" "+message.Verb(invalid, "reports", "report"), spec.Value))
	}
	return out
}

func maxGroups(spec placementv1alpha1.StatusSummary) int {
	if spec.MaxGroups != nil {
		return int(*spec.MaxGroups)
	}
	return DefaultMaxGroups
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func groupKey(by *placementv1alpha1.SummaryGroupBy, o Observation) string {
	if by.ClusterLabel != "" {
		if v, ok := o.Labels[by.ClusterLabel]; ok {
			return message.Truncate(v, maxKey)
		}
		return NoGroup
	}
	v, ok := o.Values[by.Value]
	if !ok || v == nil {
		return NoGroup
	}
	switch v := v.(type) {
	case string:
		return message.Truncate(v, maxKey)
	case json.Number:
		return v.String()
	}
	b, err := json.Marshal(v)
	if err != nil {
		return NoGroup
	}
	return message.Truncate(string(b), maxKey)
}

// capped returns the groups with the largest counts first (by key when equal), at
// most n, and how many were left out.
func capped(groups map[string]*reducer, n int) ([]placementv1alpha1.SummaryGroup, int32) {
	out := make([]placementv1alpha1.SummaryGroup, 0, len(groups))
	for key, g := range groups {
		out = append(out, placementv1alpha1.SummaryGroup{Key: key, Value: g.result(), Count: int32(g.count)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Key < out[j].Key
	})
	if len(out) <= n {
		return out, 0
	}
	return out[:n], int32(len(out) - n)
}

// reducer folds values one at a time. Integers stay exact until a value with a
// fraction arrives (or the operation is Avg).
type reducer struct {
	op     placementv1alpha1.SummaryOperation
	count  int
	isInt  bool
	i      int64
	f      float64
	filled bool
}

// add folds v in and returns false when the operation cannot use it.
func (r *reducer) add(v any) bool {
	if r.op == placementv1alpha1.SummaryCount {
		r.count++
		return true
	}
	i, f, isInt, ok := number(v)
	if !ok {
		return false
	}
	if !r.filled {
		r.filled, r.isInt, r.i, r.f, r.count = true, isInt, i, f, 1
		return true
	}
	r.count++
	if r.isInt && !isInt {
		r.isInt = false
	}
	switch r.op {
	case placementv1alpha1.SummarySum, placementv1alpha1.SummaryAvg:
		r.i += i
		r.f += f
	case placementv1alpha1.SummaryMin:
		r.i, r.f = min(r.i, i), math.Min(r.f, f)
	case placementv1alpha1.SummaryMax:
		r.i, r.f = max(r.i, i), math.Max(r.f, f)
	}
	return true
}

// result is the reduced value as a decimal, or "" when there is none: Min, Max
// and Avg over no values. Never Inf or NaN.
func (r *reducer) result() string {
	switch {
	case r.op == placementv1alpha1.SummaryCount:
		return strconv.Itoa(r.count)
	case !r.filled && r.op == placementv1alpha1.SummarySum:
		return "0"
	case !r.filled:
		return ""
	case r.op == placementv1alpha1.SummaryAvg:
		return formatFloat(r.f / float64(r.count))
	case r.isInt:
		return strconv.FormatInt(r.i, 10)
	}
	return formatFloat(r.f)
}

func formatFloat(f float64) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return ""
	}
	s := strconv.FormatFloat(math.Round(f*1e6)/1e6, 'f', -1, 64)
	return strings.TrimSuffix(s, ".0")
}

// number reads a feedback value as a number: json.Number, a Go number, or a
// string holding one. NaN and Inf are not numbers here.
func number(v any) (i int64, f float64, isInt, ok bool) {
	var s string
	switch v := v.(type) {
	case json.Number:
		s = v.String()
	case string:
		s = strings.TrimSpace(v)
	case int64:
		return v, float64(v), true, true
	case int:
		return int64(v), float64(v), true, true
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return 0, 0, false, false
		}
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return int64(v), v, true, true
		}
		return 0, v, false, true
	default:
		return 0, 0, false, false
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, float64(n), true, true
	}
	fl, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(fl, 0) || math.IsNaN(fl) {
		return 0, 0, false, false
	}
	return 0, fl, false, true
}
