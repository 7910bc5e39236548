// Package overrides renders a Placement's placed objects for one cluster: its
// override rules, in order, each on the clusters and objects it selects. The
// work generator and `kubectl lodestar render` both call it, so that what the
// preview shows is what the cluster's Work holds.
package overrides

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/diff"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/rbacguard"
	"github.com/lodestar-dev/lodestar/internal/scheduling"
)

// Set is a Placement's overrides, compiled.
type Set struct {
	rules []*rule
}

type rule struct {
	name     string
	selector labels.Selector // nil: any cluster
	names    map[string]bool // nil: any cluster
	expr     *scheduling.Expression
	targets  targets
	ops      []operation
	merge    *mergePatch
	image    *placementv1alpha1.ImageOverride
	remove   []string
	delete   bool
}

type target struct {
	group, kind, name string
	hasGroupKind      bool
	selector          labels.Selector // nil: any labels
}

type operation struct {
	spec  placementv1alpha1.JSONPatchOperation
	value json.RawMessage // literal
	expr  *scheduling.Expression
}

type mergePatch struct {
	literal json.RawMessage
	expr    *scheduling.Expression
}

// Compile checks and compiles overrides: what the API server checks at admission
// (again, for files rendered before they are applied) and what only the
// controller can check, the CEL expressions and the literal values. The error
// names the rule.
func Compile(overrides []placementv1alpha1.Override) (*Set, error) {
	s := &Set{}
	seen := map[string]bool{}
	for i := range overrides {
		o := &overrides[i]
		r, err := compileRule(o)
		if err != nil {
			return nil, fmt.Errorf("spec.overrides[%d] (%s): %w", i, o.Name, err)
		}
		if seen[o.Name] {
			return nil, fmt.Errorf("spec.overrides[%d]: the name %s is used twice", i, o.Name)
		}
		seen[o.Name] = true
		s.rules = append(s.rules, r)
	}
	return s, nil
}

// Empty tells whether the set changes nothing.
func (s *Set) Empty() bool { return s == nil || len(s.rules) == 0 }

func compileRule(o *placementv1alpha1.Override) (*rule, error) {
	r := &rule{name: o.Name, image: o.Image, delete: o.Delete}
	if o.Name == "" {
		return nil, fmt.Errorf("a rule needs a name")
	}
	actions := 0
	for _, has := range []bool{len(o.JSONPatch) > 0, o.MergePatch != nil, o.Image != nil, len(o.Remove) > 0, o.Delete} {
		if has {
			actions++
		}
	}
	if actions != 1 {
		return nil, fmt.Errorf("an override has exactly one action: jsonPatch, mergePatch, image, remove or delete: true")
	}
	var err error
	if o.ClusterSelector != nil {
		if r.selector, err = metav1.LabelSelectorAsSelector(o.ClusterSelector); err != nil {
			return nil, fmt.Errorf("clusterSelector: %w", err)
		}
	}
	if len(o.ClusterNames) > 0 {
		r.names = map[string]bool{}
		for _, n := range o.ClusterNames {
			r.names[n] = true
		}
	}
	if o.ClusterExpression != "" {
		if r.expr, err = scheduling.CompileExpression(o.ClusterExpression); err != nil {
			return nil, fmt.Errorf("clusterExpression: %w", err)
		}
	}
	for j, t := range o.Targets {
		tg := target{group: t.Group, kind: t.Kind, name: t.Name, hasGroupKind: t.Group != "" || t.Kind != ""}
		if t.LabelSelector != nil {
			if tg.selector, err = metav1.LabelSelectorAsSelector(t.LabelSelector); err != nil {
				return nil, fmt.Errorf("targets[%d].labelSelector: %w", j, err)
			}
		}
		r.targets = append(r.targets, tg)
	}
	for j, op := range o.JSONPatch {
		c, err := compileOperation(op)
		if err != nil {
			return nil, fmt.Errorf("jsonPatch[%d]: %w", j, err)
		}
		r.ops = append(r.ops, c)
	}
	if m := o.MergePatch; m != nil {
		if r.merge, err = compileMergePatch(m); err != nil {
			return nil, fmt.Errorf("mergePatch: %w", err)
		}
	}
	if im := o.Image; im != nil && im.Registry == "" && im.Repository == "" && im.Tag == "" {
		return nil, fmt.Errorf("an image override sets at least one of registry, repository and tag")
	}
	for j, p := range o.Remove {
		if err := CheckPath(string(p)); err != nil {
			return nil, fmt.Errorf("remove[%d]: %w", j, err)
		}
		r.remove = append(r.remove, string(p))
	}
	return r, nil
}

func compileOperation(op placementv1alpha1.JSONPatchOperation) (operation, error) {
	c := operation{spec: op}
	if err := CheckPath(string(op.Path)); err != nil {
		return c, err
	}
	switch op.Op {
	case "add", "replace", "test":
		if (op.Value != nil) == (op.ValueExpression != "") {
			return c, fmt.Errorf("%s takes exactly one of value and valueExpression", op.Op)
		}
	case "remove", "move", "copy":
		if op.Value != nil || op.ValueExpression != "" {
			return c, fmt.Errorf("%s takes neither value nor valueExpression", op.Op)
		}
	default:
		return c, fmt.Errorf("unknown op %q", op.Op)
	}
	if (op.Op == "move" || op.Op == "copy") != (op.From != "") {
		return c, fmt.Errorf("move and copy take from; the other operations do not")
	}
	if op.Op == "move" {
		if err := CheckPath(op.From); err != nil {
			return c, fmt.Errorf("from: %w", err)
		}
	} else if op.From != "" && !pointer.MatchString(op.From) {
		return c, fmt.Errorf("from %q is not a JSON pointer", op.From)
	}
	if op.From != "" && strings.HasPrefix(string(op.Path)+"/", op.From+"/") {
		// Copying a field into itself doubles the object with each operation.
		return c, fmt.Errorf("%s from %s into %s: a field cannot be copied or moved into itself", op.Op, op.From, op.Path)
	}
	if op.Value != nil {
		if !json.Valid(op.Value.Raw) {
			return c, fmt.Errorf("value is not JSON")
		}
		c.value = op.Value.Raw
	}
	if op.ValueExpression != "" {
		var err error
		if c.expr, err = scheduling.CompileExpression(op.ValueExpression); err != nil {
			return c, fmt.Errorf("valueExpression: %w", err)
		}
	}
	return c, nil
}

func compileMergePatch(m *placementv1alpha1.MergePatch) (*mergePatch, error) {
	if (m.Patch != nil) == (m.PatchExpression != "") {
		return nil, fmt.Errorf("a merge patch takes exactly one of patch and patchExpression")
	}
	if m.PatchExpression != "" {
		expr, err := scheduling.CompileExpression(m.PatchExpression)
		if err != nil {
			return nil, fmt.Errorf("patchExpression: %w", err)
		}
		return &mergePatch{expr: expr}, nil
	}
	var patch any
	if err := json.Unmarshal(m.Patch.Raw, &patch); err != nil {
		return nil, fmt.Errorf("patch is not JSON: %w", err)
	}
	if err := checkMergePatch(patch); err != nil {
		return nil, err
	}
	return &mergePatch{literal: m.Patch.Raw}, nil
}

// pointer is the syntax of a JSON pointer into an object (not the whole document).
var pointer = regexp.MustCompile(`^(/([^/~]|~[01])*)+$`)

// forbidden are the first pointer tokens an override may not change.
var forbidden = map[string]bool{"apiVersion": true, "kind": true, "status": true}

// CheckPath tells whether an override may change the field at the JSON pointer p:
// not apiVersion, kind, status or metadata other than labels and annotations.
func CheckPath(p string) error {
	if !pointer.MatchString(p) {
		return fmt.Errorf("%q is not a JSON pointer into the object (like /spec/replicas)", p)
	}
	tokens := strings.Split(p[1:], "/")
	if forbidden[tokens[0]] || (tokens[0] == "metadata" && (len(tokens) == 1 || (tokens[1] != "labels" && tokens[1] != "annotations"))) {
		return fmt.Errorf("%s: an override may not change apiVersion, kind, status or metadata other than labels and annotations", p)
	}
	return nil
}

// checkMergePatch refuses a merge patch that would change what CheckPath protects.
func checkMergePatch(patch any) error {
	m, ok := patch.(map[string]any)
	if !ok {
		return fmt.Errorf("a merge patch is an object")
	}
	for k, v := range m {
		if forbidden[k] {
			return fmt.Errorf("/%s: an override may not change apiVersion, kind, status or metadata other than labels and annotations", k)
		}
		if k != "metadata" {
			continue
		}
		md, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("/metadata: an override may not change apiVersion, kind, status or metadata other than labels and annotations")
		}
		for f := range md {
			if f != "labels" && f != "annotations" {
				return fmt.Errorf("/metadata/%s: an override may not change apiVersion, kind, status or metadata other than labels and annotations", f)
			}
		}
	}
	return nil
}

// Hash is the revision hash of manifests hashed to base with overrides: base
// itself without overrides, so that a Placement without overrides keeps its hash.
func Hash(base string, overrides []placementv1alpha1.Override) (string, error) {
	if len(overrides) == 0 {
		return base, nil
	}
	b, err := json.Marshal(overrides)
	if err != nil {
		return "", err
	}
	return names.Hash(base + "\n" + string(b))[:16], nil
}

// Error is a rule that failed on a cluster.
type Error struct {
	// Rule is the rule's name.
	Rule string
	// Action is what failed: "clusterExpression", "jsonPatch[0] replace
	// /spec/replicas", "mergePatch", "image", "remove /spec/x" or "result".
	Action string
	// Object is the object it failed on, as "Kind namespace/name"; empty when the
	// rule failed before reaching an object.
	Object string
	Err    error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("rule %s, %s", e.Rule, e.Action)
	if e.Object != "" {
		s += ", on " + e.Object
	}
	return s + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Change is what one rule did to one object.
type Change struct {
	Rule   string `json:"rule"`
	Object string `json:"object"`
	// Deleted is set when the rule left the object out.
	Deleted bool `json:"deleted,omitempty"`
	// Paths are the fields the rule changed (like spec.replicas).
	Paths []string `json:"paths,omitempty"`
}

// Result is what a cluster's Work holds, and which rules changed what.
type Result struct {
	Manifests []runtime.RawExtension
	Changes   []Change
}

// Bound is a Set bound to one cluster: the rules that apply to it and the values
// of their expressions. Clusters with equal keys render alike.
type Bound struct {
	rules []boundRule
	key   string
}

type boundRule struct {
	*rule
	values [][]byte // per operation
	merge  []byte
}

// Key identifies what the bound rules do: empty when no rule applies.
func (b *Bound) Key() string { return b.key }

// Size is about the bytes the bound values take.
func (b *Bound) Size() int {
	if b == nil {
		return 0
	}
	n := len(b.key)
	for _, r := range b.rules {
		n += len(r.merge)
		for _, v := range r.values {
			n += len(v)
		}
	}
	return n
}

// Bind evaluates which rules apply to cluster c and the values of their
// expressions. An expression that fails (a missing label, say) is an *Error.
func (s *Set) Bind(c scheduling.Cluster) (*Bound, error) {
	b := &Bound{}
	if s.Empty() {
		return b, nil
	}
	var key bytes.Buffer
	for i, r := range s.rules {
		applies, err := r.appliesTo(c)
		if err != nil {
			return nil, &Error{Rule: r.name, Action: "clusterExpression", Err: err}
		}
		if !applies {
			continue
		}
		br := boundRule{rule: r}
		for j, op := range r.ops {
			v := []byte(op.value)
			if op.expr != nil {
				val, err := op.expr.JSON(c)
				if err != nil {
					return nil, &Error{Rule: r.name, Action: op.describe(j) + " valueExpression", Err: err}
				}
				if v, err = json.Marshal(val); err != nil {
					return nil, &Error{Rule: r.name, Action: op.describe(j) + " valueExpression", Err: err}
				}
			}
			br.values = append(br.values, v)
		}
		if m := r.merge; m != nil {
			br.merge = m.literal
			if m.expr != nil {
				val, err := m.expr.JSON(c)
				if err == nil {
					err = checkMergePatch(val)
				}
				if err == nil {
					br.merge, err = json.Marshal(val)
				}
				if err != nil {
					return nil, &Error{Rule: r.name, Action: "mergePatch patchExpression", Err: err}
				}
			}
		}
		b.rules = append(b.rules, br)
		fmt.Fprintf(&key, "%d:%q:%q\n", i, br.values, br.merge)
		if key.Len() > MaxObjectBytes {
			return nil, &Error{Rule: r.name, Action: "values", Err: fmt.Errorf("the rules' values on this cluster add up past the %d KiB a Work carries", MaxObjectBytes>>10)}
		}
	}
	if key.Len() > 0 {
		b.key = names.Hash(key.String())[:16]
	}
	return b, nil
}

func (r *rule) appliesTo(c scheduling.Cluster) (bool, error) {
	if r.names != nil && !r.names[c.Name] {
		return false, nil
	}
	if r.selector != nil && !r.selector.Matches(labels.Set(c.Labels)) {
		return false, nil
	}
	if r.expr != nil {
		return r.expr.Bool(c)
	}
	return true, nil
}

func (op operation) describe(i int) string {
	return fmt.Sprintf("jsonPatch[%d] %s %s", i, op.spec.Op, op.spec.Path)
}

// Render renders manifests (as the work generator renders the hub objects, before
// overrides) for cluster c.
func (s *Set) Render(manifests []runtime.RawExtension, c scheduling.Cluster) (Result, error) {
	b, err := s.Bind(c)
	if err != nil {
		return Result{}, err
	}
	return b.Apply(manifests)
}

// identity is what an override may not change of an object, and what targets
// match.
type identity struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace,omitempty"`
		Labels    map[string]string `json:"labels,omitempty"`
	} `json:"metadata"`
}

func (id identity) String() string {
	if id.Metadata.Namespace == "" {
		return id.Kind + " " + id.Metadata.Name
	}
	return id.Kind + " " + id.Metadata.Namespace + "/" + id.Metadata.Name
}

func (id identity) group() string {
	if i := strings.LastIndex(id.APIVersion, "/"); i >= 0 {
		return id.APIVersion[:i]
	}
	return ""
}

// Apply applies the bound rules to manifests, in order: the manifests to place
// on the cluster, and the changes.
func (b *Bound) Apply(manifests []runtime.RawExtension) (Result, error) {
	if len(b.rules) == 0 {
		return Result{Manifests: manifests}, nil
	}
	out := Result{Manifests: make([]runtime.RawExtension, 0, len(manifests))}
	for _, m := range manifests {
		var id identity
		if err := json.Unmarshal(m.Raw, &id); err != nil {
			return Result{}, fmt.Errorf("decoding a manifest: %w", err)
		}
		doc, deleted, changed := m.Raw, false, false
		for _, r := range b.rules {
			if !r.targets.matches(id) {
				continue
			}
			if r.delete {
				deleted = true
				out.Changes = append(out.Changes, Change{Rule: r.name, Object: id.String(), Deleted: true})
				break
			}
			after, action, err := r.apply(doc)
			if err == nil {
				action = "result"
				err = keepsIdentity(after, id)
			}
			if err == nil && rbacguard.Guarded(id.APIVersion, id.Kind) {
				// An override grants on a member no more than the hub object
				// does (the hub's RBAC checked its author for that much).
				err = rbacguard.Check(m.Raw, after)
			}
			if err != nil {
				return Result{}, &Error{Rule: r.name, Action: action, Object: id.String(), Err: err}
			}
			paths, err := changedPaths(doc, after)
			if err != nil {
				return Result{}, &Error{Rule: r.name, Action: "result", Object: id.String(), Err: err}
			}
			if len(paths) > 0 {
				out.Changes = append(out.Changes, Change{Rule: r.name, Object: id.String(), Paths: paths})
				changed = true
			}
			doc = after
		}
		if deleted {
			continue
		}
		if changed {
			// The encoding the API server keeps (sorted keys), so that an unchanged
			// Work compares equal byte for byte.
			var obj map[string]any
			if err := utiljson.Unmarshal(doc, &obj); err != nil {
				return Result{}, err
			}
			var err error
			if doc, err = json.Marshal(obj); err != nil {
				return Result{}, err
			}
		}
		out.Manifests = append(out.Manifests, runtime.RawExtension{Raw: doc})
	}
	return out, nil
}

type targets []target

func (ts targets) matches(id identity) bool {
	if len(ts) == 0 {
		return true
	}
	for _, t := range ts {
		if t.hasGroupKind && (t.group != id.group() || (t.kind != "" && t.kind != id.Kind)) {
			continue
		}
		if t.name != "" && t.name != id.Metadata.Name {
			continue
		}
		if t.selector != nil && !t.selector.Matches(labels.Set(id.Metadata.Labels)) {
			continue
		}
		return true
	}
	return false
}

// MaxObjectBytes is the most an override may grow an object to: what one Work
// carries. It is checked after every operation, so that no sequence of copies
// builds a document larger than this (each copy could double it).
const MaxObjectBytes = lodestarworkv1alpha1.MaxManifestBytes

// applyOptions: add creates missing parents; remove of a missing path is no
// error; a copy may add at most what keeps doc within MaxObjectBytes, so that
// no operation builds a larger document.
func applyOptions(doc []byte) *jsonpatch.ApplyOptions {
	o := jsonpatch.NewApplyOptions()
	o.EnsurePathExistsOnAdd = true
	o.AllowMissingPathOnRemove = true
	o.AccumulatedCopySizeLimit = max(1, int64(MaxObjectBytes-len(doc)))
	return o
}

// TooLargeError says that an override would grow an object past MaxObjectBytes.
type TooLargeError struct {
	// Size is the object's size before the operation that would grow it past.
	Size int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the object (%d KiB) would grow past the %d KiB a Work carries", e.Size>>10, MaxObjectBytes>>10)
}

// bounded returns doc, or a *TooLargeError when it is larger than MaxObjectBytes.
func bounded(doc []byte, err error) ([]byte, error) {
	if err == nil && len(doc) > MaxObjectBytes {
		return nil, &TooLargeError{Size: MaxObjectBytes}
	}
	return doc, err
}

// apply applies the rule's action to doc; on error it says which part failed.
func (r boundRule) apply(doc []byte) ([]byte, string, error) {
	switch {
	case len(r.ops) > 0:
		for i, op := range r.ops {
			var err error
			if doc, err = bounded(patch(doc, op.spec.Op, string(op.spec.Path), op.spec.From, r.values[i])); err != nil {
				return nil, op.describe(i), err
			}
		}
		return doc, "", nil
	case r.merge != nil:
		out, err := bounded(jsonpatch.MergePatch(doc, r.merge))
		return out, "mergePatch", err
	case r.image != nil:
		out, err := bounded(replaceImages(doc, r.image))
		return out, "image", err
	default:
		for _, p := range r.remove {
			var err error
			if doc, err = patch(doc, "remove", p, "", nil); err != nil {
				return nil, "remove " + p, err
			}
		}
		return doc, "", nil
	}
}

// patch applies one RFC 6902 operation.
func patch(doc []byte, op placementv1alpha1.JSONPatchOp, path, from string, value []byte) ([]byte, error) {
	o := map[string]any{"op": op, "path": path}
	if from != "" {
		o["from"] = from
	}
	if value != nil {
		o["value"] = json.RawMessage(value)
	}
	b, err := json.Marshal([]any{o})
	if err != nil {
		return nil, err
	}
	p, err := jsonpatch.DecodePatch(b)
	if err != nil {
		return nil, err
	}
	out, err := p.ApplyWithOptions(doc, applyOptions(doc))
	var tooLarge *jsonpatch.AccumulatedCopySizeError
	if errors.As(err, &tooLarge) {
		return nil, &TooLargeError{Size: len(doc)}
	}
	return out, err
}

// keepsIdentity checks that a rendered object still decodes to an object with
// the same apiVersion, kind, name and namespace, and has no status.
func keepsIdentity(doc []byte, want identity) error {
	var got identity
	if err := json.Unmarshal(doc, &got); err != nil {
		return fmt.Errorf("the object no longer decodes: %w", err)
	}
	if got.APIVersion != want.APIVersion || got.Kind != want.Kind || got.Metadata.Name != want.Metadata.Name || got.Metadata.Namespace != want.Metadata.Namespace {
		return fmt.Errorf("the object became %s %s, no longer %s %s", got.APIVersion, got, want.APIVersion, want)
	}
	var status struct {
		Status json.RawMessage `json:"status"`
	}
	if err := json.Unmarshal(doc, &status); err == nil && status.Status != nil {
		return fmt.Errorf("an override may not set status")
	}
	return nil
}

// changedPaths names the fields in which after differs from before.
func changedPaths(before, after []byte) ([]string, error) {
	var a, b map[string]any
	if err := utiljson.Unmarshal(before, &a); err != nil {
		return nil, err
	}
	if err := utiljson.Unmarshal(after, &b); err != nil {
		return nil, fmt.Errorf("the object no longer decodes: %w", err)
	}
	return diff.Paths(a, b, 20), nil
}
