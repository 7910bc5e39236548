package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/lodestar-dev/lodestar/internal/renderctl"
)

const renderUsage = `kubectl lodestar render prints what a cluster's Work of a Placement holds: the
selected objects as the work generator renders them, with the Placement's
overrides applied for that cluster. Which rules changed which fields goes to
standard error.

Usage:
  kubectl lodestar render <placement> --cluster <name> [-o yaml|json|diff] [-f file]

  -f file   a file of YAML or JSON documents: the Placement (by that name) and any
            objects, used instead of the hub's copies, so that a change can be
            previewed before it is applied
  -o diff   the difference each override makes to the hub's objects

Flags: -n/--namespace (default: the kubeconfig context's), --kubeconfig, --context.
`

// runRender runs `kubectl lodestar render <placement>`.
func runRender(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kubectl lodestar render", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, renderUsage) }
	hubFlags := addPlacementFlags(fs)
	var output, file string
	fs.StringVar(&output, "output", "yaml", "yaml, json or diff.")
	fs.StringVar(&output, "o", "yaml", "Shorthand for --output.")
	fs.StringVar(&file, "filename", "", "A file with the Placement and objects to use instead of the hub's.")
	fs.StringVar(&file, "f", "", "Shorthand for --filename.")
	cluster := fs.String("cluster", "", "The cluster to render for (the name of its ClusterProfile).")
	name, err := oneArgument(fs, args, "render takes one Placement name")
	if err != nil {
		return err
	}
	if *cluster == "" {
		return errors.New("render needs --cluster")
	}
	if output != "yaml" && output != "json" && output != "diff" {
		return fmt.Errorf("--output %q: yaml, json or diff", output)
	}
	c, namespace, err := hubFlags.client()
	if err != nil {
		return err
	}

	opts := renderctl.Options{Placement: client.ObjectKey{Namespace: namespace, Name: name}, Cluster: *cluster, Kinds: hubFlags.kinds}
	if file != "" {
		if opts.Local, err = renderctl.ReadObjects(file, namespace); err != nil {
			return err
		}
	}
	base, res, err := renderctl.Render(ctx, c, opts)
	if err != nil {
		return err
	}
	for _, ch := range res.Changes {
		if ch.Deleted {
			fmt.Fprintf(stderr, "# rule %s: left %s out\n", ch.Rule, ch.Object)
			continue
		}
		fmt.Fprintf(stderr, "# rule %s: changed %s on %s\n", ch.Rule, strings.Join(ch.Paths, ", "), ch.Object)
	}
	switch output {
	case "json":
		items := make([]json.RawMessage, 0, len(res.Manifests))
		for _, m := range res.Manifests {
			items = append(items, m.Raw)
		}
		b, err := json.MarshalIndent(map[string]any{"apiVersion": "v1", "kind": "List", "items": items}, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdout, string(b))
		return err
	case "diff":
		return printDiff(stdout, base, res.Manifests, *cluster)
	}
	for _, m := range res.Manifests {
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
