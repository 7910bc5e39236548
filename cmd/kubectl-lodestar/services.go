package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	servicesv1alpha1 "github.com/lodestar-dev/lodestar/api/services/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/mcs"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// serviceReport is one exported Service of a namespace, as the hub sees it.
type serviceReport struct {
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

// serviceReports are the exported Services of namespace ns.
func serviceReports(ns string, exports []servicesv1alpha1.ExportedService, imports []servicesv1alpha1.ImportedService) []serviceReport {
	byName := map[string]*serviceReport{}
	report := func(name string) *serviceReport {
		if byName[name] == nil {
			byName[name] = &serviceReport{Name: name, Exporters: map[string]int{}}
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
		r.Exporters[cluster] = mcs.Endpoints(e.Spec.Slices)
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
	out := make([]serviceReport, 0, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		r := byName[name]
		r.Withdrawn = slices.Sorted(maps.Keys(withdrawn[name]))
		slices.Sort(r.Problems)
		out = append(out, *r)
	}
	return out
}

// readServiceReports reads the exported Services of ns; an identity that may
// not read the clusters' namespaces gets a note instead.
func readServiceReports(ctx context.Context, c client.Reader, ns string) ([]serviceReport, string, error) {
	exports := &servicesv1alpha1.ExportedServiceList{}
	imports := &servicesv1alpha1.ImportedServiceList{}
	for _, list := range []client.ObjectList{exports, imports} {
		if err := c.List(ctx, list); err != nil {
			if apierrors.IsForbidden(err) || meta.IsNoMatchError(err) {
				return nil, "exported services: not shown (reading them takes list on exportedservices and importedservices.services.lodestar.dev in every namespace)", nil
			}
			return nil, "", err
		}
	}
	return serviceReports(ns, exports.Items, imports.Items), "", nil
}

// printServices prints the exported Services of the Placement's namespace.
func printServices(w io.Writer, reports []serviceReport, note string) {
	if note != "" {
		fmt.Fprintln(w)
		fmt.Fprintln(w, note)
		return
	}
	if len(reports) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "EXPORTED SERVICE\tTYPE\tEXPORTERS (READY ENDPOINTS)\tIMPORTERS (READY)\tWITHDRAWN\tCONFLICTS / INVALID")
	for _, r := range reports {
		var exporters []string
		for _, c := range slices.Sorted(maps.Keys(r.Exporters)) {
			exporters = append(exporters, fmt.Sprintf("%s (%d)", c, r.Exporters[c]))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d (%d)\t%s\t%s\n", r.Name, orDefault(r.Type, "-"), orDefault(strings.Join(exporters, ", "), "-"), r.Importers, r.ImportersReady,
			orDefault(strings.Join(r.Withdrawn, ", "), "-"), orDefault(strings.Join(r.Problems, "; "), "-"))
	}
}
