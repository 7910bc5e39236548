package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/agentidentity"
	"github.com/lodestar-dev/lodestar/internal/fleet"
	"github.com/lodestar-dev/lodestar/internal/kubeconfig"
	"github.com/lodestar-dev/lodestar/internal/message"
)

// newJoinCommand is `kubectl lodestar join <cluster>`.
func newJoinCommand(o *options) *cobra.Command {
	var (
		labels           map[string]string
		memberKubeconfig string
		clusterID        string
		unverified       bool
		ttl              time.Duration
		server           string
		output           string
	)
	cmd := &cobra.Command{
		Use:   "join <cluster>",
		Short: "Register a member cluster; writes the agent's hub kubeconfig",
		Long: `Register a member cluster with the hub: its ClusterProfile in the cluster set,
its hub namespace, and a hub identity for its agent that may read only its own
namespace. The agent's hub kubeconfig, which holds a live hub token, goes to
the file --output names (mode 0600); --output - prints it to standard output.

The member's cluster ID (its kube-system namespace UID) is recorded so that no
other cluster can take the name: give --member-kubeconfig (read once) or
--cluster-id; without either, join refuses unless --allow-unverified-identity
says to record none. Joining again with the same ID is safe.`,
		Example: `  # Join edge-12 with two labels and write the agent's kubeconfig to a file.
  kubectl lodestar join edge-12 --label env=edge --label region=eu \
      --member-kubeconfig edge-12.kubeconfig --output edge-12-agent.kubeconfig`,
		Args: exactlyOne("cluster name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if ttl < 10*time.Minute {
				return fmt.Errorf("--token-ttl %s: the API server issues tokens of at least 10m", ttl)
			}
			if output == "" {
				return errors.New("--output is required: the agent's hub kubeconfig holds a live token; name a file for it (mode 0600), or - to print it to standard output")
			}
			if memberKubeconfig == "" && clusterID == "" && !unverified {
				return errors.New("join records the member's cluster ID (its kube-system UID) so that no other cluster can take the name: give --member-kubeconfig or --cluster-id, or --allow-unverified-identity to record none")
			}
			id := clusterID
			if memberKubeconfig != "" {
				memberCfg, err := clientcmd.BuildConfigFromFlags("", memberKubeconfig)
				if err != nil {
					return fmt.Errorf("reading --member-kubeconfig: %w", err)
				}
				cs, err := kubernetes.NewForConfig(memberCfg)
				if err != nil {
					return err
				}
				ns, err := cs.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
				if err != nil {
					return fmt.Errorf("reading the member's kube-system namespace for its cluster ID: %w", err)
				}
				id = string(ns.UID)
			}
			cfg, c, err := o.hub()
			if err != nil {
				return err
			}
			name := args[0]
			agentCfg, err := fleet.Join(ctx, cfg, c, fleet.JoinOptions{Name: name, ClusterSet: o.clusterSet, Labels: labels, ClusterID: id, TokenTTL: ttl})
			if err != nil {
				return err
			}
			if server != "" {
				agentCfg.Host = server
			}
			b, err := kubeconfig.For(agentCfg, "lodestar-hub")
			if err != nil {
				return err
			}
			if id == "" {
				fmt.Fprintf(o.ErrOut, "Warning: cluster %s joined without a cluster ID: another cluster holding its agent's kubeconfig can take its name\n", name)
			}
			if output == "-" {
				_, err = o.Out.Write(b)
				return err
			}
			if err := os.WriteFile(output, b, 0o600); err != nil {
				return err
			}
			fmt.Fprintf(o.ErrOut, "Cluster %s joined. On the member, run:\n  lodestar-agent --cluster-name %s --cluster-set %s --hub-kubeconfig %s --hub-token-file <writable file>\n",
				name, name, o.set(), output)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringToStringVar(&labels, "label", nil, "A label of the ClusterProfile, key=value; repeat for more.")
	f.StringVar(&memberKubeconfig, "member-kubeconfig", "", "Kubeconfig of the member, read once for its cluster ID (kube-system UID) so that no other cluster can take the name.")
	f.StringVar(&clusterID, "cluster-id", "", "The member's cluster ID (kube-system UID), instead of --member-kubeconfig.")
	f.BoolVar(&unverified, "allow-unverified-identity", false, "Join without a cluster ID (neither --member-kubeconfig nor --cluster-id): nothing stops another cluster from taking the name.")
	f.DurationVar(&ttl, "token-ttl", agentidentity.DefaultTokenTTL, "Lifetime of the agent's first hub token (at least 10m); the agent renews its own.")
	f.StringVar(&server, "hub-server", "", "The hub's address as the member reaches it (default: the kubeconfig's server).")
	f.StringVar(&output, "output", "", "Write the agent's hub kubeconfig, which holds a live token, to this file (mode 0600); - prints it to standard output. Required.")
	return cmd
}

// cordonVerbs are the taint verbs: what each does and what it says.
var cordonVerbs = map[string]struct{ short, long, example, done string }{
	"cordon": {
		short:   "No Placement chooses the cluster anew (taint NoSchedule)",
		long:    "Cordon a cluster: it gets the NoSchedule taint " + placementv1alpha1.CordonTaintKey + ", so no Placement chooses it anew. What runs there stays.",
		example: "  kubectl lodestar cordon edge-12",
		done:    "cluster %s cordoned: no Placement chooses it anew; what it runs stays\n",
	},
	"drain": {
		short: "Move what runs on the cluster elsewhere, make-before-break (taint NoExecute)",
		long: "Drain a cluster: it gets the NoExecute taint " + placementv1alpha1.DrainTaintKey + ". Each Placement that chose it\n" +
			"chooses another cluster, and leaves this one once the replacement is Available.\n\n" +
			"A copy whose claims on the cluster are bound and ReadWriteOnce stays (spec.strategy.stateful: Hold):\n" +
			"moving it would leave its data behind. The drain lists those Placements; with --include-stateful\n" +
			"they move too, to new, empty claims, and the cluster keeps the old claims and their data.",
		example: "  kubectl lodestar drain edge-12\n  kubectl lodestar drain edge-12 --include-stateful\n  kubectl lodestar get clusters   # TAINTS shows the drain",
		done:    "cluster %s draining: Placements move to other clusters; each leaves %s once its replacement is available\n",
	},
	"uncordon": {
		short:   "Undo cordon and drain",
		long:    "Uncordon a cluster: remove the cordon and drain taints, so Placements may choose it again.",
		example: "  kubectl lodestar uncordon edge-12",
		done:    "cluster %s uncordoned\n",
	},
}

// clusterVerb is a verb on one member cluster: do gets the hub client and the name.
func (o *options) clusterVerb(use, short, long, example string, do func(cmd *cobra.Command, c client.Client, name string) error) *cobra.Command {
	return &cobra.Command{
		Use: use + " <cluster>", Short: short, Long: long, Example: example,
		Args:              exactlyOne("cluster name"),
		ValidArgsFunction: o.completeClusters,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, c, err := o.hub()
			if err != nil {
				return err
			}
			return do(cmd, c, args[0])
		},
	}
}

// newCordonCommand is `kubectl lodestar cordon|drain|uncordon <cluster>`.
func newCordonCommand(o *options, verb string) *cobra.Command {
	text := cordonVerbs[verb]
	var (
		includeStateful bool
		forceAfter      time.Duration
	)
	cmd := o.clusterVerb(verb, text.short, text.long, text.example, func(cmd *cobra.Command, c client.Client, name string) error {
		var err error
		switch verb {
		case "cordon":
			err = fleet.Cordon(cmd.Context(), c, o.clusterSet, name)
		case "drain":
			opts := fleet.DrainOptions{IncludeStateful: includeStateful}
			if cmd.Flags().Changed("force-after") {
				if forceAfter < 0 {
					return fmt.Errorf("--force-after %s: a drain cannot be forced before it starts; give 0 to force it at once", forceAfter)
				}
				opts.ForceAfter = &forceAfter
			}
			err = fleet.Drain(cmd.Context(), c, o.clusterSet, name, time.Now(), opts)
		default:
			err = fleet.Uncordon(cmd.Context(), c, o.clusterSet, name)
		}
		if err != nil {
			return err
		}
		if verb != "drain" {
			fmt.Fprintf(o.Out, text.done, name)
			return nil
		}
		fmt.Fprintf(o.Out, text.done, name, name)
		return o.printHeld(cmd, c, name, includeStateful)
	})
	if verb == "drain" {
		cmd.Flags().BoolVar(&includeStateful, "include-stateful", false,
			"Move copies held by their claims (bound ReadWriteOnce) too, to new, empty claims; the cluster keeps the old claims and their data.")
		cmd.Flags().DurationVar(&forceAfter, "force-after", 0,
			"After this long (0: at once), overrule tenants: their disruption budgets keep no copy on the cluster and their tolerations of the drain end; "+
				"each Placement overruled records it (event DrainOverruled). ClusterPlacements are not overruled.")
	}
	return cmd
}

// printHeld lists the Placements whose copies on a drained cluster their claims
// hold there, and those whose disruption budgets pace the drain (until the
// drain overrules them, when it is forced).
func (o *options) printHeld(cmd *cobra.Command, c client.Client, cluster string, included bool) error {
	budgeted, err := fleet.BudgetedOn(cmd.Context(), c, cluster)
	if err != nil {
		return err
	}
	forced, err := fleet.ForcedAt(cmd.Context(), c, o.clusterSet, cluster)
	if err != nil {
		return err
	}
	if !forced.IsZero() {
		fmt.Fprintf(o.Out, "from %s the drain overrules tenants: their disruption budgets and tolerations of the drain keep nothing on %s (event DrainOverruled on each Placement overruled)\n",
			forced.Local().Format(time.RFC3339), cluster)
	}
	if len(budgeted) > 0 {
		fmt.Fprintf(o.Out, "%s %s only as their disruption budgets allow (kubectl lodestar status <placement> shows what waits):\n", message.Count(len(budgeted), "Placement"), message.Verb(len(budgeted), "leaves", "leave")+" "+cluster)
		for _, h := range budgeted {
			fmt.Fprintf(o.Out, "  %s/%s: %s\n", h.Namespace, h.Placement, h.Why)
		}
	}
	held, err := fleet.HeldOn(cmd.Context(), c, cluster)
	if err != nil || len(held) == 0 {
		return err
	}
	if included {
		fmt.Fprintf(o.Out, "%s %s with their claims left behind on %s (--include-stateful); their new claims are empty:\n", message.Count(len(held), "Placement"), message.Verb(len(held), "moves", "move"), cluster)
	} else {
		fmt.Fprintf(o.Out, "%s %s on %s, held by their claims (spec.strategy.stateful: Hold); drain again with --include-stateful to move them to new, empty claims:\n", message.Count(len(held), "Placement"), message.Verb(len(held), "stays", "stay"), cluster)
	}
	for _, h := range held {
		fmt.Fprintf(o.Out, "  %s/%s: %s\n", h.Namespace, h.Placement, h.Why)
	}
	return nil
}

// newTaintCommand is `kubectl lodestar taint <cluster> key[=value]:Effect|key[:Effect]- ...`.
func newTaintCommand(o *options) *cobra.Command {
	var overwrite bool
	cmd := &cobra.Command{
		Use:   "taint <cluster> key[=value]:Effect|key[:Effect]- ...",
		Short: "Add or remove a cluster's taints, as kubectl taint does for nodes",
		Long: `Add or remove taints of a member cluster (its ClusterProfile's annotation
` + placementv1alpha1.TaintsAnnotation + `). A Placement chooses a tainted cluster only when
it tolerates the taint (spec.scheduling.tolerations): NoSchedule keeps new Placements
away, PreferNoSchedule ranks the cluster last, NoExecute moves Placements away
(make-before-break). key[=value]:Effect adds a taint, key:Effect- removes it, key-
removes every taint of the key.`,
		Example: `  kubectl lodestar taint edge-12 gpu=true:NoSchedule
  kubectl lodestar taint edge-12 maintenance:NoExecute
  kubectl lodestar taint edge-12 gpu=false:NoSchedule --overwrite
  kubectl lodestar taint edge-12 gpu-`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 2 {
				return fmt.Errorf("takes a cluster name and at least one taint (key[=value]:Effect, or key[:Effect]- to remove)")
			}
			return nil
		},
		ValidArgsFunction: o.completeClusters,
		RunE: func(cmd *cobra.Command, args []string) error {
			changes, err := fleet.ParseTaintChanges(args[1:])
			if err != nil {
				return err
			}
			_, c, err := o.hub()
			if err != nil {
				return err
			}
			if err := fleet.Taint(cmd.Context(), c, o.clusterSet, args[0], changes, overwrite, time.Now()); err != nil {
				return err
			}
			fmt.Fprintf(o.Out, "cluster %s tainted\n", args[0])
			return nil
		},
	}
	cmd.Flags().BoolVar(&overwrite, "overwrite", false, "Change the value of a taint the cluster has with the same key and effect.")
	return cmd
}

// newUnjoinCommand is `kubectl lodestar unjoin <cluster>`.
func newUnjoinCommand(o *options) *cobra.Command {
	var (
		orphan bool
		wait   time.Duration
	)
	cmd := o.clusterVerb("unjoin", "Remove a cluster: what was placed there is deleted (or kept, --orphan)",
		`Remove a cluster from the fleet. Its Works are withdrawn, so the agent deletes
what Lodestar placed on the member (or, with --orphan, releases it in place),
then its ClusterProfile, hub namespace and identity go.`,
		`  kubectl lodestar unjoin edge-12
  kubectl lodestar unjoin edge-12 --orphan --wait 0`,
		func(cmd *cobra.Command, c client.Client, name string) error {
			err := fleet.Unjoin(cmd.Context(), c, name, fleet.UnjoinOptions{ClusterSet: o.clusterSet, Orphan: orphan, Wait: wait,
				Progress: func(msg string) { fmt.Fprintln(o.ErrOut, msg) }})
			if err != nil {
				return err
			}
			what := "deleted from"
			if orphan {
				what = "left in place on"
			}
			fmt.Fprintf(o.Out, "cluster %s left the fleet; what Lodestar placed was %s the member\n", name, what)
			return nil
		})
	cmd.Flags().BoolVar(&orphan, "orphan", false, "Leave what Lodestar placed on the member in place (released) instead of deleting it.")
	cmd.Flags().DurationVar(&wait, "wait", 5*time.Minute, "How long to wait for the cluster's hub side to be removed; 0 does not wait.")
	return cmd
}

// newRevokeCommand is `kubectl lodestar revoke <cluster>`.
func newRevokeCommand(o *options) *cobra.Command {
	return o.clusterVerb("revoke", "Cut off every hub token of a cluster's agent (a stolen one too); join again to reconnect",
		`Revoke a cluster's agent identity on the hub: its ServiceAccount is made anew, so
every token of the old one stops working at once, including one copied off the
member, which could otherwise renew itself for as long as the account exists.
The cluster keeps what it runs but gets no changes and reports nothing until its
admin installs the kubeconfig of a new `+"`kubectl lodestar join`"+`.`,
		`  kubectl lodestar revoke edge-12
  kubectl lodestar join edge-12 --output edge-12-hub.kubeconfig   # then on the member: update the agent's Secret`,
		func(cmd *cobra.Command, c client.Client, name string) error {
			if err := fleet.Revoke(cmd.Context(), c, name); err != nil {
				return err
			}
			fmt.Fprintf(o.Out, "cluster %s: every hub token of its agent is revoked; join it again to give the agent a new one\n", name)
			return nil
		})
}

// completeClusters completes cluster names from the hub's ClusterProfiles.
func (o *options) completeClusters(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return o.clusterNames(cmd, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// completeClusterFlag completes a --cluster flag.
func (o *options) completeClusterFlag(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	return o.clusterNames(cmd, toComplete), cobra.ShellCompDirectiveNoFileComp
}

func (o *options) clusterNames(cmd *cobra.Command, prefix string) []string {
	_, c, err := o.hub()
	if err != nil {
		return nil
	}
	list := &cpv1alpha1.ClusterProfileList{}
	if err := c.List(cmd.Context(), list, client.InNamespace(o.set())); err != nil {
		return nil
	}
	var out []string
	for _, p := range list.Items {
		if strings.HasPrefix(p.Name, prefix) {
			out = append(out, p.Name)
		}
	}
	return out
}

// completePlacements completes the Placement names of the namespace.
func (o *options) completePlacements(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	c, ns, err := o.hubIn()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	list := &placementv1alpha1.PlacementList{}
	if err := c.List(cmd.Context(), list, client.InNamespace(ns)); err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, p := range list.Items {
		if strings.HasPrefix(p.Name, toComplete) {
			out = append(out, p.Name)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
