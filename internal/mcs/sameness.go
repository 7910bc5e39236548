package mcs

import (
	"slices"
)

// HubPlaced is the domain of a cluster in no cluster set of namespace
// sameness: it shares a namespace's Services only where the hub places that
// namespace (exports from it, imports into it).
const HubPlaced = ""

// Domains says, by cluster, where the cluster shares a namespace's Services:
// HubPlaced, or the name of a sameness domain. A sameness domain is the
// cluster sets in KEP-1645's namespace sameness that share clusters, taken
// together (a cluster is in one domain, so it imports one merge of each
// Service); it is named after its first set in name order.
type Domains map[string]string

// SamenessDomains are the domains of the clusters of sets (cluster set →
// its clusters), where sameness tells which sets are in namespace sameness.
// A cluster in any such set is in that set's domain, whatever other sets it
// is in: its namespaces are the set's namespaces.
func SamenessDomains(sets map[string][]string, sameness map[string]bool) Domains {
	// Union-find over the sameness sets: two that share a cluster are one.
	parent := map[string]string{}
	var find func(string) string
	find = func(s string) string {
		if parent[s] == s {
			return s
		}
		parent[s] = find(parent[s])
		return parent[s]
	}
	union := func(a, b string) {
		ra, rb := find(a), find(b)
		if ra == rb {
			return
		}
		if rb < ra {
			ra, rb = rb, ra
		}
		parent[rb] = ra // the root is the first name
	}
	names := make([]string, 0, len(sets))
	for set := range sets {
		if sameness[set] {
			names = append(names, set)
			parent[set] = set
		}
	}
	slices.Sort(names)
	firstSet := map[string]string{} // cluster → the first sameness set seen holding it
	for _, set := range names {
		for _, c := range sets[set] {
			if other, ok := firstSet[c]; ok {
				union(other, set)
			} else {
				firstSet[c] = set
			}
		}
	}
	out := Domains{}
	for set, clusters := range sets {
		if sameness[set] {
			continue
		}
		for _, c := range clusters {
			if _, ok := firstSet[c]; !ok {
				out[c] = HubPlaced
			}
		}
	}
	for c, set := range firstSet {
		out[c] = find(set)
	}
	return out
}

// Of is the domain of cluster (HubPlaced for a cluster in no set).
func (d Domains) Of(cluster string) string { return d[cluster] }

// Clusters are the clusters of domain, in name order.
func (d Domains) Clusters(domain string) []string {
	var out []string
	for c, dom := range d {
		if dom == domain {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}
