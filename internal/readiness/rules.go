package readiness

import (
	"errors"
	"fmt"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/celbound"

	"github.com/google/cel-go/cel"
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

var celEnv = func() *cel.Env {
	env, err := cel.NewEnv(cel.Variable("self", cel.DynType))
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
	return celEnv.Program(ast, celbound.ProgramOptions(100000)...)
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
