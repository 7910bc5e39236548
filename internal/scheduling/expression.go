package scheduling

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
	"k8s.io/apiserver/pkg/cel/library"

	"github.com/lodestar-dev/lodestar/internal/celbound"
)

// Expression is a compiled CEL expression over a cluster, bound to `cluster`:
//
//	cluster.name, cluster.namespace        string
//	cluster.labels, cluster.properties     map(string, string)
//	cluster.version                        string (Kubernetes version)
//	cluster.conditions                     map(string, string) (type to status)
//
// with the Kubernetes CEL libraries for quantities, lists and regular expressions,
// so that for example quantity(cluster.properties['cpu.free.lodestar.dev']) >=
// quantity('4') or int(cluster.properties['nodes.lodestar.dev']) > 3 work.
type Expression struct {
	source string
	prg    cel.Program
}

// ClusterView is the typed view of a cluster that expressions read.
type ClusterView struct {
	Name       string            `cel:"name"`
	Namespace  string            `cel:"namespace"`
	Labels     map[string]string `cel:"labels"`
	Properties map[string]string `cel:"properties"`
	Version    string            `cel:"version"`
	Conditions map[string]string `cel:"conditions"`
}

var clusterEnv = func() *cel.Env {
	env, err := cel.NewEnv(
		ext.NativeTypes(reflect.TypeFor[ClusterView](), ext.ParseStructTags(true)),
		cel.Variable("cluster", cel.ObjectType("scheduling.ClusterView")),
		library.Quantity(), library.Lists(), library.Regex(), ext.Strings(),
	)
	if err != nil {
		panic(err) // A static environment cannot fail.
	}
	return env
}()

// costLimit bounds one evaluation of a tenant's expression: a cluster
// expression reads a few labels (cost under 100); the limit keeps what one
// evaluation may allocate to a few MiB (at 10⁶, L.map(a, L.map(b, L)) allocated
// about 40 MiB).
const costLimit = 100_000

// CompileExpression compiles a CEL expression over a cluster.
func CompileExpression(src string) (*Expression, error) {
	ast, iss := clusterEnv.Compile(src)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	prg, err := clusterEnv.Program(ast, celbound.ProgramOptions(clusterEnv, costLimit)...)
	if err != nil {
		return nil, err
	}
	return &Expression{source: src, prg: prg}, nil
}

func (e *Expression) eval(c Cluster) (any, error) {
	out, err := e.result(c)
	if err != nil {
		return nil, err
	}
	return out.Value(), nil
}

func (e *Expression) result(c Cluster) (ref.Val, error) {
	return celbound.Eval(e.prg, map[string]any{"cluster": view(c)})
}

// Bool evaluates the expression as a condition.
func (e *Expression) Bool(c Cluster) (bool, error) {
	v, err := e.eval(c)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("%q yields %T, not bool", e.source, v)
	}
	return b, nil
}

// Number evaluates the expression as a score: a number, or a bool (true is 1).
func (e *Expression) Number(c Cluster) (float64, error) {
	v, err := e.eval(c)
	if err != nil {
		return 0, err
	}
	switch n := v.(type) {
	case bool:
		if n {
			return 1, nil
		}
		return 0, nil
	case int64:
		return float64(n), nil
	case uint64:
		return float64(n), nil
	case float64:
		return n, nil
	}
	return 0, fmt.Errorf("%q yields %T, not a number or bool", e.source, v)
}

// JSON evaluates the expression as a JSON value: null, a bool, a number (an int
// stays an int), a string, or a list or map (with string keys) of them, at most
// celbound.MaxResultBytes encoded.
func (e *Expression) JSON(c Cluster) (any, error) {
	out, err := e.result(c)
	if err != nil {
		return nil, err
	}
	return celbound.JSON(out)
}

func view(c Cluster) ClusterView {
	return ClusterView{
		Name:       c.Name,
		Namespace:  c.Namespace,
		Labels:     orEmpty(c.Labels),
		Properties: orEmpty(c.Properties),
		Version:    c.Version,
		Conditions: orEmpty(c.Conditions),
	}
}

// ViewKey identifies what an expression can read of c: clusters with equal keys
// evaluate every expression alike.
func ViewKey(c Cluster) string {
	b, _ := json.Marshal(view(c)) // Maps marshal with sorted keys.
	return string(b)
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// Source is the expression as written.
func (e *Expression) Source() string { return e.source }
