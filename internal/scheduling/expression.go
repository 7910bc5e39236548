package scheduling

import (
	"fmt"
	"math"
	"reflect"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/ext"
	"k8s.io/apiserver/pkg/cel/library"
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

// CompileExpression compiles a CEL expression over a cluster.
func CompileExpression(src string) (*Expression, error) {
	ast, iss := clusterEnv.Compile(src)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	prg, err := clusterEnv.Program(ast, cel.CostLimit(1_000_000))
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
	out, _, err := e.prg.Eval(map[string]any{"cluster": view(c)})
	if err != nil {
		return nil, err
	}
	if types.IsError(out) {
		return nil, fmt.Errorf("%v", out)
	}
	return out, nil
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
// stays an int), a string, or a list or map (with string keys) of them.
func (e *Expression) JSON(c Cluster) (any, error) {
	out, err := e.result(c)
	if err != nil {
		return nil, err
	}
	return jsonOf(out)
}

// jsonOf converts a CEL value to its JSON form.
func jsonOf(v ref.Val) (any, error) {
	switch v.Type() {
	case types.NullType:
		return nil, nil
	case types.BoolType:
		return bool(v.(types.Bool)), nil
	case types.IntType:
		return int64(v.(types.Int)), nil
	case types.UintType:
		return uint64(v.(types.Uint)), nil
	case types.DoubleType:
		d := float64(v.(types.Double))
		if math.IsNaN(d) || math.IsInf(d, 0) {
			return nil, fmt.Errorf("the result %v is not a JSON number", d)
		}
		return d, nil
	case types.StringType:
		return string(v.(types.String)), nil
	}
	switch t := v.(type) {
	case traits.Mapper:
		out := map[string]any{}
		for it := t.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			key, ok := k.(types.String)
			if !ok {
				return nil, fmt.Errorf("a map key %v is not a string", k)
			}
			val, err := jsonOf(t.Get(k))
			if err != nil {
				return nil, err
			}
			out[string(key)] = val
		}
		return out, nil
	case traits.Lister:
		out := []any{}
		for it := t.Iterator(); it.HasNext() == types.True; {
			val, err := jsonOf(it.Next())
			if err != nil {
				return nil, err
			}
			out = append(out, val)
		}
		return out, nil
	}
	return nil, fmt.Errorf("the result is a %s, which has no JSON form (convert it with string(), int() or double())", v.Type().TypeName())
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

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// Source is the expression as written.
func (e *Expression) Source() string { return e.source }
