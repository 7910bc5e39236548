package scheduling

import "slices"

// ReasonKeptUntilReplaced is not an exclusion: it names chosen clusters that a
// NoExecute taint removes, kept until the clusters chosen in their place report the
// Placement's objects available (make-before-break).
const ReasonKeptUntilReplaced = "KeptUntilReplacementAvailable"

// evicting are the reasons a chosen cluster always leaves through
// make-before-break: a NoExecute taint (for a current cluster, Tainted means
// NoExecute: NoSchedule keeps it).
var evicting = []string{ReasonTainted, ReasonTolerationExpired}

// deselecting are the reasons a chosen cluster leaves through make-before-break
// when the cluster changed and not the Placement: its properties, which its agent
// reports and which may flap, no longer satisfy the expression. Its labels are
// set by people (join, a platform admin): relabelling a cluster is an explicit
// change, and what it deselects leaves at once.
var deselecting = []string{ReasonExpressionFalse}

// leaving returns the reasons a chosen cluster leaves make-before-break; after a
// change of the Placement's spec (userChange), an explicit user change, the
// clusters it deselects leave at once.
func leaving(userChange bool) []string {
	if userChange {
		return evicting
	}
	return append(slices.Clone(evicting), deselecting...)
}

// Evicted returns the clusters of current that res drops for one of the leaving
// reasons. A cluster whose ClusterProfile is gone, or that the Placement's
// clusterNames or numberOfClusters no longer allow, leaves at once.
func Evicted(res Result, current map[string]bool, userChange bool) []string {
	var out []string
	for _, reason := range leaving(userChange) {
		for _, name := range res.Excluded[reason] {
			if current[name] {
				out = append(out, name)
			}
		}
	}
	return out
}

// KeepUntilReplaced makes the removal of evicted clusters make-before-break: while
// any cluster the Placement keeps (res.Selected without them) is not yet available
// (available names the clusters whose copy of the Placement's objects is
// Available), the evicted clusters stay selected. Being stateless, it cannot tell a
// replacement from a cluster chosen long before: either not being Available holds
// the eviction, which errs on the side of keeping the workload running. When res
// keeps no cluster, nothing can replace the evicted ones and they go at once. It
// tells whether it kept any.
func KeepUntilReplaced(res *Result, clusters []Cluster, current map[string]bool, available map[string]bool, userChange bool) bool {
	evicted := Evicted(*res, current, userChange)
	if len(evicted) == 0 {
		return false
	}
	waiting := false
	for _, c := range res.Selected {
		if !available[c.Name] {
			waiting = true
			break
		}
	}
	if !waiting {
		return false
	}
	for _, c := range clusters {
		if !slices.Contains(evicted, c.Name) {
			continue
		}
		res.Selected = append(res.Selected, c)
		res.exclude(ReasonKeptUntilReplaced, c.Name)
		for _, reason := range leaving(userChange) {
			res.Excluded[reason] = slices.DeleteFunc(res.Excluded[reason], func(n string) bool { return n == c.Name })
			if len(res.Excluded[reason]) == 0 {
				delete(res.Excluded, reason)
			}
		}
	}
	sortClusters(res.Selected)
	return true
}
