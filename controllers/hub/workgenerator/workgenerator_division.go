package workgenerator

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/claims"
	"github.com/lodestar-dev/lodestar/internal/clusterworks"
	"github.com/lodestar-dev/lodestar/internal/division"
	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/scheduling"
)

// divider divides the replicas of a Placement's revisions over its chosen
// clusters (spec.scheduling.replicas, as each revision has it), once per
// revision in a reconcile, surge first: a cluster's share is lowered only once
// every chosen cluster carries at least its share of the target revision and
// reports its objects Available.
type divider struct {
	seed       string
	memo       *division.Memo
	candidates []division.Candidate
	// carried is what each cluster's Works carry now, by workload key.
	carried map[string]map[string]int64
	// holding says, by cluster and workload key, which StatefulSets' bound
	// ReadWriteOnce claims hold their share there (spec.strategy.stateful:
	// Hold): their share is not lowered.
	holding map[string]map[string]string
	// unseen are the clusters whose last shares written the cache does not
	// show yet: not settled.
	unseen []string
	// settled is known once settle has run; the assignments made before it
	// (the target's) are surged then, the others as they are made.
	settled, known bool
	byHash         map[string]assigned
}

// assigned is a revision's divisible workloads and their division.
type assigned struct {
	workloads  []division.Workload
	assignment *division.Assignment
}

// written is the shares annotation last written to a cluster's Works while
// the cache does not show it yet.
func (r *Reconciler) written(placement *placementv1alpha1.Placement, cluster string, parts []*workv1alpha1.Work) (string, bool) {
	return r.sharesWritten.lookup(expectationKey(placement, cluster), func(shares string) bool {
		return len(parts) > 0 && parts[0].Annotations[placementv1alpha1.SharesAnnotation] == shares
	})
}

// newDivider reads what the chosen clusters carry (what was written to them,
// where the cache does not show it yet) and whether the target revision's
// division is settled on them.
func (r *Reconciler) newDivider(s *scope, views map[string]scheduling.Cluster) *divider {
	d := &divider{seed: string(s.placement.UID), memo: &r.divisions, carried: map[string]map[string]int64{}, holding: map[string]map[string]string{},
		byHash: map[string]assigned{}}
	hold := s.placement.Spec.Strategy.Stateful != placementv1alpha1.StatefulMove
	for _, name := range s.decided.Clusters {
		view := views[name]
		c := division.Candidate{Name: name, Labels: view.Labels, Free: division.FreeCapacity(view.Properties)}
		c.Prev, d.carried[name] = division.Carried(s.works[name])
		if shares, ok := r.written(s.placement, name, s.works[name]); ok {
			d.unseen = append(d.unseen, name)
			if prev, ok := division.ParseShares(shares); ok {
				c.Prev, d.carried[name] = &prev, prev.Carries()
			}
		}
		d.candidates = append(d.candidates, c)
		if !hold {
			continue
		}
		for _, w := range claims.Holding(s.works[name]) {
			if w.Kind == "StatefulSet" {
				if d.holding[name] == nil {
					d.holding[name] = map[string]string{}
				}
				d.holding[name][division.Key(w.Kind, w.Name)] = claims.Describe(name, w)
			}
		}
	}
	return d
}

// settle decides, from the target revision's division, whether shares may be
// lowered now, and lowers them (surge first) in the divisions made so far.
func (d *divider) settle(s *scope, target content) {
	// A target that divides nothing lowers nothing by surge first.
	d.settled = target.division == nil || len(d.unseen) == 0
	if target.division != nil {
		a := d.assign(target).assignment
		for _, name := range s.decided.Clusters {
			// A cluster without Works carries nothing: settled only when its
			// target is nothing too.
			parts := s.works[name]
			if !a.Reached(name, d.carried[name]) || len(parts) > 0 && clusterworks.Availability(parts) != metav1.ConditionTrue {
				d.settled = false
				break
			}
		}
	}
	d.known = true
	for _, a := range d.byHash {
		d.surge(a.assignment)
	}
}

// assign is the division of revision c, made once per reconcile; surge first
// once settle has run.
func (d *divider) assign(c content) assigned {
	if a, ok := d.byHash[c.hash]; ok {
		return a
	}
	workloads := division.Workloads(c.manifests)
	a := assigned{workloads: workloads, assignment: division.Assign(c.division, workloads, d.candidates, d.seed, d.memo)}
	if d.known {
		d.surge(a.assignment)
	}
	d.byHash[c.hash] = a
	return a
}

func (d *divider) surge(a *division.Assignment) {
	a.Surge(d.carried, d.settled, func(cluster, key string) string { return d.holding[cluster][key] })
}

// divide writes a cluster's shares of revision c into its manifests
// (division.Apply).
func (d *divider) divide(c content, cluster string, memo map[string]runtime.RawExtension) (content, error) {
	a := d.assign(c)
	shares := a.assignment.Of(cluster)
	manifests, err := division.Apply(c.manifests, a.workloads, shares, memo, c.hash)
	return content{manifests: manifests, hash: c.hash, overrides: c.overrides, division: c.division, shares: shares.Encode()}, err
}

// overridden notes on shares the divided workloads whose replicas an override
// changed on the cluster, and returns them with the replicas it set.
func overridden(manifests []runtime.RawExtension, shares *division.Shares) map[string]int64 {
	var out map[string]int64
	for _, m := range manifests {
		w, ok := division.WorkloadOf(m.Raw)
		if !ok {
			continue
		}
		s, ok := shares.Workloads[w.Key]
		if !ok || s.Replicas == w.Total {
			continue
		}
		s.Reason = fmt.Sprintf("an override sets %d (the division's share is %d)", w.Total, s.Replicas)
		s.Overridden = ptr.To(w.Total)
		shares.Workloads[w.Key] = s
		if out == nil {
			out = map[string]int64{}
		}
		out[w.Key] = w.Total
	}
	return out
}

// divisionProblems is the Progressing reason and message of the workloads
// the target revision's division could not divide anew, if any.
func divisionProblems(a *division.Assignment) (string, string) {
	if a == nil || len(a.Problems) == 0 {
		return "", ""
	}
	reason := a.Problems[0].Reason
	msgs := make([]string, 0, len(a.Problems))
	for _, p := range a.Problems {
		msgs = append(msgs, p.Message)
	}
	return reason, message.List(msgs, 3, "; ") + "; the shares already placed stay as they are"
}

// surgeMessage says which clusters keep a share above their target until the
// increases elsewhere are Available.
func surgeMessage(a *division.Assignment) string {
	if a == nil {
		return ""
	}
	var keeping []string
	for _, name := range slices.Sorted(maps.Keys(a.Shares)) {
		for _, key := range a.Keys() {
			if s := a.Shares[name][key]; s.Replicas > s.Target {
				keeping = append(keeping, fmt.Sprintf("%s keeps %d of %s (target %d)", name, s.Replicas, key, s.Target))
			}
		}
	}
	if len(keeping) == 0 {
		return ""
	}
	return "surge first: " + message.List(keeping, 3, ", ") + " until the increases elsewhere are Available"
}

// divisionGate is the Progressing condition of a Placement that divides
// replicas: False (NotEnoughCapacity, NotDivisible) when the target's division
// failed for a workload, with a Warning event when it starts; else the message
// says which shares wait for the increases (surge first), and which sums an
// override changed (with a Warning event when that changes).
func (r *Reconciler) divisionGate(s *scope, cond metav1.ConditionStatus, reason, msg string) (metav1.ConditionStatus, string, string) {
	a := s.division
	if a == nil || len(s.decided.Clusters) == 0 {
		return cond, reason, msg // no cluster to divide over: Progressing says so
	}
	if why, m := divisionProblems(a); why != "" {
		r.warnOnce(s.placement, why, m)
		return metav1.ConditionFalse, why, m
	}
	if m := surgeMessage(a); m != "" {
		msg += "; " + m
	}
	if m := overriddenMessage(a, s.renderer.overridden); m != "" {
		if c := meta.FindStatusCondition(s.placement.Status.Conditions, placementv1alpha1.ProgressingCondition); c == nil || !strings.Contains(c.Message, m) {
			r.Recorder.Eventf(s.placement, nil, corev1.EventTypeWarning, placementv1alpha1.ReasonSharesOverridden, "Divide", "%s", m)
		}
		msg += "; " + m
	}
	return cond, reason, msg
}

// overriddenMessage says which divided workloads' replicas overrides set, and
// what the clusters' sum is then against the division's total.
func overriddenMessage(a *division.Assignment, byCluster map[string]map[string]int64) string {
	var parts []string
	for _, key := range a.Keys() {
		var sum, total int64
		var on []string
		for name, shares := range a.Shares {
			s := shares[key]
			total += s.Target
			if v, ok := byCluster[name][key]; ok {
				sum += v
				on = append(on, fmt.Sprintf("%d on %s", v, name))
				continue
			}
			sum += s.Replicas
		}
		if len(on) == 0 {
			continue
		}
		slices.Sort(on)
		parts = append(parts, fmt.Sprintf("overrides set the replicas of %s (%s): the clusters' sum %d differs from the divided total %d", key, strings.Join(on, ", "), sum, total))
	}
	return message.List(parts, 3, "; ")
}
