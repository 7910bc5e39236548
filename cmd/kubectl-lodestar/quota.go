package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// newDescribeQuotaCommand is `kubectl lodestar describe quota [name]`.
func newDescribeQuotaCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:     "quota [name]",
		Aliases: []string{"quotas", "fleetquota", "fleetquotas", "fq"},
		Short:   "Show a namespace's FleetQuotas: hard, used over the fleet, and the use on each cluster",
		Long: `Show the FleetQuotas of a namespace (or the one named): each resource's hard
amount and what the namespace's Placements use over the fleet, whether the
quota holds, and what they use on each cluster (docs/quota.md).`,
		Example: "  kubectl lodestar describe quota -n team\n  kubectl lodestar describe quota team -n team",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := o.namespace()
			if err != nil {
				return err
			}
			_, c, err := o.hub()
			if err != nil {
				return err
			}
			list := &placementv1alpha1.FleetQuotaList{}
			if err := c.List(cmd.Context(), list, client.InNamespace(ns)); err != nil {
				return fmt.Errorf("listing FleetQuotas in %s: %w", ns, err)
			}
			shown := 0
			for i := range list.Items {
				if len(args) == 1 && list.Items[i].Name != args[0] {
					continue
				}
				describeQuota(o.Out, &list.Items[i])
				shown++
			}
			if shown == 0 {
				if len(args) == 1 {
					return fmt.Errorf("FleetQuota %s not found in namespace %s", args[0], ns)
				}
				fmt.Fprintf(o.Out, "No FleetQuota in namespace %s: its Placements use what they ask.\n", ns)
			}
			return nil
		},
	}
}

// describeQuota prints one FleetQuota.
func describeQuota(out io.Writer, fq *placementv1alpha1.FleetQuota) {
	fmt.Fprintf(out, "Name:       %s\nNamespace:  %s\n", fq.Name, fq.Namespace)
	if c := meta.FindStatusCondition(fq.Status.Conditions, placementv1alpha1.ReadyCondition); c != nil {
		fmt.Fprintf(out, "Ready:      %s (%s) %s\n", c.Status, c.Reason, c.Message)
	}
	resources := slices.Sorted(maps.Keys(fq.Spec.Hard))
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "RESOURCE\tUSED\tHARD")
	for _, name := range resources {
		used, hard := fq.Status.Used[name], fq.Spec.Hard[name]
		fmt.Fprintf(w, "%s\t%s\t%s\n", name, used.String(), hard.String())
	}
	_ = w.Flush()
	if len(fq.Status.Clusters) == 0 {
		fmt.Fprintln(out, "Clusters:   none in use")
		return
	}
	fmt.Fprintln(out, "Use per cluster:")
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	header := "  CLUSTER"
	for _, name := range resources {
		if name != placementv1alpha1.QuotaClusters {
			header += "\t" + name
		}
	}
	fmt.Fprintln(w, header)
	for _, cu := range fq.Status.Clusters {
		line := "  " + cu.Name
		for _, name := range resources {
			if name != placementv1alpha1.QuotaClusters {
				q := cu.Used[name]
				line += "\t" + q.String()
			}
		}
		fmt.Fprintln(w, line)
	}
	_ = w.Flush()
	if fq.Status.ClustersNotListed > 0 {
		fmt.Fprintf(out, "  ... and %d more clusters\n", fq.Status.ClustersNotListed)
	}
}
