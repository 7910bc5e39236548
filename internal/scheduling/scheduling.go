// Package scheduling chooses member clusters for a Placement. It works on plain
// values so that every rule is a unit-testable function.
package scheduling

import (
	"sort"

	"k8s.io/apimachinery/pkg/labels"
)

// MaxDecisionsPerSlice is the most clusters one PlacementDecision may name.
const MaxDecisionsPerSlice = 100

// Cluster is what the scheduler knows of a member cluster.
type Cluster struct {
	// Name is the cluster's name (its ClusterProfile's name).
	Name string
	// Namespace is the namespace of its ClusterProfile (its cluster set).
	Namespace string
	// Labels are its ClusterProfile's labels.
	Labels map[string]string
}

// Select returns the clusters whose labels match selector, ordered by namespace and
// name so that the same inputs always give the same decisions.
func Select(clusters []Cluster, selector labels.Selector) []Cluster {
	var out []Cluster
	for _, c := range clusters {
		if selector.Matches(labels.Set(c.Labels)) {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Slices splits clusters into consecutive slices of at most size clusters. It
// returns no slices for no clusters.
func Slices(clusters []Cluster, size int) [][]Cluster {
	var out [][]Cluster
	for start := 0; start < len(clusters); start += size {
		out = append(out, clusters[start:min(start+size, len(clusters))])
	}
	return out
}
