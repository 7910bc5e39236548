package scheduling

import (
	"fmt"
	"strings"
	"time"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/requeue"
)

// Reachable tells whether the cluster's agent renews its Lease.
func (c Cluster) Reachable() bool {
	return c.Conditions[placementv1alpha1.AgentReachableCondition] == "True"
}

// FailoverPlan says which chosen clusters to replace, or why none is.
type FailoverPlan struct {
	// Replace are the chosen clusters whose agent has been unreachable longer than
	// the toleration, and for which a replacement fits.
	Replace []string
	// Blocked says why clusters due for failover are kept.
	Blocked string
	// RecheckAfter is when the next chosen cluster's toleration ends.
	RecheckAfter time.Duration
}

// Failover decides the failover of a Placement with numberOfClusters and
// spec.scheduling.failover (p.FailoverAfter). A chosen cluster whose agent has been
// unreachable (since UnreachableSince) for the toleration is replaced, unless:
// two or more, and more than half, of the chosen clusters are unreachable at
// once, which is a partition rather than a cluster failure; or the clusters due cannot all be
// replaced, in which case none is removed (an empty replacement never means
// "remove").
func Failover(clusters []Cluster, current map[string]bool, p Policy, now time.Time) FailoverPlan {
	var plan FailoverPlan
	if p.FailoverAfter == nil || p.N == nil {
		return plan
	}
	chosen, unreachable := 0, 0
	var due []string
	for _, c := range clusters {
		if !current[c.Name] {
			continue
		}
		chosen++
		if c.Reachable() || c.UnreachableSince.IsZero() {
			continue
		}
		unreachable++
		left := c.UnreachableSince.Add(*p.FailoverAfter).Sub(now)
		if left > 0 {
			plan.RecheckAfter = requeue.Soonest(plan.RecheckAfter, left)
			continue
		}
		due = append(due, c.Name)
	}
	if len(due) == 0 {
		return plan
	}
	// One cluster of one is a cluster failure; two or more making up more than
	// half the chosen ones look like a partition. (A hub cut off from the whole
	// fleet leaves no healthy replacement either, which also blocks.)
	if unreachable >= 2 && 2*unreachable > chosen {
		plan.Blocked = fmt.Sprintf("%d of %d chosen clusters are unreachable at once (a partition, not a cluster failure): none is replaced", unreachable, chosen)
		return plan
	}
	trial := p
	trial.Exclude = map[string]bool{}
	rest := map[string]bool{}
	for name := range current {
		rest[name] = true
	}
	for _, name := range due {
		trial.Exclude[name] = true
		delete(rest, name)
	}
	if res := Schedule(clusters, rest, trial, now); res.Unsatisfied {
		plan.Blocked = fmt.Sprintf("cluster %s unreachable for more than %s, and no other cluster can replace it: it stays chosen",
			strings.Join(due, ", "), *p.FailoverAfter)
		return plan
	}
	plan.Replace = due
	return plan
}
