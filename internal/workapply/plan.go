package workapply

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/clusterworks"
	"github.com/lodestar-dev/lodestar/internal/diff"
	"github.com/lodestar-dev/lodestar/internal/feedback"
)

// The plan: how one Work is applied, read from its annotations before any
// manifest is looked at.

// Plan is how one Work is applied, from its annotations.
type Plan struct {
	Strategy lodestarworkv1alpha1.ApplyStrategy
	Feedback *feedback.Rules
	// FeedbackErr is set when the feedback rules are invalid.
	FeedbackErr error
	// Health are the hub's health rules of the Work's kinds
	// (HealthRulesAnnotation); an annotation that does not parse is none.
	Health []lodestarworkv1alpha1.HealthRule
	// CRDs are the kinds defined by CRDs in the same Work.
	CRDs map[schema.GroupKind]string
	// Ignore are the fields the member's controllers own.
	Ignore []IgnoreRule
}

// IgnoreRule is a parsed IgnoreField.
type IgnoreRule struct {
	Kind  schema.GroupKind
	Name  string
	Paths []diff.Pointer
}

// Ignored returns the fields of an object that the agent leaves to the member.
func (p Plan) Ignored(gk schema.GroupKind, name string) []diff.Pointer {
	var out []diff.Pointer
	for _, rule := range p.Ignore {
		if rule.Kind == gk && (rule.Name == "" || rule.Name == name) {
			out = append(out, rule.Paths...)
		}
	}
	return out
}

// DeletionPolicy is what happens to the objects the Work placed when it (or one
// of their manifests) goes: Orphan when the Work's annotation says so (set by
// unjoin --orphan, or by hand to give up a cleanup that waits on a member's
// finalizer), else the Placement's deletion policy.
func (p Plan) DeletionPolicy(work *workv1alpha1.Work) lodestarworkv1alpha1.DeletionPolicy {
	if Orphans(work) {
		return lodestarworkv1alpha1.DeletionOrphan
	}
	return p.Strategy.DeletionPolicy
}

// For reads the Work's apply strategy and feedback rules. An invalid strategy
// is an error: not knowing how to write, the agent writes nothing.
func For(work *workv1alpha1.Work) (Plan, error) {
	p := Plan{CRDs: map[schema.GroupKind]string{}}
	var err error
	if p.Strategy, err = clusterworks.Strategy(work); err != nil {
		return p, err
	}
	if err := p.Strategy.Validate(); err != nil {
		return p, err
	}
	for _, f := range p.Strategy.IgnoreFields {
		rule := IgnoreRule{Kind: schema.GroupKind{Group: f.Group, Kind: f.Kind}, Name: f.Name}
		for _, path := range f.Paths {
			ptr, err := diff.ParsePointer(path)
			if err != nil {
				return p, fmt.Errorf("ignoreFields of %s: %w", f.Kind, err)
			}
			rule.Paths = append(rule.Paths, ptr)
		}
		p.Ignore = append(p.Ignore, rule)
	}
	if s, ok := work.Annotations[lodestarworkv1alpha1.StatusFeedbackAnnotation]; ok {
		var rules []lodestarworkv1alpha1.FeedbackRule
		if err := json.Unmarshal([]byte(s), &rules); err != nil {
			p.FeedbackErr = fmt.Errorf("annotation %s is not a list of feedback rules: %w", lodestarworkv1alpha1.StatusFeedbackAnnotation, err)
		} else {
			p.Feedback, p.FeedbackErr = feedback.Compile(rules)
		}
	}
	if s, ok := work.Annotations[lodestarworkv1alpha1.HealthRulesAnnotation]; ok {
		_ = json.Unmarshal([]byte(s), &p.Health) // the hub writes it; a hand-written one that does not parse is none
	}
	for _, m := range work.Spec.Workload.Manifests {
		u := &unstructured.Unstructured{}
		if u.UnmarshalJSON(m.Raw) != nil || u.GroupVersionKind().GroupKind() != CRDKind {
			continue
		}
		group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(u.Object, "spec", "names", "kind")
		p.CRDs[schema.GroupKind{Group: group, Kind: kind}] = u.GetName()
	}
	return p, nil
}

// Kinds the agent treats apart.
var (
	CRDKind       = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
	NamespaceKind = schema.GroupKind{Kind: "Namespace"}
	SecretKind    = schema.GroupKind{Kind: "Secret"}
	JobKind       = schema.GroupKind{Group: "batch", Kind: "Job"}
)

// Orphans tells whether the Work's deletion policy leaves its objects on the member.
func Orphans(work *workv1alpha1.Work) bool {
	return work.Annotations[lodestarworkv1alpha1.DeletionPolicyAnnotation] == lodestarworkv1alpha1.DeletionPolicyOrphan
}
