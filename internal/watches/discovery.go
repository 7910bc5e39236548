package watches

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// NamespacedKinds returns the namespaced kinds an API server serves that can be
// listed and watched, each at its group's preferred version, sorted. A group
// whose discovery fails (an aggregated API that is down) is left out and named in
// the error, which comes with the kinds of every other group.
func NamespacedKinds(d discovery.DiscoveryInterface) ([]schema.GroupVersionKind, error) {
	lists, err := d.ServerPreferredNamespacedResources()
	var failed *discovery.ErrGroupDiscoveryFailed
	if err != nil && !errors.As(err, &failed) {
		return nil, fmt.Errorf("discovering the served kinds: %w", err)
	}
	var out []schema.GroupVersionKind
	for _, list := range lists {
		gv, perr := schema.ParseGroupVersion(list.GroupVersion)
		if perr != nil {
			continue
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "watch") {
				continue
			}
			out = append(out, gv.WithKind(r.Kind))
		}
	}
	slices.SortFunc(out, func(a, b schema.GroupVersionKind) int { return strings.Compare(a.String(), b.String()) })
	out = slices.Compact(out)
	if failed != nil {
		return out, fmt.Errorf("discovering the served kinds: %w", err)
	}
	return out, nil
}
