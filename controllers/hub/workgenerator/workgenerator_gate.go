package workgenerator

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"slices"

	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/clusterworks"
	"github.com/lodestar-dev/lodestar/internal/percluster"
	"github.com/lodestar-dev/lodestar/internal/rollout"
)

// gate renders the target revision for each selected cluster, and asks the
// rollout gate which clusters get it now.
func (r *Reconciler) gate(_ context.Context, s *scope) (ctrl.Result, error) {
	target, err := s.renderer.Revision(s.target)
	if err != nil {
		return ctrl.Result{}, err
	}
	if target.Division != nil || percluster.Divides(s.works) {
		d := r.newDivider(s)
		s.renderer.Divide(d)
		d.Settle(target)
		if target.Division != nil {
			s.division = d.Division(target)
		}
	}
	s.targetOf = map[string]percluster.Content{}
	s.clusters = make([]rollout.Cluster, 0, len(s.decided.Clusters))
	for _, name := range s.decided.Clusters {
		tc, err := s.renderer.For(target, name)
		if why := percluster.OverrideFailure(err); why != "" {
			s.failed[name] = why
		} else if err != nil {
			return ctrl.Result{}, err
		} else {
			s.targetOf[name] = tc
		}
		c := rollout.ClusterOf(name, s.works[name], s.labels[name], r.expectation(s.placement, name, s.works[name]))
		c.OverrideFailed = s.failed[name]
		s.clusters = append(s.clusters, c)
	}
	s.plan = rollout.Compute(s.clusters, s.strategy, s.state, s.now)
	return ctrl.Result{}, nil
}

// contentFor is what a selected cluster's Works carry after this reconcile:
// the target when the gate starts it, the stable revision when it joins a
// rollout under way, and otherwise the revision it holds, rendered anew for the
// cluster as it is now (its labels may have moved). False when it has no Works
// and waits for the gate.
func (s *scope) contentFor(cluster string) (percluster.Content, bool, error) {
	if slices.Contains(s.plan.Start, cluster) {
		c, ok := s.targetOf[cluster]
		return c, ok, nil
	}
	parts := s.works[cluster]
	rev := s.stable
	if !slices.Contains(s.plan.PlaceStable, cluster) {
		if len(parts) == 0 {
			return percluster.Content{}, false, nil
		}
		hash, _ := clusterworks.Revision(parts)
		rev = s.revisionOf(hash)
	}
	if rev == nil {
		return percluster.Carried(parts), len(parts) > 0, nil // its revision was pruned: as it is
	}
	rc, err := s.renderer.Revision(rev)
	if err != nil {
		return percluster.Content{}, false, err
	}
	c, err := s.renderer.For(rc, cluster)
	if why := percluster.OverrideFailure(err); why != "" {
		s.failed[cluster] = why
		return percluster.Carried(parts), len(parts) > 0, nil
	}
	return c, err == nil, err
}

// revisionOf is the Placement's revision of hash, nil when there is none.
func (s *scope) revisionOf(hash string) *placementv1alpha1.PlacementRevision {
	if i := slices.IndexFunc(s.revs, func(rv placementv1alpha1.PlacementRevision) bool { return rv.Spec.Hash == hash }); i >= 0 {
		return &s.revs[i]
	}
	return nil
}

// expectation is the write of a cluster's Works that the cache does not show
// yet, if any; one the cache shows, or older than unseen.TTL, is forgotten.
func (r *Reconciler) expectation(placement *placementv1alpha1.Placement, cluster string, parts []*workv1alpha1.Work) *rollout.Expectation {
	rev, _ := clusterworks.Revision(parts)
	e, ok := r.expected.Lookup(expectationKey(placement, cluster), func(e rollout.Expectation) bool { return rev == e.Revision })
	if !ok {
		return nil
	}
	return &e
}

func expectationKey(placement *placementv1alpha1.Placement, cluster string) string {
	return placement.Namespace + "/" + placement.Name + "/" + cluster
}
