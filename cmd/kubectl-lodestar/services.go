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

	debugv1alpha1 "github.com/lodestar-dev/lodestar/api/debug/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/mcs"
)

// readServiceReports reads the exported Services of ns; an identity that may
// not read the clusters' namespaces (a tenant) gets them through the hub
// manager (the debug API's placements/services, for the Placement), or a note.
func (o *options) readServiceReports(ctx context.Context, c client.Reader, ns, placement string) ([]mcs.Report, string, error) {
	reports, err := mcs.ReadReports(ctx, c, ns)
	switch {
	case meta.IsNoMatchError(err):
		return nil, "", nil // a hub without the Multicluster Services API
	case apierrors.IsForbidden(err):
		var viaHub []mcs.Report
		if err := o.debugGet(ctx, ns, placement, debugv1alpha1.Services, "", &viaHub); err != nil {
			return nil, "exported services: not shown (" + statusMessage(err) + ")", nil
		}
		return viaHub, "", nil
	}
	return reports, "", err
}

// printServices prints the exported Services of the Placement's namespace.
func printServices(w io.Writer, reports []mcs.Report, note string) {
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
