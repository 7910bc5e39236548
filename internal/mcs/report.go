package mcs

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	servicesv1alpha1 "github.com/lodestar-dev/lodestar/api/services/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// Report is one exported Service of a namespace, as the hub sees it: what
// `kubectl lodestar status` prints.
type Report struct {
	Name string `json:"name"`
	// Type is the import's type (ClusterSetIP or Headless); empty when no
	// export is valid.
	Type string `json:"type,omitempty"`
	// Exporters are the clusters whose export is valid, with the ready
	// endpoints each reports.
	Exporters map[string]int `json:"exporters"`
	// Withdrawn are exporters whose endpoints no importer serves (their agent
	// stopped reporting).
	Withdrawn []string `json:"withdrawn,omitempty"`
	// Importers counts the importing clusters, and ImportersReady those that
	// serve the import.
	Importers      int `json:"importers"`
	ImportersReady int `json:"importersReady"`
	// Problems are the exports' conflicts and invalid exports, per cluster.
	Problems []string `json:"problems,omitempty"`
}

// Reports are the exported Services of namespace ns, from the hub's
// ExportedServices and ImportedServices.
func Reports(ns string, exports []servicesv1alpha1.ExportedService, imports []servicesv1alpha1.ImportedService) []Report {
	byName := map[string]*Report{}
	report := func(name string) *Report {
		if byName[name] == nil {
			byName[name] = &Report{Name: name, Exporters: map[string]int{}}
		}
		return byName[name]
	}
	for _, e := range exports {
		if e.Spec.Namespace != ns {
			continue
		}
		cluster, _ := names.ClusterFromNamespace(e.Namespace)
		r := report(e.Spec.Name)
		if c := meta.FindStatusCondition(e.Status.Conditions, string(mcsv1beta1.ServiceExportConditionValid)); c != nil && c.Status != "True" {
			r.Problems = append(r.Problems, fmt.Sprintf("%s: %s: %s", cluster, c.Reason, c.Message))
			continue
		}
		r.Exporters[cluster] = Endpoints(e.Spec.Slices)
		if c := meta.FindStatusCondition(e.Status.Conditions, string(mcsv1beta1.ServiceExportConditionConflict)); c != nil && c.Status == "True" {
			r.Problems = append(r.Problems, fmt.Sprintf("%s: %s: %s", cluster, c.Reason, c.Message))
		}
	}
	withdrawn := map[string]map[string]bool{}
	for _, im := range imports {
		if im.Spec.Namespace != ns {
			continue
		}
		r := report(im.Spec.Name)
		r.Type = string(im.Spec.Service.Type)
		r.Importers++
		if meta.IsStatusConditionTrue(im.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady)) {
			r.ImportersReady++
		}
		for _, c := range im.Spec.Clusters {
			if !slices.ContainsFunc(im.Spec.Sources, func(s servicesv1alpha1.SourceSlices) bool { return s.Cluster == c }) {
				if withdrawn[im.Spec.Name] == nil {
					withdrawn[im.Spec.Name] = map[string]bool{}
				}
				withdrawn[im.Spec.Name][c] = true
			}
		}
	}
	out := make([]Report, 0, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		r := byName[name]
		r.Withdrawn = slices.Sorted(maps.Keys(withdrawn[name]))
		slices.Sort(r.Problems)
		out = append(out, *r)
	}
	return out
}

// ReadReports reads the exported Services of namespace ns with c.
func ReadReports(ctx context.Context, c client.Reader, ns string) ([]Report, error) {
	exports := &servicesv1alpha1.ExportedServiceList{}
	imports := &servicesv1alpha1.ImportedServiceList{}
	for _, list := range []client.ObjectList{exports, imports} {
		if err := c.List(ctx, list); err != nil {
			return nil, err
		}
	}
	return Reports(ns, exports.Items, imports.Items), nil
}

// ReportsOf is ReadReports as the hub manager's debug API answers it for a
// user who may not read the clusters' namespaces (debugv1alpha1.Services): the
// exported Services of the Placement's namespace.
func ReportsOf(ctx context.Context, c client.Reader, placement *placementv1alpha1.Placement, _ string) (any, error) {
	reports, err := ReadReports(ctx, c, placement.Namespace)
	if err != nil {
		return nil, err
	}
	works := &workv1alpha1.WorkList{}
	if err := c.List(ctx, works, client.MatchingLabels(lookup.WorkLabels(placement))); err != nil {
		return nil, fmt.Errorf("listing the Works of placement %s: %w", placement.Name, err)
	}
	clusters, services := map[string]bool{}, map[string]bool{}
	for i := range works.Items {
		cluster, _ := names.ClusterFromNamespace(works.Items[i].Namespace)
		clusters[cluster] = true
		for _, m := range works.Items[i].Spec.Workload.Manifests {
			var meta struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if json.Unmarshal(m.Raw, &meta) == nil && meta.APIVersion == "v1" && meta.Kind == "Service" {
				services[meta.Metadata.Name] = true
			}
		}
	}
	return Within(reports, services, clusters), nil
}

// Within are the reports of the Services named in services, each of the
// clusters in clusters only: what one Placement placed, not the
// namespace's member-local Services nor clusters it does not reach.
func Within(reports []Report, services, clusters map[string]bool) []Report {
	out := []Report{}
	for _, r := range reports {
		if !services[r.Name] {
			continue
		}
		r.Exporters = maps.Clone(r.Exporters)
		maps.DeleteFunc(r.Exporters, func(c string, _ int) bool { return !clusters[c] })
		r.Withdrawn = slices.DeleteFunc(slices.Clone(r.Withdrawn), func(c string) bool { return !clusters[c] })
		r.Problems = slices.DeleteFunc(slices.Clone(r.Problems), func(p string) bool {
			c, _, _ := strings.Cut(p, ":")
			return !clusters[c]
		})
		out = append(out, r)
	}
	return out
}
