package placementstatus

import (
	"context"
	"fmt"
	"slices"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/feedback"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/summary"
)

// summaries computes the Placement's status summaries over its decided clusters,
// from the views of their Works.
func (r *Reconciler) summaries(ctx context.Context, placement *placementv1alpha1.Placement, decided []string, vs map[string]*view) ([]placementv1alpha1.SummaryStatus, error) {
	specs := placement.Spec.Reporting.Summaries
	if len(specs) == 0 {
		return nil, nil
	}
	var labels map[string]map[string]string
	for _, s := range specs {
		if s.GroupBy != nil && s.GroupBy.ClusterLabel != "" {
			var err error
			if labels, err = lookup.ClusterLabels(ctx, r.Client, decided); err != nil {
				return nil, err
			}
			break
		}
	}
	out := make([]placementv1alpha1.SummaryStatus, 0, len(specs))
	for _, s := range specs {
		out = append(out, summary.Reduce(s, summaryInput(s, placement, decided, vs, labels)))
	}
	return out, nil
}

// summaryInput gathers what the decided clusters report for the objects the
// summary reads. A cluster without a Work, or whose report of one of those
// objects is not at the Work's generation, is stale.
func summaryInput(s placementv1alpha1.StatusSummary, placement *placementv1alpha1.Placement, decided []string, vs map[string]*view, labels map[string]map[string]string) summary.Input {
	if err := reported(s, placement); err != nil {
		return summary.Input{Err: err}
	}
	in := summary.Input{}
	for _, c := range decided {
		v := vs[c]
		if v == nil {
			in.Stale++
			continue
		}
		var found []summary.Observation
		stale := false
		for _, o := range v.objects {
			if o.id.Group != s.Resource.Group || o.id.Kind != s.Resource.Kind || s.Resource.Name != "" && o.id.Name != s.Resource.Name {
				continue
			}
			if !o.current {
				stale = true
				break
			}
			found = append(found, summary.Observation{Cluster: c, Labels: labels[c], Values: o.values})
		}
		if stale {
			in.Stale++
			continue
		}
		in.Observations = append(in.Observations, found...)
	}
	return in
}

// reported checks that the Placement's feedback rules report the values a
// summary reads.
func reported(s placementv1alpha1.StatusSummary, placement *placementv1alpha1.Placement) error {
	var names []string
	found := false
	for _, rule := range placement.Spec.Reporting.Feedback {
		if rule.Group != s.Resource.Group || rule.Kind != s.Resource.Kind {
			continue
		}
		found = true
		if rule.WholeStatus {
			names = append(names, feedback.WholeStatusName)
		}
		for _, f := range rule.Fields {
			names = append(names, f.Name)
		}
	}
	kind := s.Resource.Kind
	if s.Resource.Group != "" {
		kind += "." + s.Resource.Group
	}
	if !found {
		return fmt.Errorf("no spec.reporting.feedback rule reports values of %s", kind)
	}
	for _, v := range []string{s.Value, groupValue(s)} {
		if v != "" && !slices.Contains(names, v) {
			return fmt.Errorf("no spec.reporting.feedback rule of %s reports %q (it reports %v)", kind, v, names)
		}
	}
	return nil
}

func groupValue(s placementv1alpha1.StatusSummary) string {
	if s.GroupBy == nil {
		return ""
	}
	return s.GroupBy.Value
}
