package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/mcs"
	"github.com/lodestar-dev/lodestar/internal/message"
)

// statusReport is what `status -o json` prints.
type statusReport struct {
	Namespace         string                            `json:"namespace"`
	Name              string                            `json:"name"`
	SelectedClusters  int32                             `json:"selectedClusters"`
	AppliedClusters   int32                             `json:"appliedClusters"`
	AvailableClusters int32                             `json:"availableClusters"`
	Conditions        []metav1.Condition                `json:"conditions"`
	Clusters          []placementv1alpha1.ClusterStatus `json:"clusters"`
	UnlistedClusters  int32                             `json:"unlistedClusters"`
	Summaries         []placementv1alpha1.SummaryStatus `json:"summaries"`
	// Services are the exported Services of the Placement's namespace.
	Services []mcs.Report `json:"services,omitempty"`
	// ServicesNote says why Services are not shown.
	ServicesNote string `json:"servicesNote,omitempty"`
}

// newStatusCommand is `kubectl lodestar status <placement>`.
func newStatusCommand(o *options) *cobra.Command {
	var output, cluster string
	cmd := &cobra.Command{
		Use:   "status <placement>",
		Short: "Print a Placement's state: per cluster and object, why not, feedback, summaries",
		Long: `Print a Placement's state from the hub: its conditions, per cluster whether its
objects are applied and available and why not, per object its state, message and
status feedback values, and the status summaries. It reads only the Placement,
so a tenant's own RBAC (get placements) is enough; the exported Services of the
namespace (Multicluster Services: exporters, importers, endpoints, conflicts)
are shown to identities that may list them.`,
		Example: `  kubectl lodestar status web -n shop
  kubectl lodestar status web -n shop --cluster edge-12 -o json`,
		Args:              exactlyOne("Placement name"),
		ValidArgsFunction: o.completePlacements,
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("--output %q: text or json", output)
			}
			c, namespace, err := o.hubIn()
			if err != nil {
				return err
			}
			name := args[0]
			p := &placementv1alpha1.Placement{}
			if err := c.Get(cmd.Context(), client.ObjectKey{Namespace: namespace, Name: name}, p); err != nil {
				return err
			}
			report := statusReport{
				Namespace: p.Namespace, Name: p.Name, SelectedClusters: ptr.Deref(p.Status.SelectedClusters, 0), AppliedClusters: ptr.Deref(p.Status.AppliedClusters, 0),
				AvailableClusters: ptr.Deref(p.Status.AvailableClusters, 0), Conditions: p.Status.Conditions, Clusters: p.Status.Clusters,
				UnlistedClusters: ptr.Deref(p.Status.UnlistedClusters, 0), Summaries: p.Status.Summaries,
			}
			if cluster != "" {
				report.Clusters = nil
				for _, cs := range p.Status.Clusters {
					if cs.Name == cluster {
						report.Clusters = append(report.Clusters, cs)
					}
				}
				if len(report.Clusters) == 0 {
					return fmt.Errorf("cluster %s is not listed in placement %s/%s's status (it lists those with a Work, problems first, at most 100)", cluster, namespace, name)
				}
			}
			if report.Services, report.ServicesNote, err = o.readServiceReports(cmd.Context(), c, namespace, args[0]); err != nil {
				return err
			}
			if output == "json" {
				return printJSON(o.Out, report)
			}
			printStatus(o.Out, report)
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json.")
	cmd.Flags().StringVar(&cluster, "cluster", "", "Show only this cluster.")
	_ = cmd.RegisterFlagCompletionFunc("cluster", o.completeClusterFlag)
	return cmd
}

// printStatus prints the report as text: conditions, clusters, objects, summaries.
// A message is printed on one line (a CEL error's position lines dropped) and
// once: a row whose message was printed above says so instead.
func printStatus(out io.Writer, r statusReport) {
	fmt.Fprintf(out, "Placement %s/%s: %s selected, %d applied, %d available\n\n", r.Namespace, r.Name, message.Count(r.SelectedClusters, "cluster"), r.AppliedClusters, r.AvailableClusters)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	cells := &messageCells{printed: map[string]bool{}}
	fmt.Fprintln(w, "CONDITION\tSTATUS\tREASON\tMESSAGE")
	for _, c := range r.Conditions {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, cells.cell(c.Message))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "CLUSTER\tAPPLIED\tAVAILABLE\tWHY NOT")
	for _, cs := range r.Clusters {
		why := strings.Join(cs.Reasons, "; ")
		if why == "" && cs.Applied != metav1.ConditionTrue {
			why = cs.Message
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", cs.Name, cs.Applied, orDefault(string(cs.Available), "Unknown"), cells.cell(why))
	}
	if r.UnlistedClusters > 0 {
		fmt.Fprintf(w, "(%d more clusters, all applied and available unless 100 listed have problems)\n", r.UnlistedClusters)
	}
	if slices.ContainsFunc(r.Clusters, func(cs placementv1alpha1.ClusterStatus) bool {
		return len(cs.Objects) > 0 || ptr.Deref(cs.UnlistedObjects, 0) > 0
	}) {
		// Only objects not available or reporting feedback are listed.
		fmt.Fprintln(w)
		fmt.Fprintln(w, "CLUSTER\tOBJECT\tSTATE\tMESSAGE / FEEDBACK")
	}
	for _, cs := range r.Clusters {
		for _, o := range cs.Objects {
			detail := cells.cell(o.Message)
			if o.Feedback != nil {
				detail = strings.TrimSpace(strings.Join([]string{detail, string(o.Feedback.Raw)}, " "))
			}
			fmt.Fprintf(w, "%s\t%s %s/%s\t%s\t%s\n", cs.Name, o.Kind, o.Namespace, o.Name, o.State, detail)
		}
		if n := ptr.Deref(cs.UnlistedObjects, 0); n > 0 {
			fmt.Fprintf(w, "%s\t(%d more objects)\t\t\n", cs.Name, n)
		}
	}
	printClaims(w, r.Clusters)
	printShares(w, r.Clusters)
	printServices(w, r.Services, r.ServicesNote)
	if len(r.Summaries) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "SUMMARY\tVALUE\tCOUNT\tSTALE\tMISSING\tINVALID\tGROUPS\tMESSAGE")
		for _, s := range r.Summaries {
			groups := make([]string, 0, len(s.Groups))
			for _, g := range s.Groups {
				groups = append(groups, fmt.Sprintf("%s=%s", g.Key, orDefault(g.Value, "-")))
			}
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", s.Name, orDefault(s.Value, "-"), ptr.Deref(s.Count, 0), ptr.Deref(s.Stale, 0),
				ptr.Deref(s.Missing, 0), ptr.Deref(s.Invalid, 0), strings.Join(groups, " "), cells.cell(s.Message))
		}
	}
	_ = w.Flush()
}

// printClaims prints the claims of the clusters, when there are any: phase,
// class, modes, sizes, whether deleting loses the data, whether it holds a
// move, and why it is not Bound.
func printClaims(w io.Writer, clusters []placementv1alpha1.ClusterStatus) {
	header := false
	for _, cs := range clusters {
		for _, c := range cs.Claims {
			if !header {
				fmt.Fprintln(w)
				fmt.Fprintln(w, "CLUSTER\tCLAIM\tWORKLOAD\tPHASE\tCLASS\tMODES\tREQUESTED\tCAPACITY\tRECLAIM\tHOLDS\tWHY NOT BOUND")
				header = true
			}
			reclaim := "Retain"
			if c.ReclaimDelete {
				reclaim = "Delete"
			}
			if c.Phase != "Bound" {
				reclaim = "-"
			}
			holds := "-"
			if c.Holds {
				holds = "yes"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cs.Name, c.Name, c.Workload, c.Phase, orDefault(c.StorageClass, "(default)"),
				strings.Join(c.AccessModes, ","), orDefault(c.Requested, "-"), orDefault(c.Capacity, "-"), reclaim, holds, orDefault(c.Reason, "-"))
		}
	}
}

// printShares prints the clusters' shares of the divided workloads, when
// there are any: what each cluster's Work carries, the division's target, and
// why.
func printShares(w io.Writer, clusters []placementv1alpha1.ClusterStatus) {
	header := false
	for _, cs := range clusters {
		for _, s := range cs.Shares {
			if !header {
				fmt.Fprintln(w)
				fmt.Fprintln(w, "CLUSTER\tWORKLOAD\tREPLICAS\tTARGET\tWHY")
				header = true
			}
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\n", cs.Name, s.Object, s.Replicas, s.Target, orDefault(s.Reason, "-"))
		}
	}
}

// messageCells prints messages in table cells: on one line, and each long
// one once.
type messageCells struct{ printed map[string]bool }

// sameAsAbove is what a cell says instead of a long message printed above.
const sameAsAbove = "(the message above)"

// cell is msg for a table cell: its lines joined with "; ", but for a CEL
// error's source and caret lines (" | ..."), and sameAsAbove for a long
// message already printed.
func (m *messageCells) cell(msg string) string {
	var lines []string
	for _, line := range strings.Split(msg, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "|") {
			continue
		}
		lines = append(lines, line)
	}
	out := strings.Join(lines, "; ")
	if len(out) < 40 {
		return out
	}
	if m.printed[out] {
		return sameAsAbove
	}
	m.printed[out] = true
	return out
}
