package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lodestar-dev/lodestar/internal/rolloutctl"
)

const rolloutUsage = `kubectl lodestar rollout manages the rollout of a Placement's revisions.

Usage:
  kubectl lodestar rollout status <placement> [--watch=false] [--timeout 10m]
      wait until the rollout is complete; exits non-zero when its progress
      deadline or failure budget is breached
  kubectl lodestar rollout history <placement>
      list the kept revisions with their change causes
  kubectl lodestar rollout undo <placement> [--to-revision N]
      write an earlier revision's objects back to the namespace (default: the
      revision before the target); it rolls out through the strategy's gates
  kubectl lodestar rollout pause|resume <placement>
      stop (or go on) giving clusters the target revision
  kubectl lodestar rollout approve <placement> (--stage S | --cluster C ...)
      approve a stage, or clusters, of the target revision

Flags: -n/--namespace (default: the kubeconfig context's), --kubeconfig, --context.
`

// runRollout runs `kubectl lodestar rollout <verb> <placement>`.
func runRollout(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, rolloutUsage)
		return nil
	}
	verb, args := args[0], args[1:]
	fs := flag.NewFlagSet("kubectl lodestar rollout "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	hubFlags := addPlacementFlags(fs)

	watch := fs.Bool("watch", true, "status: wait until the rollout is complete or failed.")
	timeout := fs.Duration("timeout", 10*time.Minute, "status: how long to wait.")
	toRevision := fs.Int64("to-revision", 0, "undo: the revision number to go back to (default: the one before the target).")
	stage := fs.String("stage", "", "approve: the stage to approve.")
	var clusters listFlag
	fs.Var(&clusters, "cluster", "approve: a cluster to approve; repeat for more.")
	switch verb {
	case "status", "history", "undo", "pause", "resume", "approve":
	default:
		fmt.Fprint(stderr, rolloutUsage)
		return fmt.Errorf("unknown rollout command %q", verb)
	}
	name, err := oneArgument(fs, args, "rollout "+verb+" takes one Placement name")
	if err != nil {
		return err
	}
	c, namespace, err := hubFlags.client()
	if err != nil {
		return err
	}
	key := client.ObjectKey{Namespace: namespace, Name: name}
	switch verb {
	case "status":
		if !*watch {
			r, err := rolloutctl.Status(ctx, c, key)
			if err != nil {
				return err
			}
			fmt.Fprintln(stdout, r.Message)
			if r.Failed {
				return rolloutctl.ErrRolloutFailed
			}
			return nil
		}
		return rolloutctl.Wait(ctx, c, key, *timeout, time.Second, func(msg string) { fmt.Fprintln(stdout, msg) })
	case "history":
		revs, err := rolloutctl.History(ctx, c, key)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "REVISION\tNAME\tAGE\tCHANGE-CAUSE")
		for _, r := range revs {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", r.Spec.Revision, r.Name, time.Since(r.CreationTimestamp.Time).Round(time.Second), r.Spec.ChangeCause)
		}
		return tw.Flush()
	case "undo":
		to, err := rolloutctl.Undo(ctx, c, key, *toRevision)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "placement %s: the objects of revision %d are back in namespace %s and roll out through its strategy\n", key.Name, to.Spec.Revision, key.Namespace)
	case "pause", "resume":
		if err := rolloutctl.SetPaused(ctx, c, key, verb == "pause"); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "placement %s %sd\n", key.Name, verb)
	case "approve":
		a, err := rolloutctl.Approve(ctx, c, key, *stage, clusters)
		if err != nil {
			return err
		}
		what := "stage " + a.Spec.Stage
		if a.Spec.Stage == "" {
			what = "clusters " + strings.Join(a.Spec.Clusters, ", ")
		}
		fmt.Fprintf(stdout, "placement %s: %s approved for revision %s (RolloutApproval %s)\n", key.Name, what, a.Spec.Revision, a.Name)
	}
	return nil
}

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	if v == "" {
		return errors.New("empty value")
	}
	*l = append(*l, v)
	return nil
}
