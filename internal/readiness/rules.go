package readiness

import (
	"errors"
	"fmt"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/celbound"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/ext"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Rule is a readiness rule for a kind, written in CEL over the object bound to
// `self`. It comes from the agent's configuration file.
type Rule struct {
	// Group is the kind's API group; empty for the core group.
	Group string `json:"group,omitempty"`
	// Kind is the kind the rule is for.
	Kind string `json:"kind"`
	// Available is a CEL expression that is true when the object is available.
	Available string `json:"available"`
	// Degraded is an optional CEL expression that is true when the object failed.
	Degraded string `json:"degraded,omitempty"`
}

// GroupKind is the kind the rule is for.
func (r Rule) GroupKind() schema.GroupKind { return schema.GroupKind{Group: r.Group, Kind: r.Kind} }

type compiledRule struct {
	available, degraded cel.Program
}

// Extensions are the CEL libraries beside the standard one that readiness,
// health and the hub's interpretations offer: cel.bind, list functions
// (flatten, distinct, sort), string functions (split, join, format),
// math.greatest and math.least, and <list>.sum() of a list of numbers.
func Extensions() []cel.EnvOption {
	return []cel.EnvOption{ext.Bindings(), ext.Lists(ext.ListsVersion(2)), ext.Strings(), ext.Math(), sumFunction}
}

// sumFunction is <list>.sum(): the sum of a list of ints (0 for none), or of
// numbers as a double when one is not an int.
var sumFunction = cel.Function("sum", cel.MemberOverload("list_sum", []*cel.Type{cel.ListType(cel.DynType)}, cel.DynType,
	cel.UnaryBinding(func(v ref.Val) ref.Val {
		l, ok := v.(traits.Lister)
		if !ok {
			return types.NewErr("sum() of a %s", v.Type().TypeName())
		}
		var i int64
		var d float64
		isDouble := false
		for it := l.Iterator(); it.HasNext() == types.True; {
			switch n := it.Next().(type) {
			case types.Int:
				i += int64(n)
			case types.Uint:
				i += int64(n)
			case types.Double:
				d += float64(n)
				isDouble = true
			default:
				return types.NewErr("sum() of a list holding a %s", n.Type().TypeName())
			}
		}
		if isDouble {
			return types.Double(d + float64(i))
		}
		return types.Int(i)
	})))

var celEnv = func() *cel.Env {
	env, err := cel.NewEnv(append(Extensions(), cel.Variable("self", cel.DynType))...)
	if err != nil {
		panic(err) // A static environment cannot fail.
	}
	return env
}()

// CompileBool compiles a CEL expression over `self` that yields a bool.
func CompileBool(expr string) (cel.Program, error) {
	ast, iss := celEnv.Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	if ast.OutputType() != cel.BoolType && ast.OutputType() != cel.DynType {
		return nil, fmt.Errorf("the expression yields %s, not bool", ast.OutputType())
	}
	return celEnv.Program(ast, celbound.ProgramOptions(celEnv, 100000)...)
}

func compileRule(r Rule) (*compiledRule, error) {
	if r.Kind == "" {
		return nil, errors.New("kind is required")
	}
	if r.Available == "" {
		return nil, errors.New("available is required")
	}
	cr := &compiledRule{}
	var err error
	if cr.available, err = CompileBool(r.Available); err != nil {
		return nil, fmt.Errorf("available: %w", err)
	}
	if r.Degraded != "" {
		if cr.degraded, err = CompileBool(r.Degraded); err != nil {
			return nil, fmt.Errorf("degraded: %w", err)
		}
	}
	return cr, nil
}

func (cr *compiledRule) evaluate(obj *unstructured.Unstructured) Result {
	if cr.degraded != nil {
		// A degraded rule that cannot be evaluated yet (a missing field) does not hold.
		if is, err := evalBool(cr.degraded, obj); err == nil && is {
			return degraded(lodestarworkv1alpha1.ReasonRuleDegraded, "the degraded rule holds")
		}
	}
	is, err := evalBool(cr.available, obj)
	switch {
	case err != nil:
		// A rule that reads a field the object does not have yet is not a failure.
		return progressing(lodestarworkv1alpha1.ReasonRulePending, "the available rule cannot be evaluated yet: %v", err)
	case is:
		return available(lodestarworkv1alpha1.ReasonRuleAvailable, "the available rule holds")
	}
	return progressing(lodestarworkv1alpha1.ReasonRuleNotAvailable, "the available rule does not hold yet")
}

func evalBool(p cel.Program, obj *unstructured.Unstructured) (bool, error) {
	out, err := celbound.Eval(p, map[string]any{"self": obj.Object})
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("the expression yielded %v, not a bool", out.Value())
	}
	return b, nil
}
