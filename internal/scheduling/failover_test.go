package scheduling

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

func reachable(c Cluster) Cluster {
	c.Conditions[placementv1alpha1.AgentReachableCondition] = "True"
	return c
}

func unreachableFor(c Cluster, d time.Duration) Cluster {
	c.Conditions[placementv1alpha1.AgentReachableCondition] = "False"
	c.Conditions[placementv1alpha1.ControlPlaneHealthyCondition] = "Unknown"
	c.UnreachableSince = now.Add(-d)
	return c
}

func TestFailover(t *testing.T) {
	spec := func(n int32) placementv1alpha1.PlacementSpec {
		return placementv1alpha1.PlacementSpec{
			Scheduling: placementv1alpha1.Scheduling{ClusterSelector: everything(), NumberOfClusters: ptr.To(n), Failover: &placementv1alpha1.Failover{TolerationSeconds: ptr.To[int32](300)}},
		}
	}
	tests := []struct {
		name        string
		n           int32
		clusters    []Cluster
		current     []string
		noFailover  bool
		wantReplace []string
		wantBlocked string
		wantRecheck time.Duration
	}{
		// karmada "taint tolerated with positive toleration seconds - wait for toleration time".
		{name: "unreachable for less than the toleration: wait", n: 1,
			clusters: []Cluster{unreachableFor(cluster("a", nil, nil), time.Minute), reachable(cluster("b", nil, nil))},
			current:  []string{"a"}, wantRecheck: 4 * time.Minute},
		{name: "unreachable for the toleration: replaced", n: 2,
			clusters: []Cluster{unreachableFor(cluster("a", nil, nil), 5*time.Minute), reachable(cluster("b", nil, nil)), reachable(cluster("c", nil, nil))},
			current:  []string{"a", "b"}, wantReplace: []string{"a"}},
		// karmada#7455: no replacement must not mean "remove".
		{name: "no replacement fits: kept", n: 2,
			clusters: []Cluster{unreachableFor(cluster("a", nil, nil), time.Hour), reachable(cluster("b", nil, nil))},
			current:  []string{"a", "b"}, wantBlocked: "no other cluster can replace it"},
		{name: "more than half unreachable: a partition", n: 3,
			clusters: []Cluster{unreachableFor(cluster("a", nil, nil), time.Hour), unreachableFor(cluster("b", nil, nil), time.Hour),
				reachable(cluster("c", nil, nil)), reachable(cluster("d", nil, nil)), reachable(cluster("e", nil, nil))},
			current: []string{"a", "b", "c"}, wantBlocked: "a partition"},
		{name: "the one chosen cluster of one is a failure, not a partition", n: 1,
			clusters: []Cluster{unreachableFor(cluster("a", nil, nil), time.Hour), reachable(cluster("b", nil, nil))},
			current:  []string{"a"}, wantReplace: []string{"a"}},
		{name: "without spec.failover nothing moves", n: 1, noFailover: true,
			clusters: []Cluster{unreachableFor(cluster("a", nil, nil), time.Hour), reachable(cluster("b", nil, nil))},
			current:  []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := spec(tt.n)
			if tt.noFailover {
				s.Scheduling.Failover = nil
			}
			p := mustPolicy(t, s)
			current := map[string]bool{}
			for _, c := range tt.current {
				current[c] = true
			}
			plan := Failover(tt.clusters, current, p, now)
			g.Expect(plan.Replace).To(Equal(tt.wantReplace))
			if tt.wantBlocked == "" {
				g.Expect(plan.Blocked).To(BeEmpty())
			} else {
				g.Expect(plan.Blocked).To(ContainSubstring(tt.wantBlocked))
			}
			g.Expect(plan.RecheckAfter).To(Equal(tt.wantRecheck))
			if len(plan.Replace) > 0 {
				p.Exclude = map[string]bool{}
				for _, r := range plan.Replace {
					p.Exclude[r] = true
					delete(current, r)
				}
				res := Schedule(tt.clusters, current, p, now)
				g.Expect(names(res.Selected)).NotTo(ContainElements(plan.Replace))
				g.Expect(res.Selected).To(HaveLen(int(tt.n)))
			}
		})
	}
}
