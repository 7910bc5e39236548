// Package feedback reads the status values that a Work's feedback rules name from
// the objects an agent applied, and encodes them, within a size budget, into the
// message of a manifest's StatusFeedback condition.
//
// The encoding, which readers of Work status can rely on: the condition of type
// StatusFeedback has reason Reported (or Trimmed when values were left out to stay
// within the budget) and a message that is a JSON object
//
//	{"values": {"<name>": <value>, ...}, "trimmed": ["<name>", ...], "errors": {"<name>": "<why>"}}
//
// where "trimmed" and "errors" appear only when not empty. A whole-status rule
// reports the value under the name "status".
package feedback

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/jsonpath"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/celbound"
	"github.com/lodestar-dev/lodestar/internal/message"
)

// WholeStatusName is the name under which a whole-status rule reports.
const WholeStatusName = "status"

var secretKind = schema.GroupKind{Kind: "Secret"}

type field struct {
	name string
	path *jsonpath.JSONPath
	expr cel.Program
}

type rule struct {
	whole  bool
	fields []field
}

// Rules are compiled feedback rules, by kind.
type Rules struct {
	byKind map[schema.GroupKind]rule
}

var celEnv = func() *cel.Env {
	env, err := cel.NewEnv(cel.Variable("self", cel.DynType))
	if err != nil {
		panic(err) // A static environment cannot fail.
	}
	return env
}()

// Compile checks and compiles rules. A rule for Secrets is refused: Secret data
// never leaves the member through status.
func Compile(rules []lodestarworkv1alpha1.FeedbackRule) (*Rules, error) {
	out := &Rules{byKind: map[schema.GroupKind]rule{}}
	for i, r := range rules {
		gk := schema.GroupKind{Group: r.Group, Kind: r.Kind}
		if gk == secretKind {
			return nil, fmt.Errorf("feedback[%d]: status feedback is never collected from Secrets", i)
		}
		if r.WholeStatus == (len(r.Fields) > 0) {
			return nil, fmt.Errorf("feedback[%d]: exactly one of fields and wholeStatus must be set", i)
		}
		cr := rule{whole: r.WholeStatus}
		for j, f := range r.Fields {
			cf := field{name: f.Name}
			switch {
			case (f.JSONPath == "") == (f.CEL == ""):
				return nil, fmt.Errorf("feedback[%d].fields[%d]: exactly one of jsonPath and cel must be set", i, j)
			case f.JSONPath != "":
				cf.path = jsonpath.New(f.Name).AllowMissingKeys(true)
				p := f.JSONPath
				if !strings.HasPrefix(p, "{") {
					p = "{" + p + "}"
				}
				if err := cf.path.Parse(p); err != nil {
					return nil, fmt.Errorf("feedback[%d].fields[%d].jsonPath: %w", i, j, err)
				}
			default:
				ast, iss := celEnv.Compile(f.CEL)
				if iss.Err() != nil {
					return nil, fmt.Errorf("feedback[%d].fields[%d].cel: %w", i, j, iss.Err())
				}
				prg, err := celEnv.Program(ast, celbound.ProgramOptions(celEnv, 100000)...)
				if err != nil {
					return nil, fmt.Errorf("feedback[%d].fields[%d].cel: %w", i, j, err)
				}
				cf.expr = prg
			}
			cr.fields = append(cr.fields, cf)
		}
		out.byKind[gk] = cr
	}
	return out, nil
}

// Values returns the feedback values of obj, the errors of fields that could not
// be read, and false when no rule names obj's kind.
func (r *Rules) Values(obj *unstructured.Unstructured) (map[string]any, map[string]string, bool) {
	if r == nil {
		return nil, nil, false
	}
	gk := obj.GroupVersionKind().GroupKind()
	rl, ok := r.byKind[gk]
	if !ok || gk == secretKind {
		return nil, nil, false
	}
	values, errs := map[string]any{}, map[string]string{}
	if rl.whole {
		if st, ok := obj.Object["status"]; ok {
			values[WholeStatusName] = st
		}
		return values, errs, true
	}
	for _, f := range rl.fields {
		v, found, err := f.read(obj)
		switch {
		case err != nil:
			errs[f.name] = err.Error()
		case found:
			values[f.name] = v
		}
	}
	return values, errs, true
}

func (f field) read(obj *unstructured.Unstructured) (any, bool, error) {
	if f.expr != nil {
		out, err := celbound.Eval(f.expr, map[string]any{"self": obj.Object})
		if err != nil {
			return nil, false, err
		}
		v, err := celbound.JSON(out)
		if err != nil {
			return nil, false, fmt.Errorf("the value cannot be reported: %w", err)
		}
		return v, true, nil
	}
	results, err := f.path.FindResults(obj.Object)
	if err != nil {
		return nil, false, err
	}
	var vals []any
	for _, rs := range results {
		for _, v := range rs {
			vals = append(vals, v.Interface())
		}
	}
	switch len(vals) {
	case 0:
		return nil, false, nil
	case 1:
		return vals[0], true, nil
	}
	return vals, true, nil
}

// encoded is the JSON of the StatusFeedback condition's message.
type encoded struct {
	Values  map[string]json.RawMessage `json:"values"`
	Trimmed []string                   `json:"trimmed,omitempty"`
	Errors  map[string]string          `json:"errors,omitempty"`
}

// Encode encodes values and errors into at most budget bytes, leaving out (and
// naming in "trimmed") the values that do not fit, largest last. It returns the
// message and whether anything was left out.
func Encode(values map[string]any, errs map[string]string, budget int) (string, bool) {
	type entry struct {
		name string
		raw  json.RawMessage
	}
	entries := make([]entry, 0, len(values))
	for name, v := range values {
		raw, err := json.Marshal(v)
		if err != nil {
			errs = withError(errs, name, "the value cannot be encoded")
			continue
		}
		entries = append(entries, entry{name, raw})
	}
	// Smallest first, so that as many values as possible fit; by name when equal.
	sort.Slice(entries, func(i, j int) bool {
		if len(entries[i].raw) != len(entries[j].raw) {
			return len(entries[i].raw) < len(entries[j].raw)
		}
		return entries[i].name < entries[j].name
	})

	m := encoded{Values: map[string]json.RawMessage{}}
	for name, e := range errs {
		m.Errors = withError(m.Errors, name, message.Truncate(e, 256))
	}
	size := func() int { b, _ := json.Marshal(m); return len(b) }
	if size() > budget {
		m.Errors = nil
	}
	for _, e := range entries {
		m.Values[e.name] = e.raw
		if size() > budget {
			delete(m.Values, e.name)
			m.Trimmed = append(m.Trimmed, e.name)
		}
	}
	sort.Strings(m.Trimmed)
	for size() > budget && len(m.Trimmed) > 0 {
		m.Trimmed = m.Trimmed[:len(m.Trimmed)-1]
	}
	b, _ := json.Marshal(m)
	return string(b), len(m.Trimmed) > 0 || len(entries) > len(m.Values)
}

func withError(errs map[string]string, name, msg string) map[string]string {
	if errs == nil {
		errs = map[string]string{}
	}
	errs[name] = msg
	return errs
}

// Decode reads the values of a StatusFeedback condition's message; numbers are
// json.Number, so that integers stay exact.
func Decode(msg string) (map[string]any, error) {
	var m struct {
		Values map[string]any `json:"values"`
	}
	dec := json.NewDecoder(strings.NewReader(msg))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("the feedback message is not the documented JSON: %w", err)
	}
	if m.Values == nil {
		m.Values = map[string]any{}
	}
	return m.Values, nil
}
