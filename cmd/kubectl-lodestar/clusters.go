package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/fleet"
	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/scheduling"
	"github.com/lodestar-dev/lodestar/internal/scheme"
)

// newGetCommand is `kubectl lodestar get clusters`.
func newGetCommand(o *options) *cobra.Command {
	cmd := group("get", "Display fleet objects", "Display fleet objects: `get clusters` lists the member clusters.",
		"  kubectl lodestar get clusters\n  kubectl lodestar get clusters -L region -l env=prod -o wide")
	var (
		labelColumns []string
		selector     string
		allSets      bool
	)
	print := genericclioptions.NewPrintFlags("").WithTypeSetter(scheme.Hub())
	clusters := &cobra.Command{
		Use:     "clusters [NAME...]",
		Aliases: []string{"cluster", "clusterprofiles"},
		Short:   "List the member clusters: health, heartbeat, taints, capacity, Works",
		Long: `List the member clusters of a cluster set (--cluster-set, or every set with -A):
health (ControlPlaneHealthy), agent reachable (AgentReachable), the agent's last
heartbeat, taints, Kubernetes version, nodes, free CPU and memory, and the number
of Works in the cluster's hub namespace. -o json|yaml|name|jsonpath|go-template
prints the ClusterProfiles.`,
		Example: `  kubectl lodestar get clusters
  kubectl lodestar get clusters -L region,env -l env=prod
  kubectl lodestar get clusters -A -o wide
  kubectl lodestar get clusters -o jsonpath='{.items[*].metadata.name}'
  kubectl lodestar get clusters member-1 member-2`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, names []string) error {
			sel := labels.Everything()
			if selector != "" {
				var err error
				if sel, err = labels.Parse(selector); err != nil {
					return fmt.Errorf("-l %q: %w", selector, err)
				}
			}
			_, c, err := o.hub()
			if err != nil {
				return err
			}
			opts := fleet.ClustersOptions{ClusterSet: o.set(), Selector: sel}
			if allSets {
				opts.ClusterSet = ""
			}
			infos, err := fleet.Clusters(cmd.Context(), c, opts)
			if err != nil {
				return err
			}
			if infos, err = named(infos, names, opts.ClusterSet); err != nil {
				return err
			}
			output := *print.OutputFormat
			if output == "" || output == "wide" {
				printClusters(o.Out, infos, labelColumns, output == "wide", time.Now())
				return nil
			}
			printer, err := print.ToPrinter()
			if err != nil {
				return err
			}
			if output == "name" {
				// The name printer takes one object at a time.
				for _, info := range infos {
					if err := printer.PrintObj(info.Profile, o.Out); err != nil {
						return err
					}
				}
				return nil
			}
			list := &cpv1alpha1.ClusterProfileList{}
			for _, info := range infos {
				list.Items = append(list.Items, *info.Profile)
			}
			return printer.PrintObj(list, o.Out)
		},
	}
	print.AddFlags(clusters)
	clusters.Flag("output").Usage = "Output format: wide, " + strings.Join(print.AllowedFormats(), ", ") + "."
	clusters.Flags().StringSliceVarP(&labelColumns, "label-columns", "L", nil, "Labels to show as columns; repeat or separate with commas.")
	clusters.Flags().StringVarP(&selector, "selector", "l", "", "Label selector of the ClusterProfiles (e.g. env=prod,region in (eu,us)).")
	clusters.Flags().BoolVarP(&allSets, "all-cluster-sets", "A", false, "List the clusters of every cluster set.")
	cmd.AddCommand(clusters)
	return cmd
}

// named are the clusters of infos with these names (all of them when no name
// is given); a name that is none of them is an error, with the name it most
// likely meant.
func named(infos []fleet.ClusterInfo, names []string, set string) ([]fleet.ClusterInfo, error) {
	if len(names) == 0 {
		return infos, nil
	}
	all := make([]string, 0, len(infos))
	for _, info := range infos {
		all = append(all, info.Profile.Name)
	}
	where := "cluster set " + set
	if set == "" {
		where = "any cluster set"
	}
	var out []fleet.ClusterInfo
	for _, name := range names {
		i := slices.IndexFunc(infos, func(info fleet.ClusterInfo) bool { return info.Profile.Name == name })
		if i < 0 {
			msg := fmt.Sprintf("no cluster %s in %s", name, where)
			if guess := message.Closest(all, name); guess != "" {
				msg += fmt.Sprintf(": did you mean %s?", guess)
			}
			return nil, errors.New(msg)
		}
		out = append(out, infos[i])
	}
	return out, nil
}

// printClusters prints the clusters' table.
func printClusters(out io.Writer, infos []fleet.ClusterInfo, labelColumns []string, wide bool, now time.Time) {
	w := tabwriter.NewWriter(out, 0, 4, 3, ' ', 0)
	header := []string{"NAME", "SET", "HEALTHY", "REACHABLE", "HEARTBEAT", "TAINTS", "VERSION", "NODES", "CPU-FREE", "MEMORY-FREE", "WORKS", "AGE"}
	if wide {
		header = append(header, "CPU-ALLOCATABLE", "MEMORY-ALLOCATABLE")
	}
	for _, l := range labelColumns {
		header = append(header, strings.ToUpper(l))
	}
	if wide {
		header = append(header, "LABELS")
	}
	fmt.Fprintln(w, strings.Join(header, "\t"))
	for _, c := range infos {
		p := c.Profile
		row := []string{
			p.Name, p.Namespace, dash(c.Healthy), dash(c.Reachable), age(c.Heartbeat, now), taints(c),
			dash(p.Status.Version.Kubernetes), dash(c.Property(placementv1alpha1.PropertyNodeCount)),
			dash(c.Property(placementv1alpha1.PropertyCPUFree)), dash(c.Property(placementv1alpha1.PropertyMemoryFree)),
			fmt.Sprint(c.Works), age(p.CreationTimestamp.Time, now),
		}
		if wide {
			row = append(row, dash(c.Property(placementv1alpha1.PropertyCPUAllocatable)), dash(c.Property(placementv1alpha1.PropertyMemoryAllocatable)))
		}
		for _, l := range labelColumns {
			row = append(row, p.Labels[l])
		}
		if wide {
			row = append(row, dash(labels.Set(p.Labels).String()))
		}
		fmt.Fprintln(w, strings.Join(row, "\t"))
	}
	_ = w.Flush()
}

func taints(c fleet.ClusterInfo) string {
	if c.TaintsErr != nil {
		return "<unreadable>"
	}
	parts := make([]string, 0, len(c.Taints))
	for _, t := range c.Taints {
		parts = append(parts, t.String())
	}
	return dash(strings.Join(parts, ","))
}

func dash(s string) string { return orDefault(s, "-") }

// age is kubectl's short age of t, or "-" when t is zero.
func age(t time.Time, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(now.Sub(t))
}

// newDescribeCommand is `kubectl lodestar describe cluster <name>`.
func newDescribeCommand(o *options) *cobra.Command {
	cmd := group("describe", "Show the details of a fleet object", "Show the details of a fleet object: `describe cluster <name>`, `describe quota [name]`.",
		"  kubectl lodestar describe cluster edge-12\n  kubectl lodestar describe quota -n team")
	cluster := &cobra.Command{
		Use:     "cluster <name>",
		Aliases: []string{"clusters", "clusterprofile"},
		Short:   "Show a member cluster: ID, labels, taints, health, properties, Placements, events",
		Long: `Show a member cluster: its cluster ID, labels, taints, Kubernetes version, the
agent's heartbeat, the Works in its hub namespace, the Placements whose decisions
name it, its conditions with their messages, every property, its access
providers and the events of its ClusterProfile.`,
		Example:           "  kubectl lodestar describe cluster edge-12\n  kubectl lodestar describe cluster edge-12 --cluster-set lodestar-edge",
		Args:              exactlyOne("cluster name"),
		ValidArgsFunction: o.completeClusters,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			_, c, err := o.hub()
			if err != nil {
				return err
			}
			infos, err := fleet.Clusters(ctx, c, fleet.ClustersOptions{ClusterSet: o.set(), Name: args[0]})
			if err != nil {
				return err
			}
			if len(infos) == 0 {
				return fmt.Errorf("cluster %s not found in cluster set %s", args[0], o.set())
			}
			chosenBy, err := fleet.ChosenBy(ctx, c, o.set(), args[0])
			if err != nil {
				return err
			}
			events := &eventsv1.EventList{}
			if err := c.List(ctx, events, client.InNamespace(o.set())); err != nil {
				return fmt.Errorf("listing events: %w", err)
			}
			var mine []eventsv1.Event
			for _, e := range events.Items {
				if e.Regarding.Kind == "ClusterProfile" && e.Regarding.Name == args[0] {
					mine = append(mine, e)
				}
			}
			describeCluster(o.Out, infos[0], chosenBy, mine, time.Now())
			return nil
		},
	}
	cmd.AddCommand(cluster, newDescribeQuotaCommand(o))
	return cmd
}

// describeCluster prints one cluster as kubectl describe prints an object.
func describeCluster(out io.Writer, c fleet.ClusterInfo, chosenBy []string, events []eventsv1.Event, now time.Time) {
	p := c.Profile
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	defer func() { _ = w.Flush() }()
	fmt.Fprintf(w, "Name:\t%s\n", p.Name)
	fmt.Fprintf(w, "Cluster set:\t%s\n", p.Namespace)
	fmt.Fprintf(w, "Cluster ID:\t%s\n", dash(c.Property("cluster.clusterset.k8s.io")))
	fmt.Fprintf(w, "Labels:\t%s\n", dash(strings.Join(sortedPairs(p.Labels), "\n\t")))
	fmt.Fprintf(w, "Taints:\t%s\n", taints(c))
	fmt.Fprintf(w, "Kubernetes version:\t%s\n", dash(p.Status.Version.Kubernetes))
	fmt.Fprintf(w, "Heartbeat:\t%s\n", ago(c.Heartbeat, now))
	fmt.Fprintf(w, "Works:\t%d (in namespace %s)\n", c.Works, names.ClusterNamespace(p.Name))
	fmt.Fprintf(w, "Created:\t%s\n", ago(p.CreationTimestamp.Time, now))
	fmt.Fprintf(w, "Chosen by:\t%s\n", orDefault(strings.Join(chosenBy, "\n\t"), "<none>"))
	fmt.Fprintln(w, "Conditions:")
	fmt.Fprintln(w, "  TYPE\tSTATUS\tREASON\tLAST TRANSITION\tMESSAGE")
	for _, cond := range p.Status.Conditions {
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\n", cond.Type, cond.Status, cond.Reason, ago(cond.LastTransitionTime.Time, now), cond.Message)
	}
	fmt.Fprintln(w, "Properties:")
	props := slices.Clone(p.Status.Properties)
	sort.Slice(props, func(i, j int) bool { return props[i].Name < props[j].Name })
	for _, prop := range props {
		fmt.Fprintf(w, "  %s:\t%s\n", prop.Name, prop.Value)
	}
	if len(p.Status.AccessProviders) == 0 {
		fmt.Fprintln(w, "Access providers:\t<none>")
	} else {
		fmt.Fprintln(w, "Access providers:")
	}
	for _, ap := range p.Status.AccessProviders {
		fmt.Fprintf(w, "  %s:\t%s\n", ap.Name, dash(ap.Cluster.Server))
	}
	if len(events) == 0 {
		fmt.Fprintln(w, "Events:\t<none>")
		return
	}
	sort.Slice(events, func(i, j int) bool { return eventTime(events[i]).Before(eventTime(events[j])) })
	fmt.Fprintln(w, "Events:")
	fmt.Fprintln(w, "  TYPE\tREASON\tAGE\tMESSAGE")
	for _, e := range events {
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", e.Type, e.Reason, ago(eventTime(e), now), e.Note)
	}
}

func eventTime(e eventsv1.Event) time.Time {
	if e.Series != nil {
		return e.Series.LastObservedTime.Time
	}
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.DeprecatedLastTimestamp.Time
}

func ago(t, now time.Time) string {
	if t.IsZero() {
		return "<never>"
	}
	return age(t, now) + " ago"
}

func sortedPairs(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// whyReport is what `why -o json` prints.
type whyReport struct {
	Placement  string `json:"placement"`
	Cluster    string `json:"cluster"`
	ClusterSet string `json:"clusterSet,omitempty"`
	// Chosen is whether the scheduler would choose the cluster now.
	Chosen bool `json:"chosen"`
	// Reason is why not: a filter's, NotPicked, FailedOver or NotInClusterSets.
	Reason   string               `json:"reason,omitempty"`
	Detail   string               `json:"detail,omitempty"`
	Verdicts []scheduling.Verdict `json:"verdicts"`
	// Decided is whether the Placement's current decisions name the cluster.
	Decided bool `json:"decided"`
	// FromStatus is set when the report is the Placement's status.scheduling
	// (the caller may not read the ClusterProfiles), not a new judgement.
	FromStatus bool `json:"fromStatus,omitempty"`
	// Shares are the cluster's shares of the workloads the Placement divides
	// (spec.scheduling.replicas), as its status reports them, and why.
	Shares []placementv1alpha1.ShareStatus `json:"shares,omitempty"`
}

// sharesOf are the cluster's shares in the Placement's status.
func sharesOf(placement *placementv1alpha1.Placement, cluster string) []placementv1alpha1.ShareStatus {
	for _, cs := range placement.Status.Clusters {
		if cs.Name == cluster {
			return cs.Shares
		}
	}
	return nil
}

// newWhyCommand is `kubectl lodestar why <placement> --cluster <name>`.
func newWhyCommand(o *options) *cobra.Command {
	var cluster, output string
	cmd := &cobra.Command{
		Use:   "why <placement> --cluster <name>",
		Short: "Why a cluster was or was not chosen by a Placement",
		Long: `Explain why a cluster is or is not chosen by a Placement, with the scheduler's
own functions: every filter's verdict (names, labels against the selector,
health, each taint and whether it is tolerated, the expression's result, free
capacity against what is asked), then whether the ranking picks it when the
Placement asks for a number of clusters, and whether the Placement's current
decisions name it.

The clusters considered are those of the cluster sets bound to the Placement's
namespace (ClusterSetBindings reporting Bound).`,
		Example: `  kubectl lodestar why web -n shop --cluster edge-12
  kubectl lodestar why web -n shop --cluster edge-12 -o json`,
		Args:              exactlyOne("Placement name"),
		ValidArgsFunction: o.completePlacements,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cluster == "" {
				return fmt.Errorf("why needs --cluster")
			}
			if output != "text" && output != "json" {
				return fmt.Errorf("--output %q: text or json", output)
			}
			c, ns, err := o.hubIn()
			if err != nil {
				return err
			}
			r, err := explain(cmd, c, client.ObjectKey{Namespace: ns, Name: args[0]}, cluster)
			if err != nil {
				return err
			}
			if output == "json" {
				return printJSON(o.Out, r)
			}
			printWhy(o.Out, r)
			return nil
		},
	}
	cmd.Flags().StringVar(&cluster, "cluster", "", "The cluster to explain (the name of its ClusterProfile).")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json.")
	_ = cmd.RegisterFlagCompletionFunc("cluster", o.completeClusterFlag)
	return cmd
}

// explain judges the cluster for the Placement as the scheduler would now.
func explain(cmd *cobra.Command, c client.Client, key client.ObjectKey, cluster string) (whyReport, error) {
	ctx := cmd.Context()
	r := whyReport{Placement: key.String(), Cluster: cluster, Verdicts: []scheduling.Verdict{}}
	placement := &placementv1alpha1.Placement{}
	if err := c.Get(ctx, key, placement); err != nil {
		return r, err
	}
	r.Shares = sharesOf(placement, cluster)
	policy, err := scheduling.PolicyOf(placement)
	if err != nil {
		return r, fmt.Errorf("placement %s cannot be scheduled: %w", key, err)
	}
	sets, err := boundSets(ctx, c, key.Namespace)
	if apierrors.IsForbidden(err) {
		return explainFromStatus(ctx, c, placement, r)
	}
	if err != nil {
		return r, err
	}
	var clusters []scheduling.Cluster
	for _, set := range sets {
		list := &cpv1alpha1.ClusterProfileList{}
		if err := c.List(ctx, list, client.InNamespace(set)); apierrors.IsForbidden(err) {
			return explainFromStatus(ctx, c, placement, r)
		} else if err != nil {
			return r, fmt.Errorf("listing ClusterProfiles in %s: %w", set, err)
		}
		for i := range list.Items {
			p := &list.Items[i]
			if p.Spec.ClusterManager.Name == placementv1alpha1.ClusterManagerName && p.DeletionTimestamp.IsZero() {
				clusters = append(clusters, scheduling.ClusterOf(p))
			}
		}
	}
	current, err := decided(ctx, c, placement)
	if err != nil {
		return r, err
	}
	r.Decided = current[cluster]
	i := slices.IndexFunc(clusters, func(cl scheduling.Cluster) bool { return cl.Name == cluster })
	if i < 0 {
		r.Reason = placementv1alpha1.ExclusionNotInClusterSets
		r.Detail = fmt.Sprintf("no ClusterProfile %s in the cluster sets bound to namespace %s (%s)", cluster, key.Namespace, orDefault(strings.Join(sets, ", "), "none"))
		return r, nil
	}
	target := clusters[i]
	r.ClusterSet = target.Namespace
	now := time.Now()
	failover := scheduling.Failover(clusters, current, policy, now)
	if len(failover.Replace) > 0 {
		policy.Exclude = map[string]bool{}
		for _, name := range failover.Replace {
			policy.Exclude[name] = true
			delete(current, name)
		}
	}
	e := scheduling.Explain(target, current[cluster], policy, now)
	r.Verdicts = e.Verdicts
	if e.Reason != "" {
		r.Reason = e.Reason
		return r, nil
	}
	res := scheduling.Schedule(clusters, current, policy, now)
	r.Chosen = slices.ContainsFunc(res.Selected, func(cl scheduling.Cluster) bool { return cl.Name == cluster })
	if !r.Chosen {
		r.Reason = placementv1alpha1.ExclusionNotPicked
		for reason, names := range res.Excluded {
			if slices.Contains(names, cluster) {
				r.Reason = reason
			}
		}
		if placement.Spec.Scheduling.NumberOfClusters != nil {
			r.Detail = fmt.Sprintf("passes every filter, but numberOfClusters %d picks %d of %d eligible clusters by preference and spread", *placement.Spec.Scheduling.NumberOfClusters, len(res.Selected), res.Eligible)
		}
	}
	return r, nil
}

// boundSets are the cluster sets bound to the namespace: ClusterSetBindings
// whose Bound condition is True, which the hub sets only for sets it manages.
func boundSets(ctx context.Context, c client.Reader, namespace string) ([]string, error) {
	return setsOf(ctx, c, namespace, func(b *placementv1alpha1.ClusterSetBinding) bool {
		return meta.IsStatusConditionTrue(b.Status.Conditions, placementv1alpha1.BoundCondition)
	})
}

// setsOf are the cluster sets the namespace's ClusterSetBindings that keep
// says yes to name, sorted, each once.
func setsOf(ctx context.Context, c client.Reader, namespace string, keep func(*placementv1alpha1.ClusterSetBinding) bool) ([]string, error) {
	list := &placementv1alpha1.ClusterSetBindingList{}
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing ClusterSetBindings in %s: %w", namespace, err)
	}
	var sets []string
	for i := range list.Items {
		if keep(&list.Items[i]) {
			sets = append(sets, list.Items[i].Spec.ClusterSet)
		}
	}
	slices.Sort(sets)
	return slices.Compact(sets), nil
}

// decided are the clusters the Placement's own PlacementDecisions name.
func decided(ctx context.Context, c client.Reader, placement *placementv1alpha1.Placement) (map[string]bool, error) {
	list := &cpv1alpha1.PlacementDecisionList{}
	if err := c.List(ctx, list, client.InNamespace(placement.Namespace),
		client.MatchingLabels{cpv1alpha1.PlacementKeyLabel: names.LabelValue(placement.Name)}); err != nil {
		return nil, fmt.Errorf("listing PlacementDecisions: %w", err)
	}
	out := map[string]bool{}
	for _, pd := range list.Items {
		if owner := metav1.GetControllerOf(&pd); owner == nil || owner.UID != placement.UID {
			continue
		}
		for _, d := range pd.Decisions {
			out[d.ClusterProfileRef.Name] = true
		}
	}
	return out, nil
}

// explainFromStatus is why for a caller who may not read the clusters (a
// tenant): the scheduler's own explanation in the Placement's
// status.scheduling, and the Placement's decisions.
func explainFromStatus(ctx context.Context, c client.Client, placement *placementv1alpha1.Placement, r whyReport) (whyReport, error) {
	r.FromStatus = true
	current, err := decided(ctx, c, placement)
	if err != nil {
		return r, err
	}
	r.Decided = current[r.Cluster]
	r.Chosen = r.Decided
	if r.Chosen {
		return r, nil
	}
	st := placement.Status.Scheduling
	if st == nil {
		r.Reason, r.Detail = "Unknown", "the Placement's status does not explain its scheduling yet"
		return r, nil
	}
	for _, ec := range st.Clusters {
		if ec.Name != r.Cluster {
			continue
		}
		r.Reason = ec.Reason
		for _, v := range ec.Verdicts {
			r.Verdicts = append(r.Verdicts, scheduling.Verdict{Filter: v.Filter, Reason: v.Reason, Detail: v.Detail})
		}
		return r, nil
	}
	r.Reason = "Unknown"
	for _, e := range st.Excluded {
		if slices.Contains(e.Clusters, r.Cluster) {
			r.Reason = e.Reason
		}
	}
	r.Detail = fmt.Sprintf("the Placement's status explains its first %d excluded clusters by name, and %s is not one of them (or no cluster of the namespace's cluster sets has that name); "+
		"a platform admin's kubectl lodestar why judges any cluster", placementv1alpha1.MaxExplainedClusters, r.Cluster)
	return r, nil
}

// printWhy prints the report as text.
func printWhy(out io.Writer, r whyReport) {
	verdict := "chosen"
	if !r.Chosen {
		verdict = "not chosen (" + r.Reason + ")"
	}
	fmt.Fprintf(out, "Cluster %s for placement %s: %s\n", r.Cluster, r.Placement, verdict)
	if r.FromStatus {
		fmt.Fprintln(out, "(from the Placement's status: you may not read the clusters themselves; the failing filters only)")
	}
	if r.Detail != "" {
		fmt.Fprintln(out, r.Detail)
	}
	if len(r.Verdicts) > 0 {
		fmt.Fprintln(out)
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "FILTER\tVERDICT\tDETAIL")
		for _, v := range r.Verdicts {
			result := "pass"
			if !v.Passed {
				result = "FAIL " + v.Reason
			}
			fmt.Fprintf(w, "%s\t%s\t%s\n", v.Filter, result, v.Detail)
		}
		_ = w.Flush()
	}
	decided := "do not name"
	if r.Decided {
		decided = "name"
	}
	fmt.Fprintf(out, "\nThe Placement's current decisions %s %s.\n", decided, r.Cluster)
	if len(r.Shares) > 0 {
		fmt.Fprintf(out, "\nIts shares of the divided workloads:\n")
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "WORKLOAD\tREPLICAS\tTARGET\tWHY")
		for _, s := range r.Shares {
			fmt.Fprintf(w, "%s\t%d\t%d\t%s\n", s.Object, s.Replicas, s.Target, orDefault(s.Reason, "-"))
		}
		_ = w.Flush()
	}
}
