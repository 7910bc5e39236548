// Package policy is the member's own say over what its agent applies, whatever the
// hub sends: allowed and denied kinds and namespaces, and no escalating RBAC unless
// the member's admin allows it. The agent checks every manifest; one that the
// policy denies fails alone, with the rule that denied it.
package policy

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// DefaultDeniedNamespaces are denied when the policy names no denied namespaces;
// the agent's own namespace is added to them.
var DefaultDeniedNamespaces = []string{"kube-system"}

// Policy is the member admin's policy, from the agent's configuration file.
type Policy struct {
	// AllowedKinds, when set, are the only kinds applied: "Kind" for the core
	// group, "group/Kind", with "*" for any kind of a group ("apps/*").
	AllowedKinds []string `json:"allowedKinds,omitempty"`
	// DeniedKinds are never applied (same form); they win over AllowedKinds.
	DeniedKinds []string `json:"deniedKinds,omitempty"`
	// AllowedNamespaces, when set, are the only namespaces (shell patterns such as
	// "team-*") that namespaced objects, and Namespace objects, may be in.
	AllowedNamespaces []string `json:"allowedNamespaces,omitempty"`
	// DeniedNamespaces are never written (patterns); they win over
	// AllowedNamespaces. Unset, they are kube-system; the agent's own namespace is
	// always denied.
	DeniedNamespaces []string `json:"deniedNamespaces,omitempty"`
	// AllowEscalatingRBAC lets Works bind cluster-admin and write Roles or
	// ClusterRoles that grant every verb or resource, or escalate, bind or
	// impersonate. Off by default.
	AllowEscalatingRBAC bool `json:"allowEscalatingRBAC,omitempty"`
}

// Validate checks the patterns.
func (p Policy) Validate() error {
	for _, list := range [][]string{p.AllowedNamespaces, p.DeniedNamespaces} {
		for _, pattern := range list {
			if _, err := path.Match(pattern, ""); err != nil {
				return fmt.Errorf("namespace pattern %q: %w", pattern, err)
			}
		}
	}
	for _, list := range [][]string{p.AllowedKinds, p.DeniedKinds} {
		for _, k := range list {
			if k == "" || strings.Count(k, "/") > 1 {
				return fmt.Errorf("kind %q: want Kind, group/Kind or group/*", k)
			}
		}
	}
	return nil
}

// Checker applies a Policy for an agent running in agentNamespace.
type Checker struct {
	policy         Policy
	deniedNS       []string
	agentNamespace string
}

// NewChecker returns a checker of p.
func NewChecker(p Policy, agentNamespace string) (*Checker, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	denied := p.DeniedNamespaces
	if denied == nil {
		denied = DefaultDeniedNamespaces
	}
	if agentNamespace != "" {
		denied = append(slices.Clone(denied), agentNamespace)
	}
	return &Checker{policy: p, deniedNS: denied, agentNamespace: agentNamespace}, nil
}

// Denied returns why the member's policy refuses obj, or "". namespace is the
// object's namespace ("" for cluster-scoped objects).
func (c *Checker) Denied(gvk schema.GroupVersionKind, namespace string, obj *unstructured.Unstructured) string {
	p := c.policy
	kind := kindName(gvk.GroupKind())
	if matchKind(p.DeniedKinds, gvk.GroupKind()) {
		return fmt.Sprintf("the member's policy denies kind %s", kind)
	}
	if len(p.AllowedKinds) > 0 && !matchKind(p.AllowedKinds, gvk.GroupKind()) {
		return fmt.Sprintf("the member's policy allows only kinds %s", strings.Join(p.AllowedKinds, ", "))
	}
	ns := namespace
	if gvk.Group == "" && gvk.Kind == "Namespace" {
		ns = obj.GetName()
	}
	if ns != "" {
		if match(c.deniedNS, ns) {
			return fmt.Sprintf("the member's policy denies namespace %s", ns)
		}
		if len(p.AllowedNamespaces) > 0 && !match(p.AllowedNamespaces, ns) {
			return fmt.Sprintf("the member's policy allows only namespaces %s", strings.Join(p.AllowedNamespaces, ", "))
		}
	}
	if !p.AllowEscalatingRBAC && gvk.Group == "rbac.authorization.k8s.io" {
		if why := escalation(gvk.Kind, obj); why != "" {
			return "the member's policy denies escalating RBAC: " + why
		}
	}
	return ""
}

func kindName(gk schema.GroupKind) string {
	if gk.Group == "" {
		return gk.Kind
	}
	return gk.Group + "/" + gk.Kind
}

func matchKind(list []string, gk schema.GroupKind) bool {
	for _, k := range list {
		group, kind, found := strings.Cut(k, "/")
		if !found {
			group, kind = "", k
		}
		if group == gk.Group && (kind == "*" || kind == gk.Kind) {
			return true
		}
	}
	return false
}

func match(patterns []string, s string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, s); ok {
			return true
		}
	}
	return false
}

// escalation says how an RBAC object escalates, or "".
func escalation(kind string, obj *unstructured.Unstructured) string {
	switch kind {
	case "ClusterRoleBinding", "RoleBinding":
		ref, _, _ := unstructured.NestedStringMap(obj.Object, "roleRef")
		if ref["kind"] == "ClusterRole" && ref["name"] == "cluster-admin" {
			return fmt.Sprintf("%s %s binds cluster-admin", kind, obj.GetName())
		}
	case "ClusterRole", "Role":
		rules, _, _ := unstructured.NestedSlice(obj.Object, "rules")
		for i, r := range rules {
			rule, ok := r.(map[string]any)
			if !ok {
				continue
			}
			verbs, _, _ := unstructured.NestedStringSlice(rule, "verbs")
			resources, _, _ := unstructured.NestedStringSlice(rule, "resources")
			for _, v := range verbs {
				if v == "*" || v == "escalate" || v == "bind" || v == "impersonate" {
					return fmt.Sprintf("%s %s rule %d grants verb %q", kind, obj.GetName(), i, v)
				}
			}
			if slices.Contains(resources, "*") {
				return fmt.Sprintf("%s %s rule %d grants every resource", kind, obj.GetName(), i)
			}
		}
	}
	return ""
}
