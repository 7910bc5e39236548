package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// ApplyDir applies every object of the YAML files in dir, in file order, with
// server-side apply, as `kubectl apply --server-side -f dir` would. It returns the
// applied objects.
func ApplyDir(ctx context.Context, c client.Client, dir string) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var applied []*unstructured.Unstructured
	for _, f := range files {
		objs, err := readObjects(f)
		if err != nil {
			return nil, err
		}
		for _, obj := range objs {
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("kubectl"), client.ForceOwnership); err != nil {
				return nil, fmt.Errorf("applying %s %s from %s: %w", obj.GetKind(), obj.GetName(), f, err)
			}
			applied = append(applied, obj)
		}
	}
	return applied, nil
}

func readObjects(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var out []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		err := dec.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("decoding %s: %w", path, err)
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
}

// CreateYAML creates the objects of a YAML text (documents separated by
// "---") in namespace ns as a user's kubectl does: as they are written, with
// nothing the Go types would add.
func CreateYAML(ctx context.Context, c client.Client, ns, text string) error {
	for _, part := range strings.Split(strings.TrimSpace(text), "\n---\n") {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(part), &obj.Object); err != nil {
			return fmt.Errorf("decoding %q: %w", part, err)
		}
		obj.SetNamespace(ns)
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	return nil
}
