package main

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/lodestar-dev/lodestar/internal/console"
)

// newConsoleCommand is `kubectl lodestar console`: the fleet in a browser.
func newConsoleCommand(o *options) *cobra.Command {
	var address string
	var allSets bool
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Serve a web console of the fleet on loopback, with your own hub credentials",
		Long: `Serve a web page of the fleet on a loopback address: the clusters (labels,
properties, taints, reachability and why one is not ready), the Placements of a
namespace with each cluster's status and why clusters were left out, a
Placement's rollout with approve, pause, resume and undo buttons (they do what
kubectl lodestar rollout does), and its pods' logs and events through the debug
API. It reads and acts as you (this command's kubeconfig, --as, ...): nothing is
installed on the hub, and what you may not read is absent. Changes on the hub
reach the page as they happen. Open the URL it prints (it carries the
session's token); Ctrl-C stops it.`,
		Example: `  kubectl lodestar console -n shop
  kubectl lodestar console --address 127.0.0.1:8099 -A`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := o.restConfig()
			if err != nil {
				return err
			}
			ns, err := o.namespace()
			if err != nil {
				return err
			}
			opts := console.Options{Config: cfg, Namespace: ns, ClusterSet: o.set()}
			if allSets {
				opts.ClusterSet = ""
			}
			srv, err := console.New(opts)
			if err != nil {
				return err
			}
			l, url, err := srv.Listen(address)
			if err != nil {
				return err
			}
			fmt.Fprintf(o.Out, "Lodestar console of %s at %s\n(Ctrl-C stops it)\n", cfg.Host, url)
			ctx := cmd.Context()
			go srv.Run(ctx)
			hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
			go func() {
				<-ctx.Done()
				_ = hs.Close()
			}()
			if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&address, "address", "127.0.0.1:0", "Loopback address to serve on (port 0: any free port).")
	cmd.Flags().BoolVarP(&allSets, "all-cluster-sets", "A", false, "Show the clusters of every cluster set.")
	return cmd
}
