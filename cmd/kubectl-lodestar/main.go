// Command kubectl-lodestar is the kubectl plugin for operating a Lodestar fleet from
// the hub: `kubectl lodestar join|cordon|drain|uncordon|unjoin <cluster>` and
// `kubectl lodestar rollout status|history|undo|pause|resume|approve <placement>`
// and `kubectl lodestar render <placement> --cluster <name>` and
// `kubectl lodestar status <placement>`.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/hub"
	"github.com/lodestar-dev/lodestar/internal/fleet"
	"github.com/lodestar-dev/lodestar/internal/kube"
)

const usage = `kubectl lodestar operates a Lodestar fleet from its hub.

Usage:
  kubectl lodestar join <cluster> [flags]      register a member cluster; writes the agent's hub kubeconfig
  kubectl lodestar cordon <cluster> [flags]    no Placement chooses the cluster anew (taint NoSchedule)
  kubectl lodestar drain <cluster> [flags]     move what runs there elsewhere, make-before-break (taint NoExecute)
  kubectl lodestar uncordon <cluster> [flags]  undo cordon and drain
  kubectl lodestar unjoin <cluster> [flags]    remove a cluster: what was placed there is deleted (or kept, --orphan)
  kubectl lodestar rollout <verb> <placement>  status|history|undo|pause|resume|approve a Placement's rollout
  kubectl lodestar render <placement> --cluster <name> [-o yaml|json|diff] [-f file]
                                               what the cluster's Work holds, with the overrides applied
  kubectl lodestar status <placement> [-o text|json] [--cluster <name>]
                                               per cluster and object: state, why not, feedback; summaries

Every command takes --kubeconfig (the hub; default $KUBECONFIG or ~/.kube/config),
--context and --cluster-set (default lodestar-fleet). "kubectl lodestar <command> -h"
lists the rest.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// run executes one command; it is what the tests call.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		return nil
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "rollout":
		return runRollout(ctx, args, stdout, stderr)
	case "render":
		return runRender(ctx, args, stdout, stderr)
	case "status":
		return runStatus(ctx, args, stdout, stderr)
	}
	fs := flag.NewFlagSet("kubectl lodestar "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "Kubeconfig of the hub (default: $KUBECONFIG or ~/.kube/config).")
	kubeContext := fs.String("context", "", "Context of the kubeconfig to use.")
	clusterSet := fs.String("cluster-set", "", "Cluster-set namespace of the cluster's ClusterProfile (default lodestar-fleet).")

	// join (or unjoin) runs once the hub connection is made.
	var join func(name string, cfg *rest.Config, c client.Client) error
	switch cmd {
	case "join":
		var labels labelFlag
		fs.Var(&labels, "label", "A label of the ClusterProfile, key=value; repeat for more.")
		memberKubeconfig := fs.String("member-kubeconfig", "", "Kubeconfig of the member, read once for its cluster ID (kube-system UID) so that no other cluster can take the name.")
		clusterID := fs.String("cluster-id", "", "The member's cluster ID (kube-system UID), instead of --member-kubeconfig.")
		ttl := fs.Duration("token-ttl", fleet.DefaultTokenTTL, "Lifetime of the agent's first hub token (at least 10m); the agent renews its own.")
		server := fs.String("hub-server", "", "The hub's address as the member reaches it (default: the kubeconfig's server).")
		output := fs.String("output", "", "Write the agent's hub kubeconfig to this file (mode 0600) instead of standard output.")
		join = func(name string, cfg *rest.Config, c client.Client) error {
			id := *clusterID
			if *memberKubeconfig != "" {
				memberCfg, err := clientcmd.BuildConfigFromFlags("", *memberKubeconfig)
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
			if *ttl < 10*time.Minute {
				return fmt.Errorf("--token-ttl %s: the API server issues tokens of at least 10m", *ttl)
			}
			agentCfg, err := fleet.Join(ctx, cfg, c, fleet.JoinOptions{Name: name, ClusterSet: *clusterSet, Labels: labels.m, ClusterID: id, TokenTTL: *ttl})
			if err != nil {
				return err
			}
			if *server != "" {
				agentCfg.Host = *server
			}
			b, err := kube.Kubeconfig(agentCfg, "lodestar-hub")
			if err != nil {
				return err
			}
			if *output == "" {
				_, err = stdout.Write(b)
				return err
			}
			if err := os.WriteFile(*output, b, 0o600); err != nil {
				return err
			}
			fmt.Fprintf(stderr, "Cluster %s joined. On the member, run:\n  lodestar-agent --cluster-name %s --cluster-set %s --hub-kubeconfig %s --hub-token-file <writable file>\n",
				name, name, orDefault(*clusterSet, placementv1alpha1.DefaultClusterSet), *output)
			return nil
		}
	case "cordon", "uncordon", "drain":
	case "unjoin":
		orphan := fs.Bool("orphan", false, "Leave what Lodestar placed on the member in place (released) instead of deleting it.")
		wait := fs.Duration("wait", 5*time.Minute, "How long to wait for the cluster's hub side to be removed; 0 does not wait.")
		join = func(name string, _ *rest.Config, c client.Client) error {
			err := fleet.Unjoin(ctx, c, name, fleet.UnjoinOptions{ClusterSet: *clusterSet, Orphan: *orphan, Wait: *wait,
				Progress: func(msg string) { fmt.Fprintln(stderr, msg) }})
			if err != nil {
				return err
			}
			what := "deleted from"
			if *orphan {
				what = "left in place on"
			}
			fmt.Fprintf(stdout, "cluster %s left the fleet; what Lodestar placed was %s the member\n", name, what)
			return nil
		}
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}

	name, err := oneArgument(fs, args, cmd+" takes one cluster name")
	if err != nil {
		return err
	}
	loader := hubLoader(*kubeconfig, *kubeContext)
	cfg, c, err := hubClient(loader)
	if err != nil {
		return err
	}
	switch cmd {
	case "join", "unjoin":
		return join(name, cfg, c)
	case "cordon":
		if err := fleet.Cordon(ctx, c, *clusterSet, name); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "cluster %s cordoned: no Placement chooses it anew; what it runs stays\n", name)
	case "drain":
		if err := fleet.Drain(ctx, c, *clusterSet, name, time.Now()); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "cluster %s draining: Placements move to other clusters; each leaves %s once its replacement is available\n", name, name)
	case "uncordon":
		if err := fleet.Uncordon(ctx, c, *clusterSet, name); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "cluster %s uncordoned\n", name)
	}
	return nil
}

// oneArgument parses flags that may come before or after the one positional
// argument, and returns it.
func oneArgument(fs *flag.FlagSet, args []string, what string) (string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return "", err
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(positional) != 1 {
		return "", fmt.Errorf("%s, got %d arguments", what, len(positional))
	}
	return positional[0], nil
}

// hubLoader loads the hub kubeconfig: the file (default $KUBECONFIG or
// ~/.kube/config) and context given.
func hubLoader(kubeconfig, kubeContext string) clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext})
}

// hubClient connects to the hub.
func hubClient(loader clientcmd.ClientConfig) (*rest.Config, client.Client, error) {
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("reading the hub kubeconfig: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: hub.NewScheme()})
	return cfg, c, err
}

// placementFlags are the flags of the commands on one Placement: the hub
// connection and the Placement's namespace.
type placementFlags struct{ kubeconfig, context, namespace string }

// addPlacementFlags registers --kubeconfig, --context and -n/--namespace on fs.
func addPlacementFlags(fs *flag.FlagSet) *placementFlags {
	f := &placementFlags{}
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "Kubeconfig of the hub (default: $KUBECONFIG or ~/.kube/config).")
	fs.StringVar(&f.context, "context", "", "Context of the kubeconfig to use.")
	fs.StringVar(&f.namespace, "namespace", "", "Namespace of the Placement (default: the context's).")
	fs.StringVar(&f.namespace, "n", "", "Shorthand for --namespace.")
	return f
}

// client connects to the hub and returns the Placement's namespace.
func (f *placementFlags) client() (client.Client, string, error) {
	return hubClientIn(f.kubeconfig, f.context, f.namespace)
}

// kinds discovers the namespaced kinds the hub serves.
func (f *placementFlags) kinds(context.Context) ([]schema.GroupVersionKind, error) {
	cfg, err := hubLoader(f.kubeconfig, f.context).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the hub kubeconfig: %w", err)
	}
	d, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return kube.NamespacedKinds(d)
}

// hubClientIn connects to the hub for a namespaced command: namespace, or the
// kubeconfig context's when empty.
func hubClientIn(kubeconfig, kubeContext, namespace string) (client.Client, string, error) {
	loader := hubLoader(kubeconfig, kubeContext)
	_, c, err := hubClient(loader)
	if err != nil {
		return nil, "", err
	}
	if namespace == "" {
		if namespace, _, err = loader.Namespace(); err != nil {
			return nil, "", err
		}
	}
	return c, namespace, nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// labelFlag collects repeated key=value flags.
type labelFlag struct{ m map[string]string }

func (l *labelFlag) String() string { return fmt.Sprint(l.m) }

func (l *labelFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not key=value", v)
	}
	if l.m == nil {
		l.m = map[string]string{}
	}
	l.m[k] = val
	return nil
}
