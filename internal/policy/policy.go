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
	// AllowedClusterScopedKinds are the only cluster-scoped kinds applied (same
	// form as AllowedKinds): CustomResourceDefinitions, admission webhook
	// configurations and the like are denied unless listed. ["*"] (or nil, in a
	// Policy made in code) allows every cluster-scoped kind the other rules
	// allow. The configuration file's default: see Defaults.
	AllowedClusterScopedKinds []string `json:"allowedClusterScopedKinds,omitempty"`
	// NamespacePodSecurity is the Pod Security Standard (privileged, baseline or
	// restricted) that namespaces the agent creates for manifests, and Namespace
	// manifests it applies, enforce (the pod-security.kubernetes.io/enforce
	// label). The configuration file's default is baseline; privileged (or "", in
	// a Policy made in code) enforces nothing.
	NamespacePodSecurity string `json:"namespacePodSecurity,omitempty"`
}

// MCSOwned says why obj may not come through a Work, whatever the member's
// policy: ServiceImports, and EndpointSlices labelled for the Multicluster
// Services API, are the MCS controller's alone (KEP-1645: only it may create or
// modify them).
func MCSOwned(gk schema.GroupKind, obj *unstructured.Unstructured) string {
	switch {
	case gk == schema.GroupKind{Group: "multicluster.x-k8s.io", Kind: "ServiceImport"}:
		return "ServiceImports are made by Lodestar's Multicluster Services controller from ServiceExports, never placed"
	case gk == schema.GroupKind{Group: "discovery.k8s.io", Kind: "EndpointSlice"} && obj != nil:
		for _, l := range []string{"multicluster.kubernetes.io/service-name", "multicluster.kubernetes.io/source-cluster"} {
			if _, ok := obj.GetLabels()[l]; ok {
				return "EndpointSlices labelled " + l + " are made by Lodestar's Multicluster Services controller, never placed"
			}
		}
	}
	return ""
}

// protectedRoles are the default ClusterRoles that grant broad power: binding them
// escalates. So does binding any system: role (system:controller:daemon-set-controller
// creates pods in every namespace, for instance): they are the control plane's.
var protectedRoles = []string{"cluster-admin", "admin", "edit"}

// podMakers are the resources whose create runs pods: creating them in every
// namespace runs code as any ServiceAccount of the member.
var podMakers = []string{"pods", "deployments", "replicasets", "statefulsets", "daemonsets", "jobs", "cronjobs", "replicationcontrollers"}

// Defaults is the member policy an agent enforces when its configuration file
// does not say otherwise (and when it has none): no escalating RBAC, only the
// cluster-scoped kinds listed (so no CRDs or admission webhook configurations),
// and namespaces the agent creates or applies enforce the baseline Pod Security
// Standard. The agent chart installs no policy of its own: a member installed by
// hand or by another installer is protected alike. A configuration file changes
// only the fields it sets.
func Defaults() Policy {
	return Policy{
		AllowedClusterScopedKinds: []string{
			"Namespace",
			"rbac.authorization.k8s.io/ClusterRole",
			"rbac.authorization.k8s.io/ClusterRoleBinding",
			"scheduling.k8s.io/PriorityClass",
			"storage.k8s.io/StorageClass",
			"networking.k8s.io/IngressClass",
		},
		NamespacePodSecurity: "baseline",
	}
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
	switch p.NamespacePodSecurity {
	case "", "privileged", "baseline", "restricted":
	default:
		return fmt.Errorf("namespacePodSecurity %q: want privileged, baseline or restricted", p.NamespacePodSecurity)
	}
	for _, list := range [][]string{p.AllowedKinds, p.DeniedKinds, p.AllowedClusterScopedKinds} {
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
	// LookupRole, when set, reads a Role or ClusterRole of the member (nil when it
	// does not exist), so that a binding to a role that escalates is denied too.
	// A role that cannot be read denies the binding.
	LookupRole func(kind, namespace, name string) (*unstructured.Unstructured, error)
}

// PodSecurity is the Pod Security Standard namespaces the agent creates enforce,
// or "".
func (c *Checker) PodSecurity() string {
	if c == nil {
		return ""
	}
	return c.policy.NamespacePodSecurity
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
	why, _ := c.Check(gvk, namespace, obj)
	return why
}

// Check is Denied, and whether the refusal may lift by itself: a binding to a
// role the member does not have yet (placed by the same Work, say) is refused
// until the role exists and can be checked.
func (c *Checker) Check(gvk schema.GroupVersionKind, namespace string, obj *unstructured.Unstructured) (why string, retry bool) {
	p := c.policy
	kind := kindName(gvk.GroupKind())
	if why := MCSOwned(gvk.GroupKind(), obj); why != "" {
		return why, false
	}
	if matchKind(p.DeniedKinds, gvk.GroupKind()) {
		return fmt.Sprintf("the member's policy denies kind %s", kind), false
	}
	if len(p.AllowedKinds) > 0 && !matchKind(p.AllowedKinds, gvk.GroupKind()) {
		return fmt.Sprintf("the member's policy allows only kinds %s", strings.Join(p.AllowedKinds, ", ")), false
	}
	if namespace == "" && p.AllowedClusterScopedKinds != nil && !matchKind(p.AllowedClusterScopedKinds, gvk.GroupKind()) {
		return fmt.Sprintf("the member's policy allows only cluster-scoped kinds %s", strings.Join(p.AllowedClusterScopedKinds, ", ")), false
	}
	ns := namespace
	if gvk.Group == "" && gvk.Kind == "Namespace" {
		ns = obj.GetName()
	}
	if ns != "" {
		if match(c.deniedNS, ns) {
			return fmt.Sprintf("the member's policy denies namespace %s", ns), false
		}
		if len(p.AllowedNamespaces) > 0 && !match(p.AllowedNamespaces, ns) {
			return fmt.Sprintf("the member's policy allows only namespaces %s", strings.Join(p.AllowedNamespaces, ", ")), false
		}
	}
	if !p.AllowEscalatingRBAC && gvk.Group == "rbac.authorization.k8s.io" {
		if why, retry := c.escalation(gvk.Kind, obj); why != "" {
			return "the member's policy denies escalating RBAC: " + why, retry
		}
	}
	return "", false
}

func kindName(gk schema.GroupKind) string {
	if gk.Group == "" {
		return gk.Kind
	}
	return gk.Group + "/" + gk.Kind
}

func matchKind(list []string, gk schema.GroupKind) bool {
	for _, k := range list {
		if k == "*" {
			return true
		}
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

// escalation says how an RBAC object escalates, or "": a ClusterRole that
// aggregates others (it grows with whatever is labelled to match), a binding to
// cluster-admin, admin, edit or a system: role, to a role that escalates, or to
// a role the member does not have (retry: it may be created later), a
// ClusterRoleBinding to a role that creates pods, and a role granting every verb
// or resource, or escalate, bind or impersonate.
func (c *Checker) escalation(kind string, obj *unstructured.Unstructured) (why string, retry bool) {
	switch kind {
	case "ClusterRoleBinding", "RoleBinding":
		ref, _, _ := unstructured.NestedStringMap(obj.Object, "roleRef")
		if ref["kind"] == "ClusterRole" && (slices.Contains(protectedRoles, ref["name"]) || strings.HasPrefix(ref["name"], "system:")) {
			return fmt.Sprintf("%s %s binds %s", kind, obj.GetName(), ref["name"]), false
		}
		if c.LookupRole == nil {
			return "", false
		}
		ns := ""
		if ref["kind"] == "Role" {
			ns = obj.GetNamespace()
		}
		role, err := c.LookupRole(ref["kind"], ns, ref["name"])
		switch {
		case err != nil:
			return fmt.Sprintf("%s %s binds %s %s, which the agent cannot read to check: %v", kind, obj.GetName(), ref["kind"], ref["name"], err), true
		case role == nil:
			return fmt.Sprintf("%s %s binds %s %s, which the member does not have (yet): it is checked once it exists", kind, obj.GetName(), ref["kind"], ref["name"]), true
		}
		// Its rules as the member has them (an aggregated role's included).
		if why := rulesEscalate(ref["kind"], role); why != "" {
			return fmt.Sprintf("%s %s binds %s %s, which escalates (%s)", kind, obj.GetName(), ref["kind"], ref["name"], why), false
		}
		if kind == "ClusterRoleBinding" {
			if why := createsPods(role); why != "" {
				return fmt.Sprintf("%s %s binds %s %s in every namespace, which %s", kind, obj.GetName(), ref["kind"], ref["name"], why), false
			}
		}
	case "ClusterRole", "Role":
		if _, found := obj.Object["aggregationRule"]; found && kind == "ClusterRole" {
			return fmt.Sprintf("ClusterRole %s aggregates other ClusterRoles (aggregationRule)", obj.GetName()), false
		}
		return rulesEscalate(kind, obj), false
	}
	return "", false
}

// firstRule returns what why says of the first of role's rules it says
// something of (given the rule's index, verbs and resources), or "".
func firstRule(role *unstructured.Unstructured, why func(i int, verbs, resources []string) string) string {
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	for i, r := range rules {
		rule, ok := r.(map[string]any)
		if !ok {
			continue
		}
		verbs, _, _ := unstructured.NestedStringSlice(rule, "verbs")
		resources, _, _ := unstructured.NestedStringSlice(rule, "resources")
		if s := why(i, verbs, resources); s != "" {
			return s
		}
	}
	return ""
}

// createsPods says which rule of a role grants creating pods or what makes
// them, or "".
func createsPods(role *unstructured.Unstructured) string {
	return firstRule(role, func(i int, verbs, resources []string) string {
		if !slices.Contains(verbs, "create") {
			return ""
		}
		for _, res := range resources {
			if slices.Contains(podMakers, res) {
				return fmt.Sprintf("grants creating %s (rule %d): code run as any ServiceAccount", res, i)
			}
		}
		return ""
	})
}

// rulesEscalate says which rule of a Role or ClusterRole grants every verb or
// resource, or escalate, bind or impersonate, or "".
func rulesEscalate(kind string, obj *unstructured.Unstructured) string {
	return firstRule(obj, func(i int, verbs, resources []string) string {
		for _, v := range verbs {
			if v == "*" || v == "escalate" || v == "bind" || v == "impersonate" {
				return fmt.Sprintf("%s %s rule %d grants verb %q", kind, obj.GetName(), i, v)
			}
		}
		if slices.Contains(resources, "*") {
			return fmt.Sprintf("%s %s rule %d grants every resource", kind, obj.GetName(), i)
		}
		return ""
	})
}
