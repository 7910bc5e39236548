package fleetquota

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/conditions"
	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/patch"
	"github.com/lodestar-dev/lodestar/internal/quota"
)

// maxListedClusters caps a FleetQuota's status.clusters.
const maxListedClusters = 200

// decision is the admission of one Placement's newest revision.
type decision struct {
	placement *placementv1alpha1.Placement
	target    *placementv1alpha1.PlacementRevision
	admit     bool
	message   string
	// clusters is the digest of the clusters the admission counted.
	clusters string
}

// condition is the Placement's QuotaAdmitted condition for d.
func (d decision) condition() metav1.Condition {
	c := metav1.Condition{Type: placementv1alpha1.QuotaAdmittedCondition, Status: metav1.ConditionTrue, Reason: placementv1alpha1.ReasonQuotaAdmitted,
		Message: message.Truncate(d.message, conditions.MaxMessage), ObservedGeneration: d.placement.Generation}
	if !d.admit {
		c.Status, c.Reason = metav1.ConditionFalse, placementv1alpha1.ReasonQuotaExceeded
	}
	return conditions.Merge(d.placement.Status.Conditions, c)
}

func admitted(rev *placementv1alpha1.PlacementRevision) bool {
	return rev.Annotations[placementv1alpha1.QuotaAdmittedAnnotation] == "true"
}

// admittedHere tells whether the Placement's newest revision is admitted for
// the clusters decided now (not only for those decided when it was).
func (pl *placed) admittedHere() bool {
	return admitted(pl.target) && pl.target.Annotations[placementv1alpha1.QuotaAdmittedClustersAnnotation] == quota.ClustersDigest(pl.decided)
}

// admit decides, in creation order, whether the newest revision of each
// Placement of namespace fits every bound over it beside what the others of
// the bound's namespaces claim: their use, or, once their newest revision is
// admitted, the larger of their use and its ask (it may be rolling out). A
// revision admitted stays admitted.
func admit(namespace string, byNamespace map[string][]*placed, bounds []bound) []decision {
	claim := map[*placed]quota.Usage{}
	on := map[*placed]map[string]bool{}
	for _, placed := range byNamespace {
		for _, pl := range placed {
			claim[pl], on[pl] = pl.use(), setOf(slices.Collect(maps.Keys(pl.byCluster)))
			// A revision admitted for other clusters than those decided
			// now claims what runs: what the clusters added would run is
			// not admitted yet.
			if pl.target != nil && pl.admittedHere() && pl.askErr == nil {
				claim[pl] = quota.Max(claim[pl], pl.ask)
				maps.Copy(on[pl], setOf(pl.askClusters))
			}
		}
	}
	var out []decision
	for _, pl := range byNamespace[namespace] {
		if pl.target == nil {
			continue
		}
		d := decision{placement: pl.placement, target: pl.target, clusters: quota.ClustersDigest(pl.decided)}
		rev := fmt.Sprintf("revision %d", pl.target.Spec.Revision)
		switch {
		case pl.admittedHere():
			d.admit, d.message = true, rev+" fits the quotas that bound the namespace"
		case pl.askErr != nil:
			d.message = fmt.Sprintf("%s cannot be counted (%v), so it is not rolled out; %s", rev, pl.askErr, stays(pl.placement))
		default:
			var problems []string
			for _, b := range bounds {
				others, otherClusters := quota.Usage{}, map[string]bool{}
				for _, ns := range b.namespaces {
					for _, q := range byNamespace[ns] {
						if q != pl {
							others.Add(claim[q])
							maps.Copy(otherClusters, on[q])
						}
					}
				}
				if vs := quota.Exceeds(b.hard, withClusters(others, otherClusters, nil), withClusters(pl.ask, otherClusters, pl.askClusters)); len(vs) > 0 {
					problems = append(problems, b.what+": "+quota.Describe(vs))
				}
				if why := quota.Refuses(b.hard, b.uncounted, pl.ask); why != "" {
					problems = append(problems, b.what+": "+why)
				}
			}
			if len(problems) == 0 {
				d.admit, d.message = true, rev+" fits the quotas that bound the namespace"
				claim[pl] = quota.Max(claim[pl], pl.ask)
				maps.Copy(on[pl], setOf(pl.askClusters))
				break
			}
			if admitted(pl.target) {
				d.message = fmt.Sprintf("the clusters chosen changed since %s was admitted: the clusters that have no copy yet get none, they would take the namespace past its quota (%s); "+
					"the clusters that have it keep it", rev, strings.Join(problems, "; "))
				break
			}
			d.message = fmt.Sprintf("%s is not rolled out, it would take the namespace past its quota (%s); %s", rev, strings.Join(problems, "; "), stays(pl.placement))
		}
		out = append(out, d)
	}
	return out
}

// stays says what the Placement keeps while its newest revision waits.
func stays(p *placementv1alpha1.Placement) string {
	if ro := p.Status.Rollout; ro != nil && ro.StableRevision != "" {
		if ro.StableRevision == ro.TargetRevision && ro.TargetRevisionNumber > 0 {
			return fmt.Sprintf("the clusters keep revision %d", ro.TargetRevisionNumber)
		}
		return "the clusters keep the revision they run (PlacementRevision " + ro.StableRevision + ")"
	}
	return "nothing is placed until it fits"
}

// withClusters is u with the clusters resource: as used, the clusters of
// base; as asked (more non-nil), how many of more base does not have yet.
func withClusters(u quota.Usage, base map[string]bool, more []string) quota.Usage {
	out := maps.Clone(u)
	if out == nil {
		out = quota.Usage{}
	}
	n := len(base)
	if more != nil {
		n = 0
		for _, c := range more {
			if !base[c] {
				n++
			}
		}
	}
	out[placementv1alpha1.QuotaClusters] = *resource.NewQuantity(int64(n), resource.DecimalSI)
	return out
}

func setOf(names []string) map[string]bool {
	out := make(map[string]bool, len(names))
	for _, n := range names {
		out[n] = true
	}
	return out
}

// applyCondition writes c as the Placement's QuotaAdmitted condition; nil
// gives it up (server-side apply removes it).
func (r *Reconciler) applyCondition(ctx context.Context, p *placementv1alpha1.Placement, c *metav1.Condition) error {
	out := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
	out.Status.Conditions = []metav1.Condition{}
	if c != nil {
		out.Status.Conditions = []metav1.Condition{*c}
	}
	return patch.ApplyStatus(ctx, r.Client, out, Name)
}

// boundStatus is a quota's status for what its namespaces use.
func boundStatus(b bound, old []metav1.Condition, generation int64, byNamespace map[string][]*placed) placementv1alpha1.FleetQuotaStatus {
	total, byCluster := quota.Usage{}, map[string]quota.Usage{}
	for _, ns := range b.namespaces {
		for _, pl := range byNamespace[ns] {
			for cluster, u := range pl.byCluster {
				if byCluster[cluster] == nil {
					byCluster[cluster] = quota.Usage{}
				}
				byCluster[cluster].Add(u)
				total.Add(u)
			}
		}
	}
	st := placementv1alpha1.FleetQuotaStatus{ObservedGeneration: generation,
		Used: withClusters(total, setOf(slices.Collect(maps.Keys(byCluster))), nil).Only(b.hard)}
	for _, cluster := range slices.Sorted(maps.Keys(byCluster)) {
		if len(st.Clusters) == maxListedClusters {
			st.ClustersNotListed++
			continue
		}
		u := byCluster[cluster].Only(b.hard)
		delete(u, placementv1alpha1.QuotaClusters)
		st.Clusters = append(st.Clusters, placementv1alpha1.ClusterUse{Name: cluster, Used: u})
	}
	c := metav1.Condition{Type: placementv1alpha1.ReadyCondition, Status: metav1.ConditionTrue, Reason: placementv1alpha1.ReasonWithinQuota,
		Message: "what the Placements it bounds use is within hard", ObservedGeneration: generation}
	if vs := quota.Exceeds(b.hard, quota.Usage{}, st.Used); len(vs) > 0 {
		over := make([]string, len(vs))
		for i, v := range vs {
			over[i] = fmt.Sprintf("%s: %s used, %s allowed", v.Resource, v.Asked.String(), v.Hard.String())
		}
		c.Status, c.Reason = metav1.ConditionFalse, placementv1alpha1.ReasonQuotaExceeded
		c.Message = "more is used than hard allows (nothing is taken away; no revision that asks more is rolled out): " + strings.Join(over, "; ")
	}
	st.Conditions = []metav1.Condition{conditions.Merge(old, c)}
	return st
}

// applyBoundStatus writes a quota's status when it changes.
func (r *Reconciler) applyBoundStatus(ctx context.Context, b bound, byNamespace map[string][]*placed) error {
	var cur placementv1alpha1.FleetQuotaStatus
	var generation int64
	if b.namespaced != nil {
		cur, generation = b.namespaced.Status, b.namespaced.Generation
	} else {
		cur, generation = b.cluster.Status, b.cluster.Generation
	}
	st := boundStatus(b, cur.Conditions, generation, byNamespace)
	if meta.FindStatusCondition(cur.Conditions, placementv1alpha1.ReadyCondition) != nil && conditions.Same(cur.Conditions, st.Conditions[0]) &&
		equality.Semantic.DeepEqual(cur.Used, st.Used) && equality.Semantic.DeepEqual(cur.Clusters, st.Clusters) &&
		cur.ObservedGeneration == st.ObservedGeneration && cur.ClustersNotListed == st.ClustersNotListed {
		return nil
	}
	if b.namespaced != nil {
		return patch.ApplyStatus(ctx, r.Client, &placementv1alpha1.FleetQuota{ObjectMeta: metav1.ObjectMeta{Name: b.namespaced.Name, Namespace: b.namespaced.Namespace}, Status: st}, Name)
	}
	return patch.ApplyStatus(ctx, r.Client, &placementv1alpha1.ClusterFleetQuota{ObjectMeta: metav1.ObjectMeta{Name: b.cluster.Name}, Status: st}, Name)
}
