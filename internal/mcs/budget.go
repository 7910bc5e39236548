package mcs

import (
	servicesv1alpha1 "github.com/lodestar-dev/lodestar/api/services/v1alpha1"
)

// MaxImportBytes is how many bytes of endpoints (an ImportedService's
// spec.sources, as JSON) one import carries (servicesv1alpha1.MaxEndpointBytes).
// A Service exported from hundreds of clusters with many endpoints each would
// otherwise be an import no cluster ever gets, written again and again.
const MaxImportBytes = servicesv1alpha1.MaxEndpointBytes

// Fit keeps the sources, in order (the oldest exports first), while their
// sizes (size of each exporting cluster's source, in bytes) fit within
// budget, and returns the clusters of those left out.
func Fit(sources []servicesv1alpha1.SourceSlices, size func(cluster string) int, budget int) (kept []servicesv1alpha1.SourceSlices, left []string) {
	used := 0
	for i, s := range sources {
		n := size(s.Cluster) + 1 // and its comma
		if used+n > budget {
			for _, rest := range sources[i:] {
				left = append(left, rest.Cluster)
			}
			return sources[:i], left
		}
		used += n
	}
	return sources, nil
}
