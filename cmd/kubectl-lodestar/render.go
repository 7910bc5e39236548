package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	debugv1alpha1 "github.com/lodestar-dev/lodestar/api/debug/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/renderctl"
)

// newRenderCommand is `kubectl lodestar render <placement> --cluster <name>`.
func newRenderCommand(o *options) *cobra.Command {
	var output, file, cluster string
	cmd := &cobra.Command{
		Use:   "render <placement> --cluster <name>",
		Short: "Print what a cluster's Work of a Placement holds, overrides applied",
		Long: `Print what a cluster's Work of a Placement holds: the selected objects as the
work generator renders them, with the Placement's overrides applied for that
cluster. Which rules changed which fields goes to standard error.

  -f file   a file of YAML or JSON documents: the Placement (by that name) and any
            objects, used instead of the hub's copies, so that a change can be
            previewed before it is applied
  -o diff   the difference each override makes to the hub's objects`,
		Example: `  kubectl lodestar render web -n shop --cluster edge-12
  kubectl lodestar render web -n shop --cluster edge-12 -o diff
  kubectl lodestar render web -n shop --cluster edge-12 -f web-next.yaml`,
		Args:              exactlyOne("Placement name"),
		ValidArgsFunction: o.completePlacements,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if cluster == "" {
				return errors.New("render needs --cluster")
			}
			if output != "yaml" && output != "json" && output != "diff" {
				return fmt.Errorf("--output %q: yaml, json or diff", output)
			}
			c, namespace, err := o.hubIn()
			if err != nil {
				return err
			}
			opts := renderctl.Options{Placement: client.ObjectKey{Namespace: namespace, Name: args[0]}, Cluster: cluster, Kinds: o.kinds}
			if file != "" {
				if opts.Local, err = renderctl.ReadObjects(file, namespace); err != nil {
					return err
				}
			}
			opts.Note = func(msg string) { fmt.Fprintf(o.ErrOut, "# %s\n", msg) }
			opts.Fleet = func(ctx context.Context) (renderctl.Fleet, error) {
				// A tenant may not read the clusters' ClusterProfiles and Works:
				// the hub manager reads them for the Placement (debug API).
				fmt.Fprintf(o.ErrOut, "# the clusters read through the hub manager (placements/fleet in debug.lodestar.dev): you may not read their ClusterProfiles\n")
				return o.fleetOf(ctx, namespace, args[0], cluster)
			}
			base, res, err := renderctl.Render(ctx, c, opts)
			if err != nil {
				return err
			}
			for _, ch := range res.Changes {
				if ch.Deleted {
					fmt.Fprintf(o.ErrOut, "# rule %s: left %s out\n", ch.Rule, ch.Object)
					continue
				}
				fmt.Fprintf(o.ErrOut, "# rule %s: changed %s on %s\n", ch.Rule, strings.Join(ch.Paths, ", "), ch.Object)
			}
			return printRendered(o.Out, output, cluster, base, res.Manifests)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "yaml", "yaml, json or diff.")
	cmd.Flags().StringVarP(&file, "filename", "f", "", "A file with the Placement and objects to use instead of the hub's.")
	cmd.Flags().StringVar(&cluster, "cluster", "", "The cluster to render for (the name of its ClusterProfile).")
	_ = cmd.RegisterFlagCompletionFunc("cluster", o.completeClusterFlag)
	return cmd
}

// printRendered prints the rendered manifests as yaml, json or a diff against base.
func printRendered(stdout io.Writer, output, cluster string, base, manifests []runtime.RawExtension) error {
	switch output {
	case "json":
		items := make([]json.RawMessage, 0, len(manifests))
		for _, m := range manifests {
			items = append(items, m.Raw)
		}
		b, err := json.MarshalIndent(map[string]any{"apiVersion": "v1", "kind": "List", "items": items}, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdout, string(b))
		return err
	case "diff":
		return printDiff(stdout, base, manifests, cluster)
	}
	for _, m := range manifests {
		b, err := yaml.JSONToYAML(m.Raw)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "---\n%s", b)
	}
	return nil
}

// printDiff prints, per object, a unified diff of the hub's rendering and the
// cluster's.
func printDiff(w io.Writer, base, rendered []runtime.RawExtension, cluster string) error {
	after := map[string][]byte{}
	for _, m := range rendered {
		id, err := objectID(m.Raw)
		if err != nil {
			return err
		}
		after[id] = m.Raw
	}
	for _, m := range base {
		id, err := objectID(m.Raw)
		if err != nil {
			return err
		}
		a, err := yaml.JSONToYAML(m.Raw)
		if err != nil {
			return err
		}
		var b []byte
		if r, ok := after[id]; ok {
			if b, err = yaml.JSONToYAML(r); err != nil {
				return err
			}
		}
		if bytes.Equal(a, b) {
			continue
		}
		text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A: difflib.SplitLines(string(a)), B: difflib.SplitLines(string(b)),
			FromFile: id + " (hub)", ToFile: id + " (cluster " + cluster + ")", Context: 3,
		})
		if err != nil {
			return err
		}
		fmt.Fprint(w, text)
	}
	return nil
}

func objectID(raw []byte) (string, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		return "", err
	}
	return u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName(), nil
}

// fleetOf reads what a render needs of the clusters through the hub
// manager's debug API (placements/fleet), as the user.
func (o *options) fleetOf(ctx context.Context, namespace, placement, cluster string) (renderctl.Fleet, error) {
	var f renderctl.Fleet
	if err := o.debugGet(ctx, namespace, placement, debugv1alpha1.Fleet, cluster, &f); err != nil {
		if apierrors.IsForbidden(err) {
			return renderctl.Fleet{}, fmt.Errorf("you may neither read the clusters' ClusterProfiles nor get placements/fleet (debug.lodestar.dev) in namespace %s, "+
				"which reads them through the hub manager: the ClusterRole lodestar:debug:view grants it (aggregated into view, edit and admin; "+
				"lodestar:tenant alone does not), bound in the namespace: %w", namespace, err)
		}
		return renderctl.Fleet{}, fmt.Errorf("reading the clusters through the hub manager (placements/fleet in debug.lodestar.dev): %w", err)
	}
	return f, nil
}

// debugGet reads a subresource the hub manager answers itself (debugapi.Local)
// of a Placement, as the user, into out.
func (o *options) debugGet(ctx context.Context, namespace, placement, subresource, cluster string, out any) error {
	cfg, _, err := o.hub()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath(debugv1alpha1.PlacementPath(namespace, placement, subresource, cluster)).DoRaw(ctx)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, out)
}
