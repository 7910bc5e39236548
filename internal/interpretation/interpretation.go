// Package interpretation reads objects of custom kinds as a hub's
// ResourceInterpretations say, in bounded CEL: their health (evaluated by the
// agents, readiness.Health), their replicas and what one needs (so that a
// Placement divides them), what other objects they need, and how their copies'
// statuses sum up on the hub. It is pure: the controllers list the
// interpretations and hand them here.
package interpretation

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"sync"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/celbound"
	"github.com/lodestar-dev/lodestar/internal/diff"
	"github.com/lodestar-dev/lodestar/internal/division"
	"github.com/lodestar-dev/lodestar/internal/quantity"
	"github.com/lodestar-dev/lodestar/internal/readiness"
)

// Cost is the cost limit of one evaluation of a hub-side expression
// (requests, dependencies, aggregate), as a health expression's.
const Cost = readiness.HealthCost

// ExpressionError is an expression of an interpretation that does not
// compile or fails: Field names it (spec.health.expression).
type ExpressionError struct {
	Name, Field string
	Err         error
}

func (e *ExpressionError) Error() string {
	return fmt.Sprintf("ResourceInterpretation %s: %s: %v", e.Name, e.Field, e.Err)
}

func (e *ExpressionError) Unwrap() error { return e.Err }

// Interpretation is a compiled ResourceInterpretation.
type Interpretation struct {
	Name string
	Kind schema.GroupKind
	Spec placementv1alpha1.ResourceInterpretationSpec
	// Err is the first expression that does not compile, or nil.
	Err error

	health                            *readiness.Health
	path                              diff.Pointer
	requests, dependencies, aggregate cel.Program
}

var (
	selfEnv = mustEnv(append(readiness.Extensions(), cel.Variable("self", cel.DynType))...)
	aggEnv  = mustEnv(append(readiness.Extensions(), cel.Variable("self", cel.DynType), cel.Variable("clusters", cel.ListType(cel.DynType)))...)
)

func mustEnv(opts ...cel.EnvOption) *cel.Env {
	env, err := cel.NewEnv(opts...)
	if err != nil {
		panic(err) // A static environment cannot fail.
	}
	return env
}

// Compile compiles ri's expressions; Err says which one does not compile.
func Compile(ri *placementv1alpha1.ResourceInterpretation) *Interpretation {
	in := &Interpretation{Name: ri.Name, Kind: schema.GroupKind{Group: ri.Spec.Target.Group, Kind: ri.Spec.Target.Kind}, Spec: *ri.Spec.DeepCopy()}
	var errs []error
	fail := func(field string, err error) {
		if err != nil {
			errs = append(errs, &ExpressionError{Name: ri.Name, Field: field, Err: err})
		}
	}
	s := ri.Spec
	if s.Health != nil {
		in.health = readiness.CompileHealth(s.Health.Expression, "ResourceInterpretation "+ri.Name)
		fail("spec.health.expression", in.health.Err())
	}
	if s.Replicas != nil {
		var err error
		in.path, err = diff.ParsePointer(s.Replicas.Path)
		fail("spec.replicas.path", err)
		if s.Replicas.Requests != "" {
			in.requests, err = compile(selfEnv, s.Replicas.Requests)
			fail("spec.replicas.requests", err)
		}
	}
	if s.Dependencies != nil {
		var err error
		in.dependencies, err = compile(selfEnv, s.Dependencies.Expression)
		fail("spec.dependencies.expression", err)
	}
	if s.Aggregate != nil {
		var err error
		in.aggregate, err = compile(aggEnv, s.Aggregate.Expression)
		fail("spec.aggregate.expression", err)
	}
	in.Err = errors.Join(errs...)
	return in
}

func compile(env *cel.Env, expr string) (cel.Program, error) {
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	return env.Program(ast, celbound.ProgramOptions(env, Cost)...)
}

// eval runs prg on vars and converts its result to JSON, within bounds.
func (in *Interpretation) eval(field string, prg cel.Program, vars map[string]any) (any, error) {
	out, err := celbound.Eval(prg, vars)
	if err == nil {
		var v any
		if v, err = celbound.JSON(out); err == nil {
			return v, nil
		}
	}
	return nil, &ExpressionError{Name: in.Name, Field: field, Err: err}
}

// HealthRule is the rule the agents evaluate for the kind, or false when the
// interpretation says nothing of health. An invalid expression travels too:
// the agents report the kind's objects Degraded, naming it.
func (in *Interpretation) HealthRule() (lodestarworkv1alpha1.HealthRule, bool) {
	if in.Spec.Health == nil {
		return lodestarworkv1alpha1.HealthRule{}, false
	}
	return lodestarworkv1alpha1.HealthRule{Group: in.Kind.Group, Kind: in.Kind.Kind, Expression: in.Spec.Health.Expression, Source: "ResourceInterpretation " + in.Name}, true
}

// Health is obj's health, as an agent evaluates it; nil when the
// interpretation says nothing of health.
func (in *Interpretation) Health(obj *unstructured.Unstructured) *readiness.Result {
	if in.health == nil {
		return nil
	}
	r := in.health.Evaluate(obj)
	return &r
}

// HasReplicas tells whether the interpretation says where the replicas are.
func (in *Interpretation) HasReplicas() bool { return in.Spec.Replicas != nil }

// Replicas reads obj's replica count at the path (1 when the object does not
// have the field) and what one replica requests.
func (in *Interpretation) Replicas(obj map[string]any) (int64, map[string]resource.Quantity, error) {
	if in.Spec.Replicas == nil {
		return 0, nil, fmt.Errorf("ResourceInterpretation %s says nothing of replicas", in.Name)
	}
	if in.Err != nil {
		return 0, nil, in.Err
	}
	total := int64(1)
	if v, ok := in.path.Get(obj); ok {
		n, isInt := integer(v)
		if !isInt {
			return 0, nil, &ExpressionError{Name: in.Name, Field: "spec.replicas.path", Err: fmt.Errorf("%s is %v, not a whole number", in.Spec.Replicas.Path, v)}
		}
		total = n
	}
	if in.requests == nil {
		return total, nil, nil
	}
	v, err := in.eval("spec.replicas.requests", in.requests, map[string]any{"self": obj})
	if err != nil {
		return 0, nil, err
	}
	requests, err := quantities(v)
	if err != nil {
		return 0, nil, &ExpressionError{Name: in.Name, Field: "spec.replicas.requests", Err: err}
	}
	return total, requests, nil
}

// WriteReplicas sets obj's replica count at the path to n.
func (in *Interpretation) WriteReplicas(obj map[string]any, n int64) {
	in.path.Set(obj, n)
}

// MaxRequestEntries bounds the entries a requests expression yields.
const MaxRequestEntries = 256

// quantities reads what one replica requests: a map of resource names to
// quantities (strings or numbers), or a list of them, added up; an entry
// {"count": n, "requests": {...}} counts its requests n times (a group of n
// pods alike).
func quantities(v any) (map[string]resource.Quantity, error) {
	out := map[string]resource.Quantity{}
	list, isList := v.([]any)
	if !isList {
		list = []any{v}
	}
	if len(list) > MaxRequestEntries {
		return nil, fmt.Errorf("it yields %d entries, more than %d", len(list), MaxRequestEntries)
	}
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("it yields %v, not a map of resource names to quantities", e)
		}
		count := int64(1)
		if r, ok := m["requests"].(map[string]any); ok {
			n, isInt := integer(m["count"])
			if !isInt || n < 0 || n > 1<<20 {
				return nil, fmt.Errorf("an entry's count %v is not a whole number from 0 to %d", m["count"], 1<<20)
			}
			m, count = r, n
		}
		if err := add(out, m, count); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// add adds count times the quantities of m to out.
func add(out map[string]resource.Quantity, m map[string]any, count int64) error {
	for _, name := range slices.Sorted(maps.Keys(m)) {
		s := fmt.Sprint(m[name])
		q, err := quantity.Parse(s)
		if err != nil {
			return fmt.Errorf("%s: %q is not a quantity", name, s)
		}
		sum := out[name]
		switch {
		case q.Sign() < 0:
			return fmt.Errorf("%s: %s is negative", name, s)
		case count == 1:
			sum.Add(q) // the division refuses what is beyond it (division.MaxRequest), exactly
		case q.Cmp(*division.MaxRequest) > 0:
			return fmt.Errorf("%s: %s is more than a division takes (at most %s)", name, s, division.MaxRequest.String())
		default:
			// Within MaxRequest, its milli-units fit an int64 (2⁶⁰): a product
			// past the int64 is refused, not wrapped.
			milli := q.MilliValue()
			if milli > 0 && count > math.MaxInt64/milli {
				return fmt.Errorf("%s: %d times %s is more than a division takes", name, count, s)
			}
			sum.Add(*resource.NewMilliQuantity(milli*count, q.Format))
		}
		out[name] = sum
	}
	return nil
}

func integer(v any) (int64, bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case int:
		return int64(v), true
	case float64:
		return int64(v), v == float64(int64(v))
	}
	return 0, false
}

// Dependency is an object of the same namespace another one needs.
type Dependency struct {
	Group string `json:"group,omitempty"`
	Kind  string `json:"kind"`
	Name  string `json:"name"`
}

func (d Dependency) String() string {
	if d.Group == "" {
		return d.Kind + "/" + d.Name
	}
	return d.Kind + "." + d.Group + "/" + d.Name
}

// Dependencies are the objects obj needs, sorted and without repeats; none
// when the interpretation says nothing of dependencies.
func (in *Interpretation) Dependencies(obj map[string]any) ([]Dependency, error) {
	if in.Spec.Dependencies == nil {
		return nil, nil
	}
	if in.Err != nil {
		return nil, in.Err
	}
	v, err := in.eval("spec.dependencies.expression", in.dependencies, map[string]any{"self": obj})
	if err != nil {
		return nil, err
	}
	list, ok := v.([]any)
	if !ok {
		return nil, &ExpressionError{Name: in.Name, Field: "spec.dependencies.expression", Err: fmt.Errorf("it yields %v, not a list", v)}
	}
	seen := map[Dependency]bool{}
	for _, e := range list {
		m, _ := e.(map[string]any)
		d := Dependency{}
		d.Group, _ = m["group"].(string)
		d.Kind, _ = m["kind"].(string)
		d.Name, _ = m["name"].(string)
		if d.Kind == "" || d.Name == "" {
			return nil, &ExpressionError{Name: in.Name, Field: "spec.dependencies.expression", Err: fmt.Errorf("an entry %v has no kind or no name", e)}
		}
		seen[d] = true
	}
	out := slices.Collect(maps.Keys(seen))
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// ClusterStatus is one cluster's copy's status, as aggregate reads it.
type ClusterStatus struct {
	Name   string
	Status map[string]any
}

// HasAggregate tells whether the interpretation says how statuses sum up.
func (in *Interpretation) HasAggregate() bool { return in.Spec.Aggregate != nil }

// Aggregate is the hub object's status from its copies' statuses.
func (in *Interpretation) Aggregate(hub map[string]any, clusters []ClusterStatus) (map[string]any, error) {
	if in.Spec.Aggregate == nil {
		return nil, fmt.Errorf("ResourceInterpretation %s says nothing of aggregation", in.Name)
	}
	if in.Err != nil {
		return nil, in.Err
	}
	list := make([]any, 0, len(clusters))
	for _, c := range clusters {
		status := c.Status
		if status == nil {
			status = map[string]any{}
		}
		list = append(list, map[string]any{"name": c.Name, "status": status})
	}
	v, err := in.eval("spec.aggregate.expression", in.aggregate, map[string]any{"self": hub, "clusters": list})
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &ExpressionError{Name: in.Name, Field: "spec.aggregate.expression", Err: fmt.Errorf("it yields %v, not a map (a status)", v)}
	}
	return m, nil
}

// Set is the interpretations in use, by kind: of two for one kind, the older
// (then the first by name).
type Set struct {
	byKind map[schema.GroupKind]*Interpretation
	// conflicts names, by interpretation, the one used instead of it.
	conflicts map[string]string
}

// For is the interpretation of gk, or nil. A nil Set has none.
func (s *Set) For(gk schema.GroupKind) *Interpretation {
	if s == nil {
		return nil
	}
	return s.byKind[gk]
}

// Len is how many kinds are interpreted.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.byKind)
}

// Conflict names the interpretation used for name's kind instead of it, or "".
func (s *Set) Conflict(name string) string {
	if s == nil {
		return ""
	}
	return s.conflicts[name]
}

// Cache compiles each ResourceInterpretation once per generation.
type Cache struct {
	mu       sync.Mutex
	compiled map[types.UID]*cached
}

type cached struct {
	generation int64
	in         *Interpretation
}

// Set compiles items (those not compiled at their generation yet) into the
// Set in use. A nil Cache compiles every time.
func (c *Cache) Set(items []placementv1alpha1.ResourceInterpretation) *Set {
	sort.Slice(items, func(i, j int) bool {
		a, b := items[i].CreationTimestamp, items[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return items[i].Name < items[j].Name
	})
	s := &Set{byKind: map[schema.GroupKind]*Interpretation{}, conflicts: map[string]string{}}
	live := map[types.UID]bool{}
	for i := range items {
		in := c.Compile(&items[i])
		live[items[i].UID] = true
		if first, ok := s.byKind[in.Kind]; ok {
			s.conflicts[in.Name] = first.Name
			continue
		}
		s.byKind[in.Kind] = in
	}
	c.forget(live)
	return s
}

// Compile is ri compiled, once per generation.
func (c *Cache) Compile(ri *placementv1alpha1.ResourceInterpretation) *Interpretation {
	if c == nil {
		return Compile(ri)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.compiled[ri.UID]; ok && e.generation == ri.Generation && ri.UID != "" {
		return e.in
	}
	in := Compile(ri)
	if c.compiled == nil {
		c.compiled = map[types.UID]*cached{}
	}
	c.compiled[ri.UID] = &cached{generation: ri.Generation, in: in}
	return in
}

// forget drops the interpretations no longer listed.
func (c *Cache) forget(live map[types.UID]bool) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for uid := range c.compiled {
		if !live[uid] {
			delete(c.compiled, uid)
		}
	}
}

// Replicas is how to read and write gk's replicas (division.Kinds), or nil
// when no interpretation in use says.
func (s *Set) Replicas(gk schema.GroupKind) division.Replicas {
	if in := s.For(gk); in != nil && in.HasReplicas() {
		return in
	}
	return nil
}

// HealthRules are the health rules of the interpreted kinds among kinds,
// sorted by kind: what a Work of those kinds carries to its agent.
func (s *Set) HealthRules(kinds []schema.GroupKind) []lodestarworkv1alpha1.HealthRule {
	var out []lodestarworkv1alpha1.HealthRule
	for _, gk := range kinds {
		if in := s.For(gk); in != nil {
			if r, ok := in.HealthRule(); ok {
				out = append(out, r)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group+"/"+out[i].Kind < out[j].Group+"/"+out[j].Kind })
	return out
}
