package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lodestar-dev/lodestar/internal/rolloutctl"
)

// newRolloutCommand is `kubectl lodestar rollout <verb> <placement>`.
func newRolloutCommand(o *options) *cobra.Command {
	cmd := group("rollout", "Manage the rollout of a Placement's revisions",
		`Manage the rollout of a Placement's revisions: follow it, list the kept
revisions, go back to one, pause and resume it, and approve stages or clusters.`,
		`  kubectl lodestar rollout status web -n shop
  kubectl lodestar rollout history web -n shop
  kubectl lodestar rollout undo web -n shop --to-revision 2
  kubectl lodestar rollout approve web -n shop --stage production`)

	// placementVerb is one rollout verb on one Placement.
	placementVerb := func(use, short, long, example string, do func(cmd *cobra.Command, key client.ObjectKey, c client.Client) error) *cobra.Command {
		return &cobra.Command{
			Use: use + " <placement>", Short: short, Long: long, Example: example,
			Args:              exactlyOne("Placement name"),
			ValidArgsFunction: o.completePlacements,
			RunE: func(cmd *cobra.Command, args []string) error {
				c, ns, err := o.hubIn()
				if err != nil {
					return err
				}
				return do(cmd, client.ObjectKey{Namespace: ns, Name: args[0]}, c)
			},
		}
	}

	var watch bool
	var timeout time.Duration
	status := placementVerb("status", "Wait until the rollout is complete",
		"Wait until the rollout of the target revision is complete. Exits non-zero when its\nprogress deadline or failure budget is breached.",
		"  kubectl lodestar rollout status web -n shop\n  kubectl lodestar rollout status web -n shop --watch=false",
		func(cmd *cobra.Command, key client.ObjectKey, c client.Client) error {
			if !watch {
				r, err := rolloutctl.Status(cmd.Context(), c, key)
				if err != nil {
					return err
				}
				fmt.Fprintln(o.Out, r.Message)
				if r.Failed {
					return rolloutctl.ErrRolloutFailed
				}
				return nil
			}
			return rolloutctl.Wait(cmd.Context(), c, key, timeout, time.Second, func(msg string) { fmt.Fprintln(o.Out, msg) })
		})
	status.Flags().BoolVar(&watch, "watch", true, "Wait until the rollout is complete or failed.")
	status.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "How long to wait.")

	history := placementVerb("history", "List the kept revisions with their change causes",
		"List the kept revisions of a Placement, oldest first, with their change causes.",
		"  kubectl lodestar rollout history web -n shop",
		func(cmd *cobra.Command, key client.ObjectKey, _ client.Client) error {
			cs, err := o.typed()
			if err != nil {
				return err
			}
			revs, err := rolloutctl.History(cmd.Context(), cs, key)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "REVISION\tNAME\tAGE\tCHANGE-CAUSE")
			for _, r := range revs {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", r.Spec.Revision, r.Name, time.Since(r.CreationTimestamp.Time).Round(time.Second), r.Spec.ChangeCause)
			}
			return tw.Flush()
		})

	var toRevision int64
	undo := placementVerb("undo", "Write an earlier revision's objects back",
		"Write an earlier revision's objects (and overrides) back to the namespace, by\ndefault the revision before the target; it rolls out through the strategy's gates.",
		"  kubectl lodestar rollout undo web -n shop\n  kubectl lodestar rollout undo web -n shop --to-revision 2",
		func(cmd *cobra.Command, key client.ObjectKey, c client.Client) error {
			cs, err := o.typed()
			if err != nil {
				return err
			}
			to, err := rolloutctl.Undo(cmd.Context(), c, cs, key, toRevision)
			if err != nil {
				return err
			}
			fmt.Fprintf(o.Out, "placement %s: the objects of revision %d are back in namespace %s and roll out through its strategy\n", key.Name, to.Spec.Revision, key.Namespace)
			return nil
		})
	undo.Flags().Int64Var(&toRevision, "to-revision", 0, "The revision number to go back to (default: the one before the target).")

	pause := func(verb string, paused bool) *cobra.Command {
		return placementVerb(verb, strings.ToUpper(verb[:1])+verb[1:]+" giving clusters the target revision",
			"Stop (pause) or go on (resume) giving clusters the target revision.",
			"  kubectl lodestar rollout "+verb+" web -n shop",
			func(cmd *cobra.Command, key client.ObjectKey, _ client.Client) error {
				cs, err := o.typed()
				if err != nil {
					return err
				}
				if err := rolloutctl.SetPaused(cmd.Context(), cs, key, paused); err != nil {
					return err
				}
				fmt.Fprintf(o.Out, "placement %s %sd\n", key.Name, verb)
				return nil
			})
	}

	var stage string
	var clusters []string
	var approveWait time.Duration
	approve := placementVerb("approve", "Approve a stage, or clusters, of the target revision",
		"Approve a stage, or clusters, of the target revision (a RolloutApproval). An approval\n"+
			"that would approve nothing is refused: a stage the strategy does not have or that\n"+
			"needs no approval, and a rollout that is complete. Right after the change that\n"+
			"starts a rollout, --wait waits for it.",
		"  kubectl lodestar rollout approve web -n shop --stage production\n"+
			"  kubectl lodestar rollout approve web -n shop --stage production --wait 1m\n"+
			"  kubectl lodestar rollout approve web -n shop --cluster edge-1 --cluster edge-2",
		func(cmd *cobra.Command, key client.ObjectKey, c client.Client) error {
			a, err := rolloutctl.Approve(cmd.Context(), c, key, stage, clusters, approveWait)
			if err != nil {
				return err
			}
			what := "stage " + a.Spec.Stage
			if a.Spec.Stage == "" {
				what = "clusters " + strings.Join(a.Spec.Clusters, ", ")
			}
			fmt.Fprintf(o.Out, "placement %s: %s approved for revision %s (RolloutApproval %s)\n", key.Name, what, a.Spec.Revision, a.Name)
			return nil
		})
	approve.Flags().StringVar(&stage, "stage", "", "The stage to approve.")
	approve.Flags().StringArrayVar(&clusters, "cluster", nil, "A cluster to approve; repeat for more.")
	approve.Flags().DurationVar(&approveWait, "wait", 0, "How long to wait for a rollout to approve when the last one is complete.")
	_ = approve.RegisterFlagCompletionFunc("cluster", o.completeClusterFlag)

	cmd.AddCommand(status, history, undo, pause("pause", true), pause("resume", false), approve)
	return cmd
}
