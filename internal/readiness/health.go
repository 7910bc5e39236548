// Health rules: a kind's health said in CEL on the hub (a ResourceInterpretation)
// and carried to the agents with each Work (lodestarworkv1alpha1.HealthRule).

package readiness

import (
	"errors"
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/celbound"
)

// HealthCost is the cost limit of one evaluation of a health expression: as an
// override's, enough to walk a status of hundreds of entries a few times.
const HealthCost = 1_000_000

// The states a health expression yields.
const (
	StateHealthy     = "Healthy"
	StateProgressing = "Progressing"
	StateDegraded    = "Degraded"
)

// Health is a compiled health rule.
type Health struct {
	prg    cel.Program
	source string
	// err is why the expression does not compile.
	err error
}

// CompileHealth compiles a health expression over `self`; the error, with its
// position, when it does not compile. source names where it comes from.
func CompileHealth(expr, source string) *Health {
	ast, iss := celEnv.Compile(expr)
	if iss.Err() != nil {
		return &Health{source: source, err: iss.Err()}
	}
	switch ast.OutputType().Kind() {
	case types.StringKind, types.DynKind, types.MapKind:
	default:
		return &Health{source: source, err: fmt.Errorf("the expression yields %s, not a state or a map with one", ast.OutputType())}
	}
	prg, err := celEnv.Program(ast, celbound.ProgramOptions(celEnv, HealthCost)...)
	return &Health{prg: prg, source: source, err: err}
}

// Err is why the rule does not compile, or nil.
func (h *Health) Err() error { return h.err }

// Evaluate is the health of obj by the rule. A rule that reads a field the
// object does not have yet is pending (Progressing), not a failure; one that
// does not compile, exceeds its cost or yields no state is Degraded.
func (h *Health) Evaluate(obj *unstructured.Unstructured) Result {
	if h.err != nil {
		return degraded(lodestarworkv1alpha1.ReasonInterpretationFailed, "the health expression of %s does not compile: %v", h.source, h.err)
	}
	state, message, err := h.State(obj)
	var failed *StateError
	switch {
	case errors.As(err, &failed) || errors.Is(err, celbound.ErrCostLimit):
		return degraded(lodestarworkv1alpha1.ReasonInterpretationFailed, "the health expression of %s failed: %v", h.source, err)
	case err != nil:
		return progressing(lodestarworkv1alpha1.ReasonHealthPending, "the health expression of %s cannot be evaluated yet: %v", h.source, err)
	}
	if message == "" {
		message = fmt.Sprintf("the health expression of %s says %s", h.source, state)
	}
	switch state {
	case StateHealthy:
		return available(lodestarworkv1alpha1.ReasonHealthy, "%s", message)
	case StateDegraded:
		return degraded(lodestarworkv1alpha1.ReasonHealthDegraded, "%s", message)
	}
	return progressing(lodestarworkv1alpha1.ReasonHealthProgressing, "%s", message)
}

// StateError is a health expression that yields something that is not a state.
type StateError struct{ Got string }

func (e *StateError) Error() string {
	return fmt.Sprintf("it yields %s, not %q, %q or %q (or a map with a state)", e.Got, StateHealthy, StateProgressing, StateDegraded)
}

// State evaluates the rule on obj: the state and the message it gives.
func (h *Health) State(obj *unstructured.Unstructured) (string, string, error) {
	if h.err != nil {
		return "", "", h.err
	}
	out, err := celbound.Eval(h.prg, map[string]any{"self": obj.Object})
	if err != nil {
		return "", "", err
	}
	v, err := celbound.JSON(out)
	if err != nil {
		return "", "", err
	}
	var state, message string
	switch v := v.(type) {
	case string:
		state = v
	case map[string]any:
		state, _ = v["state"].(string)
		message, _ = v["message"].(string)
	}
	switch state {
	case StateHealthy, StateProgressing, StateDegraded:
		return state, message, nil
	}
	return "", "", &StateError{Got: fmt.Sprintf("%v", v)}
}

// compiledHealth keeps compiled health expressions by source and expression:
// a Work's rules compile once per agent, not at every reconcile. Bounded: past
// maxCompiled, expressions compile every time.
var compiledHealth = struct {
	sync.Mutex
	m map[[2]string]*Health
}{m: map[[2]string]*Health{}}

const maxCompiled = 1024

func healthOf(r lodestarworkv1alpha1.HealthRule) *Health {
	key := [2]string{r.Source, r.Expression}
	compiledHealth.Lock()
	h, ok := compiledHealth.m[key]
	compiledHealth.Unlock()
	if ok {
		return h
	}
	h = CompileHealth(r.Expression, r.Source)
	compiledHealth.Lock()
	if len(compiledHealth.m) < maxCompiled {
		compiledHealth.m[key] = h
	}
	compiledHealth.Unlock()
	return h
}

// With returns a Checker that also applies the health rules a Work carries,
// for the kinds this Checker's own rules (the member's) do not cover. Without
// rules, c itself.
func (c *Checker) With(rules []lodestarworkv1alpha1.HealthRule) *Checker {
	if len(rules) == 0 {
		return c
	}
	out := &Checker{health: map[schema.GroupKind]*Health{}}
	if c != nil {
		out.rules = c.rules
	}
	for _, r := range rules {
		gk := schema.GroupKind{Group: r.Group, Kind: r.Kind}
		if _, own := out.rules[gk]; own {
			continue
		}
		out.health[gk] = healthOf(r)
	}
	return out
}
