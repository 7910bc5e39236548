// Package celbound runs tenant-supplied CEL within bounds: a cost limit, a
// deadline, and a size limit on the result as it is converted to JSON. The cost
// limit alone does not bound a result: `L.map(a, L.map(b, L))` costs about
// len(L)² but yields len(L)³ values, as references to one list, and only their
// conversion to JSON makes them real. The hub's overrides and scheduling
// expressions and the agent's status feedback all evaluate through here.
package celbound

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"google.golang.org/protobuf/types/known/structpb"
)

const (
	// Deadline is how long one evaluation may run. CEL checks it every 100
	// iterations of a comprehension; the cost limit is what bounds evaluation
	// (comprehensions nested in one that goes on after an error outlast the
	// deadline), this stops the rest.
	Deadline = time.Second
	// MaxResultBytes bounds a result's JSON encoding: no value an override or a
	// feedback rule writes needs more, and a Work carries at most 768 KiB.
	MaxResultBytes = 64 << 10
)

// ProgramOptions are the options every tenant-supplied program of env is
// compiled with: cost as given, checks for the deadline as comprehensions
// iterate, and the bounds on what it builds (build.go).
func ProgramOptions(env *cel.Env, costLimit uint64) []cel.ProgramOption {
	return append([]cel.ProgramOption{cel.CostLimit(costLimit), cel.InterruptCheckFrequency(100)}, boundedOptions(env)...)
}

// ErrDeadline is an evaluation stopped at the Deadline: unlike other errors, it
// may not happen again on a less busy machine.
var ErrDeadline = errors.New("the expression ran longer than its deadline")

// ErrCostLimit is an evaluation stopped at its cost limit: it fails again on
// the same input, wherever it runs.
var ErrCostLimit = errors.New("the expression exceeded its cost limit")

// Eval evaluates prg on vars within Deadline; a CEL error value is an error.
func Eval(prg cel.Program, vars map[string]any) (ref.Val, error) {
	ctx, cancel := context.WithTimeout(context.Background(), Deadline)
	defer cancel()
	out, _, err := prg.ContextEval(ctx, vars)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w (%v)", ErrDeadline, Deadline)
		}
		if strings.Contains(err.Error(), "cost limit exceeded") { // cel-go's message: it has no error value of its own
			return nil, fmt.Errorf("%w: %w", ErrCostLimit, err)
		}
		return nil, err
	}
	if types.IsError(out) {
		return nil, fmt.Errorf("%v", out)
	}
	return out, nil
}

// TooLargeError says that a result's JSON is larger than MaxResultBytes.
type TooLargeError struct{ Limit int }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the result is larger than %d KiB", e.Limit>>10)
}

// JSON converts a CEL value to its JSON form (null, bool, int64, uint64,
// float64, string, []any, map[string]any), counting the bytes of its encoding
// as it goes and stopping with a *TooLargeError past MaxResultBytes.
func JSON(v ref.Val) (any, error) {
	c := converter{left: MaxResultBytes}
	return c.convert(v)
}

type converter struct{ left int }

// spend takes n bytes from the budget.
func (c *converter) spend(n int) error {
	c.left -= n
	if c.left < 0 {
		return &TooLargeError{Limit: MaxResultBytes}
	}
	return nil
}

func (c *converter) convert(v ref.Val) (any, error) {
	switch v.Type() {
	case types.NullType:
		return nil, c.spend(4)
	case types.BoolType:
		return bool(v.(types.Bool)), c.spend(5)
	case types.IntType:
		n := int64(v.(types.Int))
		return n, c.spend(len(strconv.FormatInt(n, 10)))
	case types.UintType:
		n := uint64(v.(types.Uint))
		return n, c.spend(len(strconv.FormatUint(n, 10)))
	case types.DoubleType:
		d := float64(v.(types.Double))
		if math.IsNaN(d) || math.IsInf(d, 0) {
			return nil, fmt.Errorf("the result %v is not a JSON number", d)
		}
		return d, c.spend(len(strconv.FormatFloat(d, 'g', -1, 64)))
	case types.StringType:
		s := string(v.(types.String))
		return s, c.spend(len(s) + 2)
	}
	switch t := v.(type) {
	case traits.Mapper:
		return c.object(t)
	case traits.Lister:
		return c.array(t)
	}
	return c.scalar(v)
}

// scalar converts what CEL knows a JSON form of, such as a timestamp (a string)
// or bytes (base64).
func (c *converter) scalar(v ref.Val) (any, error) {
	pb, err := v.ConvertToNative(reflect.TypeFor[*structpb.Value]())
	if err != nil {
		return nil, fmt.Errorf("the result is a %s, which has no JSON form (convert it with string(), int() or double())", v.Type().TypeName())
	}
	out := pb.(*structpb.Value).AsInterface()
	if s, ok := out.(string); ok {
		return s, c.spend(len(s) + 2)
	}
	return out, c.spend(8)
}

func (c *converter) object(m traits.Mapper) (any, error) {
	out := map[string]any{}
	if err := c.spend(2); err != nil {
		return nil, err
	}
	for it := m.Iterator(); it.HasNext() == types.True; {
		k := it.Next()
		key, ok := k.(types.String)
		if !ok {
			return nil, fmt.Errorf("a map key %v is not a string", k)
		}
		if err := c.spend(len(key) + 4); err != nil {
			return nil, err
		}
		val, err := c.convert(m.Get(k))
		if err != nil {
			return nil, err
		}
		out[string(key)] = val
	}
	return out, nil
}

func (c *converter) array(l traits.Lister) (any, error) {
	out := []any{}
	if err := c.spend(2); err != nil {
		return nil, err
	}
	for it := l.Iterator(); it.HasNext() == types.True; {
		if err := c.spend(1); err != nil {
			return nil, err
		}
		val, err := c.convert(it.Next())
		if err != nil {
			return nil, err
		}
		out = append(out, val)
	}
	return out, nil
}
