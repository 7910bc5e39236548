package work

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

// plan is how one Work is applied, from its annotations.
type plan struct {
	strategy lodestarworkv1alpha1.ApplyStrategy
	feedback *feedback.Rules
	// feedbackErr is set when the feedback rules are invalid.
	feedbackErr error
	// health are the hub's health rules of the Work's kinds
	// (HealthRulesAnnotation); an annotation that does not parse is none.
	health []lodestarworkv1alpha1.HealthRule
	// crds are the kinds defined by CRDs in the same Work.
	crds map[schema.GroupKind]string
	// ignore are the fields the member's controllers own.
	ignore []ignoreRule
}

// ignoreRule is a parsed IgnoreField.
type ignoreRule struct {
	kind  schema.GroupKind
	name  string
	paths []diff.Pointer
}

// ignored returns the fields of an object that the agent leaves to the member.
func (p plan) ignored(gk schema.GroupKind, name string) []diff.Pointer {
	var out []diff.Pointer
	for _, rule := range p.ignore {
		if rule.kind == gk && (rule.name == "" || rule.name == name) {
			out = append(out, rule.paths...)
		}
	}
	return out
}

// deletionPolicy is what happens to the objects the Work placed when it (or one
// of their manifests) goes: Orphan when the Work's annotation says so (set by
// unjoin --orphan, or by hand to give up a cleanup that waits on a member's
// finalizer), else the Placement's deletion policy.
func (p plan) deletionPolicy(work *workv1alpha1.Work) lodestarworkv1alpha1.DeletionPolicy {
	if orphans(work) {
		return lodestarworkv1alpha1.DeletionOrphan
	}
	return p.strategy.DeletionPolicy
}

// planFor reads the Work's apply strategy and feedback rules. An invalid strategy
// is an error: not knowing how to write, the agent writes nothing.
func planFor(work *workv1alpha1.Work) (plan, error) {
	p := plan{crds: map[schema.GroupKind]string{}}
	var err error
	if p.strategy, err = clusterworks.Strategy(work); err != nil {
		return p, err
	}
	if err := p.strategy.Validate(); err != nil {
		return p, err
	}
	for _, f := range p.strategy.IgnoreFields {
		rule := ignoreRule{kind: schema.GroupKind{Group: f.Group, Kind: f.Kind}, name: f.Name}
		for _, path := range f.Paths {
			ptr, err := diff.ParsePointer(path)
			if err != nil {
				return p, fmt.Errorf("ignoreFields of %s: %w", f.Kind, err)
			}
			rule.paths = append(rule.paths, ptr)
		}
		p.ignore = append(p.ignore, rule)
	}
	if s, ok := work.Annotations[lodestarworkv1alpha1.StatusFeedbackAnnotation]; ok {
		var rules []lodestarworkv1alpha1.FeedbackRule
		if err := json.Unmarshal([]byte(s), &rules); err != nil {
			p.feedbackErr = fmt.Errorf("annotation %s is not a list of feedback rules: %w", lodestarworkv1alpha1.StatusFeedbackAnnotation, err)
		} else {
			p.feedback, p.feedbackErr = feedback.Compile(rules)
		}
	}
	if s, ok := work.Annotations[lodestarworkv1alpha1.HealthRulesAnnotation]; ok {
		_ = json.Unmarshal([]byte(s), &p.health) // the hub writes it; a hand-written one that does not parse is none
	}
	for _, m := range work.Spec.Workload.Manifests {
		u := &unstructured.Unstructured{}
		if u.UnmarshalJSON(m.Raw) != nil || u.GroupVersionKind().GroupKind() != crdKind {
			continue
		}
		group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(u.Object, "spec", "names", "kind")
		p.crds[schema.GroupKind{Group: group, Kind: kind}] = u.GetName()
	}
	return p, nil
}

var (
	crdKind       = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
	namespaceKind = schema.GroupKind{Kind: "Namespace"}
	secretKind    = schema.GroupKind{Kind: "Secret"}
	jobKind       = schema.GroupKind{Group: "batch", Kind: "Job"}
)

// orphans tells whether the Work's deletion policy leaves its objects on the member.
func orphans(work *workv1alpha1.Work) bool {
	return work.Annotations[lodestarworkv1alpha1.DeletionPolicyAnnotation] == lodestarworkv1alpha1.DeletionPolicyOrphan
}
