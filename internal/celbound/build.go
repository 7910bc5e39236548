package celbound

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/functions"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/lodestar-dev/lodestar/internal/quantity"
)

// What one evaluation may build. CEL's cost units price most functions at one
// unit whatever they return: `s.replace('a', s)` squares a string, a chain of
// eight replace() calls builds 10⁸ bytes, `lists.range(3000000)` three million
// values, and a list added to itself thirty times (cel.bind) has 2³⁰ elements
// without a cost. So the functions that grow a string or a list, or walk one
// in Go at one unit, are checked before they run: what they would build (or
// walk) is at most MaxStringBytes or MaxListElements, or the call fails naming
// the function. What they build is priced by its size (a unit per 10 bytes, a
// unit per element), so the cost limit also bounds everything an evaluation
// builds, not only each value.
const (
	// MaxStringBytes bounds a string an expression builds or walks.
	MaxStringBytes = 1 << 20
	// MaxListElements bounds a list an expression builds or walks.
	MaxListElements = 100_000
)

// sizeCheck returns an error when a call on args would build or walk more than
// the bounds allow.
type sizeCheck func(args []ref.Val) error

// checked are the functions checked before they run, by name: those that
// build values larger than their arguments, and those that walk a list in Go
// at a cost of one unit.
var checked = map[string]sizeCheck{
	"_+_":           checkAdd,
	"replace":       checkReplace,
	"join":          checkJoin,
	"format":        checkFormat,
	"strings.quote": checkQuote,
	"split":         checkSplit,
	"lists.range":   checkRange,
	"flatten":       checkFlatten,
	"quantity":      checkQuantity,
	// Walk their arguments at one unit: the arguments are bounded.
	"sort": checkArgs, "@sortByAssociatedKeys": checkArgs, "distinct": checkArgs, "reverse": checkArgs,
	"slice": checkArgs, "sum": checkArgs, "min": checkArgs, "max": checkArgs, "isSorted": checkArgs,
	"indexOf": checkArgs, "lastIndexOf": checkArgs, "lowerAscii": checkArgs, "upperAscii": checkArgs,
	"trim": checkArgs, "find": checkArgs, "findAll": checkArgs, "math.greatest": checkArgs, "math.least": checkArgs,
}

// priced are the functions whose results are priced by their size.
var priced = map[string]bool{
	"_+_": true, "replace": true, "join": true, "format": true, "strings.quote": true, "split": true,
	"lists.range": true, "flatten": true, "sort": true, "@sortByAssociatedKeys": true, "distinct": true,
	"reverse": true, "slice": true, "lowerAscii": true, "upperAscii": true, "findAll": true,
}

// TooLargeToBuildError is a call refused because of what it would build.
type TooLargeToBuildError struct {
	Function string
	What     string
}

func (e *TooLargeToBuildError) Error() string {
	name := e.Function + "()"
	if e.Function == "_+_" {
		name = "+"
	}
	return fmt.Sprintf("%s would %s: an expression builds and walks strings of at most %d KiB and lists of at most %d elements",
		name, e.What, MaxStringBytes>>10, MaxListElements)
}

// boundedOptions are the program options that check and price the functions
// of env that build and walk values.
func boundedOptions(env *cel.Env) []cel.ProgramOption {
	impls := map[string]*functions.Overload{}
	for _, fn := range env.Functions() {
		if checked[fn.Name()] == nil {
			continue
		}
		bindings, err := fn.Bindings()
		if err != nil {
			continue // Not callable as bound: the planner refuses it too.
		}
		for _, o := range bindings {
			impls[o.Operator] = o
		}
	}
	decorate := func(i interpreter.Interpretable) (interpreter.Interpretable, error) {
		call, ok := i.(interpreter.InterpretableCall)
		if !ok {
			return i, nil
		}
		check := checked[call.Function()]
		if check == nil {
			return i, nil
		}
		o := impls[call.OverloadID()]
		if o == nil {
			o = impls[call.Function()]
		}
		if o == nil {
			return nil, fmt.Errorf("%s has no implementation to bound", call.Function())
		}
		return &boundedCall{InterpretableCall: call, check: check, impl: implOf(o, len(call.Args())), trait: o.OperandTrait}, nil
	}
	return []cel.ProgramOption{cel.CustomDecorator(decorate), cel.CostTracking(sizePricing{})}
}

// implOf is o as a function of n arguments, as the planner calls it.
func implOf(o *functions.Overload, n int) functions.FunctionOp {
	switch {
	case n == 1 && o.Unary != nil:
		return func(args ...ref.Val) ref.Val { return o.Unary(args[0]) }
	case n == 2 && o.Binary != nil:
		return func(args ...ref.Val) ref.Val { return o.Binary(args[0], args[1]) }
	}
	return o.Function
}

// boundedCall is a call that checks its arguments before it runs.
type boundedCall struct {
	interpreter.InterpretableCall
	check sizeCheck
	impl  functions.FunctionOp
	trait int
}

// Eval evaluates the arguments, checks them, and calls the function as CEL's
// own call does (strict: an error or unknown argument is the result).
func (c *boundedCall) Eval(vars interpreter.Activation) ref.Val {
	args := make([]ref.Val, len(c.Args()))
	for i, arg := range c.Args() {
		args[i] = arg.Eval(vars)
		if types.IsUnknownOrError(args[i]) {
			return args[i]
		}
	}
	if err := c.check(args); err != nil {
		var tooLarge *TooLargeToBuildError
		if errors.As(err, &tooLarge) {
			tooLarge.Function = c.Function()
		}
		return types.WrapErr(err)
	}
	if c.impl != nil && (c.trait == 0 || args[0].Type().HasTrait(c.trait)) {
		return c.impl(args...)
	}
	if r, ok := args[0].(traits.Receiver); ok {
		return r.Receive(c.Function(), c.OverloadID(), args[1:])
	}
	return types.NewErr("no such overload: %s", c.Function())
}

// sizePricing prices what the checked functions build by its size.
type sizePricing struct{}

func (sizePricing) CallCost(function, _ string, _ []ref.Val, result ref.Val) *uint64 {
	if !priced[function] || result == nil {
		return nil
	}
	var cost uint64
	switch v := result.(type) {
	case types.String:
		cost = 1 + uint64(math.Ceil(float64(len(v))*0.1))
	case traits.Lister:
		if function == "_+_" {
			return nil // A list added to a list is a view of both: O(1).
		}
		cost = 1 + uint64(sizeOf(v))
	default:
		return nil
	}
	return &cost
}

// sizeOf is a list's, map's or string's size (elements, or bytes), 0 for
// other values.
func sizeOf(v ref.Val) int64 {
	switch t := v.(type) {
	case types.String:
		return int64(len(t))
	case types.Bytes:
		return int64(len(t))
	case traits.Sizer:
		if n, ok := t.Size().(types.Int); ok {
			return int64(n)
		}
	}
	return 0
}

// bounded checks one value that is walked or built.
func bounded(v ref.Val, what string) error {
	switch v.(type) {
	case types.String, types.Bytes:
		if n := sizeOf(v); n > MaxStringBytes {
			return &TooLargeToBuildError{What: fmt.Sprintf("%s a string of %d bytes", what, n)}
		}
	case traits.Lister, traits.Mapper:
		if n := sizeOf(v); n > MaxListElements {
			return &TooLargeToBuildError{What: fmt.Sprintf("%s a list or map of %d elements", what, n)}
		}
	}
	return nil
}

func checkArgs(args []ref.Val) error {
	for _, a := range args {
		if err := bounded(a, "walk"); err != nil {
			return err
		}
	}
	return nil
}

func checkAdd(args []ref.Val) error {
	if len(args) != 2 {
		return nil
	}
	switch args[0].(type) {
	case types.String, types.Bytes:
		if n := sizeOf(args[0]) + sizeOf(args[1]); n > MaxStringBytes {
			return &TooLargeToBuildError{What: fmt.Sprintf("build a string of %d bytes", n)}
		}
	case traits.Lister:
		if n := sizeOf(args[0]) + sizeOf(args[1]); n > MaxListElements {
			return &TooLargeToBuildError{What: fmt.Sprintf("build a list of %d elements", n)}
		}
	}
	return nil
}

// checkReplace computes the length replace() would return.
func checkReplace(args []ref.Val) error {
	if err := checkArgs(args); err != nil || len(args) < 3 {
		return err
	}
	s, okS := args[0].(types.String)
	old, okO := args[1].(types.String)
	repl, okN := args[2].(types.String)
	if !okS || !okO || !okN {
		return nil // CEL's own call says what is wrong.
	}
	count := int64(strings.Count(string(s), string(old)))
	if old == "" {
		count = int64(utf8.RuneCountInString(string(s))) + 1
	}
	if len(args) > 3 {
		if n, ok := args[3].(types.Int); ok && n >= 0 && int64(n) < count {
			count = int64(n)
		}
	}
	if n := int64(len(s)) + count*(int64(len(repl))-int64(len(old))); n > MaxStringBytes {
		return &TooLargeToBuildError{What: fmt.Sprintf("build a string of %d bytes", n)}
	}
	return nil
}

// checkJoin adds up the strings join() would join.
func checkJoin(args []ref.Val) error {
	if err := checkArgs(args); err != nil {
		return err
	}
	l, ok := args[0].(traits.Lister)
	if !ok {
		return nil
	}
	var sep int64
	if len(args) > 1 {
		sep = sizeOf(args[1])
	}
	var n int64
	for it := l.Iterator(); it.HasNext() == types.True; {
		n += sizeOf(it.Next()) + sep
		if n > MaxStringBytes {
			return &TooLargeToBuildError{What: fmt.Sprintf("build a string of more than %d bytes", n)}
		}
	}
	return nil
}

// checkFormat bounds what format() writes by what its arguments hold.
func checkFormat(args []ref.Val) error {
	if err := checkArgs(args); err != nil {
		return err
	}
	n := sizeOf(args[0])
	if len(args) > 1 {
		n += deepSize(args[1], MaxStringBytes)
	}
	if n > MaxStringBytes {
		return &TooLargeToBuildError{What: fmt.Sprintf("build a string of more than %d bytes", n)}
	}
	return nil
}

// deepSize is about how many bytes v takes written out, counted up to limit.
func deepSize(v ref.Val, limit int64) int64 {
	switch t := v.(type) {
	case types.String, types.Bytes:
		return sizeOf(t)
	case traits.Lister:
		var n int64
		for it := t.Iterator(); it.HasNext() == types.True && n <= limit; {
			n += 2 + deepSize(it.Next(), limit-n)
		}
		return n
	case traits.Mapper:
		var n int64
		for it := t.Iterator(); it.HasNext() == types.True && n <= limit; {
			k := it.Next()
			n += 4 + deepSize(k, limit-n) + deepSize(t.Get(k), limit-n)
		}
		return n
	}
	return 24 // a number, a bool, a timestamp written out
}

func checkQuote(args []ref.Val) error {
	// An escaped character takes at most 6 bytes (\u0000) for each byte.
	if n := 6*sizeOf(args[0]) + 2; n > MaxStringBytes {
		return &TooLargeToBuildError{What: fmt.Sprintf("build a string of up to %d bytes", n)}
	}
	return nil
}

// checkSplit counts the strings split() would return.
func checkSplit(args []ref.Val) error {
	if err := checkArgs(args); err != nil || len(args) < 2 {
		return err
	}
	s, okS := args[0].(types.String)
	sep, okP := args[1].(types.String)
	if !okS || !okP {
		return nil
	}
	count := int64(strings.Count(string(s), string(sep))) + 1
	if sep == "" {
		count = int64(utf8.RuneCountInString(string(s)))
	}
	if len(args) > 2 {
		if n, ok := args[2].(types.Int); ok && n >= 0 && int64(n) < count {
			count = int64(n)
		}
	}
	if count > MaxListElements {
		return &TooLargeToBuildError{What: fmt.Sprintf("build a list of %d elements", count)}
	}
	return nil
}

func checkRange(args []ref.Val) error {
	if n, ok := args[0].(types.Int); ok && int64(n) > MaxListElements {
		return &TooLargeToBuildError{What: fmt.Sprintf("build a list of %d elements", int64(n))}
	}
	return nil
}

// checkFlatten counts the elements flatten() would return, to its depth.
func checkFlatten(args []ref.Val) error {
	if err := checkArgs(args); err != nil {
		return err
	}
	depth := int64(1)
	if len(args) > 1 {
		if d, ok := args[1].(types.Int); ok {
			depth = int64(d)
		}
	}
	if n := flatSize(args[0], depth, MaxListElements); n > MaxListElements {
		return &TooLargeToBuildError{What: fmt.Sprintf("build a list of more than %d elements", n)}
	}
	return nil
}

// flatSize counts the elements of v flattened to depth, up to limit.
func flatSize(v ref.Val, depth, limit int64) int64 {
	l, ok := v.(traits.Lister)
	if !ok {
		return 1
	}
	if depth <= 0 {
		return sizeOf(l)
	}
	var n int64
	for it := l.Iterator(); it.HasNext() == types.True && n <= limit; {
		e := it.Next()
		if _, inner := e.(traits.Lister); inner {
			n += flatSize(e, depth-1, limit-n)
			continue
		}
		n++
	}
	return n
}

// checkQuantity refuses quantity() of a quantity out of bounds:
// quantity('1e20000000') takes minutes to compare.
func checkQuantity(args []ref.Val) error {
	s, ok := args[0].(types.String)
	if !ok {
		return nil
	}
	if !isQuantity(string(s)) {
		return nil // Not a quantity at all: CEL's own quantity() says so.
	}
	_, err := quantity.Parse(string(s))
	return err
}

// isQuantity tells whether s parses as a quantity, bounded or not.
func isQuantity(s string) bool {
	_, err := resource.ParseQuantity(s)
	return err == nil
}
