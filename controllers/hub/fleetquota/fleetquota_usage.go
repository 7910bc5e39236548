package fleetquota

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/clusterworks"
	"github.com/lodestar-dev/lodestar/internal/division"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/percluster"
	"github.com/lodestar-dev/lodestar/internal/quota"
	"github.com/lodestar-dev/lodestar/internal/scheduling"
)

// placed is what one Placement uses and asks.
type placed struct {
	placement *placementv1alpha1.Placement
	// byCluster is what its Works carry, by cluster.
	byCluster map[string]quota.Usage
	// target is its newest revision (status.revision), nil while there is
	// none; ask what it asks over the clusters decided, askClusters those.
	target      *placementv1alpha1.PlacementRevision
	ask         quota.Usage
	askClusters []string
	// decided are the clusters decided, which the ask is counted over.
	decided []string
	// askErr says why the ask cannot be counted.
	askErr error
}

// use is what its Works carry over the fleet.
func (p *placed) use() quota.Usage {
	u := quota.Usage{}
	for _, cu := range p.byCluster {
		u.Add(cu)
	}
	return u
}

// observe reads each Placement's Works and newest revision, in creation order.
func (r *Reconciler) observe(ctx context.Context, placements []placementv1alpha1.Placement) ([]*placed, error) {
	kinds, err := lookup.Interpretations(ctx, r.Client, r.Interpretations)
	if err != nil {
		return nil, err
	}
	var out []*placed
	slices.SortFunc(placements, func(a, b placementv1alpha1.Placement) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	for i := range placements {
		p := &placements[i]
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		pl := &placed{placement: p, byCluster: map[string]quota.Usage{}}
		works, err := lookup.Works(ctx, r.Client, p, client.UnsafeDisableDeepCopy)
		if err != nil {
			return nil, err
		}
		for cluster, parts := range clusterworks.ByCluster(works) {
			var manifests []runtime.RawExtension
			for _, w := range parts {
				for _, m := range w.Spec.Workload.Manifests {
					manifests = append(manifests, m.RawExtension)
				}
			}
			c, err := r.countingOf(ctx, cluster)
			if err != nil {
				return nil, err
			}
			u, err := quota.Of(manifests, kinds, c)
			if err != nil {
				return nil, fmt.Errorf("counting what Placement %s carries to %s: %w", p.Name, cluster, err)
			}
			pl.byCluster[cluster] = u
		}
		if err := r.observeAsk(ctx, pl, kinds); err != nil {
			return nil, err
		}
		out = append(out, pl)
	}
	return out, nil
}

// observeAsk renders the Placement's newest revision for each cluster decided
// and counts it: divided workloads once over the fleet (division splits their
// replicas without adding any), the rest per cluster after its overrides.
func (r *Reconciler) observeAsk(ctx context.Context, pl *placed, kinds division.Kinds) error {
	p := pl.placement
	revs, err := lookup.Revisions(ctx, r.Client, p)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(revs, func(rv placementv1alpha1.PlacementRevision) bool { return rv.Name == p.Status.Revision })
	if i < 0 {
		return nil
	}
	pl.target = &revs[i]
	decided, err := lookup.DecidedIn(ctx, r.Client, p, r.Scope.Sets)
	if err != nil {
		return err
	}
	pl.decided = decided.Clusters
	profiles, err := lookup.ProfilesIn(ctx, r.Client, decided.Clusters, decided.Sets)
	if err != nil {
		return err
	}
	views := make(map[string]scheduling.Cluster, len(profiles))
	for name, profile := range profiles {
		views[name] = scheduling.ClusterOf(profile)
	}
	rd := percluster.NewRenderer(client.ObjectKeyFromObject(p), &r.compiled, views)
	pl.ask, pl.askClusters, pl.askErr = ask(rd, pl.target, decided.Clusters, kinds)
	return nil
}

// ask counts a revision over clusters: divided workloads once over the
// fleet, the rest per cluster after its overrides (a cluster whose overrides
// fail keeps what it has: its use counts). The error says why the revision
// cannot be counted.
func ask(rd *percluster.Renderer, rev *placementv1alpha1.PlacementRevision, clusters []string, kinds division.Kinds) (quota.Usage, []string, error) {
	base, err := rd.Revision(rev)
	if err != nil {
		return nil, nil, err
	}
	divided := func(raw []byte) bool {
		if base.Division == nil {
			return false
		}
		_, ok := division.WorkloadOf(raw, kinds)
		return ok
	}
	total, err := quota.Of(filter(base.Manifests, divided), kinds, quota.NoCluster)
	if err != nil {
		return nil, nil, err
	}
	var on []string
	for _, cluster := range clusters {
		c, err := rd.For(base, cluster)
		if percluster.OverrideFailure(err) != "" {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		u, err := quota.Of(filter(c.Manifests, func(raw []byte) bool { return !divided(raw) }), kinds, quota.ClusterOf(rd.View(cluster).Properties))
		if err != nil {
			return nil, nil, err
		}
		total.Add(u)
		on = append(on, cluster)
	}
	return total, on, nil
}

// countingOf is what counting needs of a cluster (its node count), from its
// ClusterProfile Lodestar manages; a cluster without one reports nothing.
func (r *Reconciler) countingOf(ctx context.Context, cluster string) (quota.Cluster, error) {
	profiles, err := lookup.ClusterProfilesNamed(ctx, r.Client, cluster)
	if err != nil {
		return quota.Cluster{}, err
	}
	for i := range profiles {
		if lookup.Managed(&profiles[i]) && slices.Contains(r.Scope.Sets, profiles[i].Namespace) {
			return quota.ClusterOf(scheduling.ClusterOf(&profiles[i]).Properties), nil
		}
	}
	return quota.NoCluster, nil
}

// filter are the manifests keep keeps.
func filter(manifests []runtime.RawExtension, keep func([]byte) bool) []runtime.RawExtension {
	var out []runtime.RawExtension
	for _, m := range manifests {
		if keep(m.Raw) {
			out = append(out, m)
		}
	}
	return out
}
