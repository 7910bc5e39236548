package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/interpretation"
)

// newInterpretCommand is `kubectl lodestar interpret --rule <file> --object
// <file> --operation <op>`: a ResourceInterpretation evaluated offline.
func newInterpretCommand(o *options) *cobra.Command {
	var rule, object, operation, share string
	var clusters []string
	cmd := &cobra.Command{
		Use:   "interpret --rule <file> --object <file> --operation health|replicas|dependencies|aggregate",
		Short: "Evaluate a ResourceInterpretation against an object, offline",
		Long: `Evaluate a ResourceInterpretation (docs/interpretation.md) against an object
from a file, by the code the hub and the agents run, and print the result as
YAML, or the expression's error with its position. Nothing is read from or
written to a cluster: write and test a rule before you apply it.

  health        the object as a member's API server returns it: its state and message
  replicas      the object as written on the hub: its replica count and what one
                replica requests; with --share N, the object with N written in
  dependencies  the objects of its namespace it needs
  aggregate     the hub's object (--object) and its copies on the clusters
                (--cluster name=file, repeated): the status the hub shows`,
		Example: `  kubectl lodestar interpret --rule widgets.yaml --object widget-on-member.yaml --operation health
  kubectl lodestar interpret --rule widgets.yaml --object widget.yaml --operation replicas --share 3
  kubectl lodestar interpret --rule widgets.yaml --object widget.yaml --operation aggregate \
      --cluster member-1=member-1.yaml --cluster member-2=member-2.yaml`,
		Args: cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			req, ri, err := interpretRequest(rule, object, operation, share, clusters)
			if err != nil {
				return err
			}
			out, err := interpretation.Evaluate(ri, req)
			if err != nil {
				return err
			}
			b, err := yaml.Marshal(out)
			if err != nil {
				return err
			}
			_, err = o.Out.Write(b)
			return err
		},
	}
	cmd.Flags().StringVar(&rule, "rule", "", "File of the ResourceInterpretation.")
	cmd.Flags().StringVar(&object, "object", "", "File of the object.")
	cmd.Flags().StringVar(&operation, "operation", "", "health, replicas, dependencies or aggregate.")
	cmd.Flags().StringVar(&share, "share", "", "With replicas: a cluster's share to write into the object.")
	cmd.Flags().StringArrayVar(&clusters, "cluster", nil, "With aggregate: name=file of a cluster's copy of the object (repeated).")
	return cmd
}

// interpretRequest reads the files an interpret names.
func interpretRequest(rule, object, operation, share string, clusters []string) (interpretation.Request, *placementv1alpha1.ResourceInterpretation, error) {
	req := interpretation.Request{Operation: operation}
	if rule == "" || object == "" || operation == "" {
		return req, nil, errors.New("interpret needs --rule, --object and --operation")
	}
	ri := &placementv1alpha1.ResourceInterpretation{}
	if err := readYAMLFile(rule, ri); err != nil {
		return req, nil, err
	}
	if ri.Kind != "ResourceInterpretation" {
		return req, nil, fmt.Errorf("%s holds a %q, not a ResourceInterpretation", rule, ri.Kind)
	}
	if err := readYAMLFile(object, &req.Object); err != nil {
		return req, nil, err
	}
	if share != "" {
		n, err := strconv.ParseInt(share, 10, 64)
		if err != nil || n < 0 {
			return req, nil, fmt.Errorf("--share %q is not a replica count", share)
		}
		req.Share = &n
	}
	for _, c := range clusters {
		name, file, ok := strings.Cut(c, "=")
		if !ok || name == "" || file == "" {
			return req, nil, fmt.Errorf("--cluster %q: name=file", c)
		}
		copyOf := map[string]any{}
		if err := readYAMLFile(file, &copyOf); err != nil {
			return req, nil, err
		}
		status, _ := copyOf["status"].(map[string]any)
		req.Clusters = append(req.Clusters, interpretation.ClusterStatus{Name: name, Status: status})
	}
	return req, ri, nil
}

// readYAMLFile decodes the one YAML or JSON document of a file into v, whole
// numbers as int64, as an API server's objects decode.
func readYAMLFile(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	j, err := yaml.YAMLToJSON(b)
	if err == nil {
		err = utiljson.Unmarshal(j, v)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
