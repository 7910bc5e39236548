// Command kubectl-lodestar is the kubectl plugin for operating a Lodestar fleet
// from the hub. It is built like kubectl's own commands: cobra for the verbs,
// help and shell completion, and k8s.io/cli-runtime for the connection flags
// (--kubeconfig, --context, -n, --as, ...) and the object printers (-o).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lodestar-dev/lodestar/api/client/clientset/versioned"
	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/scheme"
	"github.com/lodestar-dev/lodestar/internal/version"
	"github.com/lodestar-dev/lodestar/internal/watches"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, argsFor(os.Args[0], os.Args[1:]), os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// CompletionName is the name under which kubectl runs the plugin to complete
// `kubectl lodestar ...` (kubectl's plugin completion convention): installed
// beside kubectl-lodestar as a link to it, it completes as `kubectl-lodestar
// __complete` does.
const CompletionName = "kubectl_complete-lodestar"

// argsFor is the command line the binary runs, called as argv0 with args.
func argsFor(argv0 string, args []string) []string {
	if strings.TrimSuffix(filepath.Base(argv0), ".exe") == CompletionName {
		return append([]string{cobra.ShellCompRequestCmd}, args...)
	}
	return args
}

// run executes one command line; it is what the tests call.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := newRootCommand(genericiooptions.IOStreams{In: os.Stdin, Out: stdout, ErrOut: stderr})
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}

// options are what every verb shares: the hub connection and the output streams.
type options struct {
	config     *genericclioptions.ConfigFlags
	clusterSet string
	genericiooptions.IOStreams
}

// newRootCommand builds the whole command tree.
func newRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &options{config: genericclioptions.NewConfigFlags(true), IOStreams: streams}
	// --cluster names a member cluster in our verbs, not a kubeconfig cluster; and
	// the plugin keeps no discovery cache.
	o.config.ClusterName = nil
	o.config.CacheDir = nil

	root := &cobra.Command{
		Use:   "kubectl-lodestar",
		Short: "Operate a Lodestar fleet from its hub",
		Long: `kubectl lodestar operates a Lodestar fleet from its hub: it joins, cordons,
drains and removes member clusters, shows them and why a Placement chose them or
not, and follows a Placement's rollout, rendering and status.

Every verb takes kubectl's connection flags (--kubeconfig, --context, -n, --as,
...) and --cluster-set (the cluster set's namespace, default lodestar-fleet).`,
		Example: `  kubectl lodestar get clusters -L region
  kubectl lodestar why web -n shop --cluster edge-12
  kubectl lodestar rollout status web -n shop`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          unknownSubcommand,
		RunE:          func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.Version = version.Version()
	root.SetVersionTemplate(version.String("kubectl-lodestar") + "\n")
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	o.config.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVar(&o.clusterSet, "cluster-set", "", "Cluster-set namespace of the clusters' ClusterProfiles (default lodestar-fleet).")

	root.AddCommand(
		newJoinCommand(o), newCordonCommand(o, "cordon"), newCordonCommand(o, "drain"), newCordonCommand(o, "uncordon"), newTaintCommand(o),
		newUnjoinCommand(o), newRevokeCommand(o), newRolloutCommand(o), newConsoleCommand(o), newRenderCommand(o), newStatusCommand(o),
		newGetCommand(o), newDescribeCommand(o), newWhyCommand(o), newAdoptCommand(o),
		newPodsCommand(o), newLogsCommand(o), newEventsCommand(o), newExecCommand(o), newPortForwardCommand(o),
		newInterpretCommand(o),
	)
	return root
}

// unknownSubcommand refuses arguments to a command that only groups others, so
// that a mistyped verb is an error rather than a help text and success.
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	return nil
}

// group is a command that only holds others.
func group(use, short, long, example string) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Long: long, Example: example,
		Args: unknownSubcommand,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
}

// exactlyOne accepts one positional argument, and says what it is otherwise.
func exactlyOne(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return fmt.Errorf("%s takes one %s, got %d arguments", cmd.CommandPath(), what, len(args))
		}
		return nil
	}
}

// set is the cluster set the verb works in.
func (o *options) set() string {
	if o.clusterSet == "" {
		return placementv1alpha1.DefaultClusterSet
	}
	return o.clusterSet
}

// restConfig is the hub's client configuration from the connection flags.
func (o *options) restConfig() (*rest.Config, error) {
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the hub kubeconfig: %w", err)
	}
	return cfg, nil
}

// hub connects to the hub.
func (o *options) hub() (*rest.Config, client.Client, error) {
	cfg, err := o.restConfig()
	if err != nil {
		return nil, nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Hub()})
	return cfg, c, err
}

// typed is the hub's typed client of Lodestar's API (the API module's
// generated clientset).
func (o *options) typed() (versioned.Interface, error) {
	cfg, err := o.restConfig()
	if err != nil {
		return nil, err
	}
	return versioned.NewForConfig(cfg)
}

// namespace is -n, or the kubeconfig context's namespace.
func (o *options) namespace() (string, error) {
	ns, _, err := o.config.ToRawKubeConfigLoader().Namespace()
	return ns, err
}

// hubIn connects to the hub for a namespaced verb and returns the namespace.
func (o *options) hubIn() (client.Client, string, error) {
	_, c, err := o.hub()
	if err != nil {
		return nil, "", err
	}
	ns, err := o.namespace()
	return c, ns, err
}

// kinds discovers the namespaced kinds the hub serves.
func (o *options) kinds(context.Context) ([]schema.GroupVersionKind, error) {
	cfg, err := o.restConfig()
	if err != nil {
		return nil, err
	}
	d, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return watches.NamespacedKinds(d)
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// printJSON prints a report as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
