// Package rbacguard keeps what an override makes of an RBAC object within
// what the hub granted. The hub's own RBAC let the object's author write it
// only with the permissions it grants (RBAC's escalation check), so a placed
// Role, ClusterRole, RoleBinding or ClusterRoleBinding may grant on a member at
// most what its hub object grants: a role's rules must be covered by the hub
// object's rules (RBAC's own coverage comparison, wildcards included), its
// aggregation rule may not change, and a binding may not change its role or
// add subjects. Without it, an override replacing a Role's rules by
// `endpointslices: create` minted on every member a right the hub refuses the
// tenant (CVE-2021-25740's kinds among them).
package rbacguard

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/component-helpers/auth/rbac/validation"
)

// Group is the RBAC API group.
const Group = rbacv1.GroupName

// MaxCombinations bounds the verb × group × resource × name combinations of a
// rule list that Check compares (RBAC breaks rules down into them): an
// overridden object with more is refused rather than compared.
const MaxCombinations = 1 << 14

// Guarded tells whether objects of apiVersion and kind are checked.
func Guarded(apiVersion, kind string) bool {
	if g, _, ok := strings.Cut(apiVersion, "/"); !ok || g != Group {
		return false
	}
	switch kind {
	case "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding":
		return true
	}
	return false
}

// Error is an overridden RBAC object that would grant more than its hub object.
type Error struct {
	// What is what it would grant, like `rule {verbs: [create], apiGroups:
	// [discovery.k8s.io], resources: [endpointslices]}`.
	What string
}

func (e *Error) Error() string {
	return "would grant on the member what the hub object does not: " + e.What
}

type object struct {
	Kind            string                  `json:"kind"`
	Rules           []rbacv1.PolicyRule     `json:"rules"`
	AggregationRule *rbacv1.AggregationRule `json:"aggregationRule"`
	RoleRef         rbacv1.RoleRef          `json:"roleRef"`
	Subjects        []rbacv1.Subject        `json:"subjects"`
}

// Check compares an RBAC object as overridden (after) with its hub object as
// rendered (before); an *Error when after grants more. Other kinds pass.
func Check(before, after []byte) error {
	var b, a object
	if err := json.Unmarshal(before, &b); err != nil {
		return fmt.Errorf("decoding the hub object: %w", err)
	}
	if err := json.Unmarshal(after, &a); err != nil {
		return fmt.Errorf("decoding the overridden object: %w", err)
	}
	switch a.Kind {
	case "Role", "ClusterRole":
		if !reflect.DeepEqual(a.AggregationRule, b.AggregationRule) {
			return &Error{What: "a changed aggregationRule (it would gather other roles' rules)"}
		}
		return covered(b.Rules, a.Rules)
	case "RoleBinding", "ClusterRoleBinding":
		if a.RoleRef != b.RoleRef {
			return &Error{What: fmt.Sprintf("roleRef %s %s (the hub object binds %s %s)", a.RoleRef.Kind, a.RoleRef.Name, b.RoleRef.Kind, b.RoleRef.Name)}
		}
		for _, s := range a.Subjects {
			if !slices.ContainsFunc(b.Subjects, func(o rbacv1.Subject) bool { return sameSubject(o, s) }) {
				return &Error{What: "subject " + describeSubject(s)}
			}
		}
	}
	return nil
}

// covered is an *Error naming the first rule of servant that owner does not
// cover.
func covered(owner, servant []rbacv1.PolicyRule) error {
	for _, rules := range [][]rbacv1.PolicyRule{owner, servant} {
		if n := combinations(rules); n > MaxCombinations {
			return &Error{What: fmt.Sprintf("rules of %d verb, group, resource and name combinations, more than the %d compared", n, MaxCombinations)}
		}
	}
	if ok, missing := validation.Covers(owner, servant); !ok {
		return &Error{What: describeRules(missing)}
	}
	return nil
}

// combinations counts what validation.Covers breaks rules down into.
func combinations(rules []rbacv1.PolicyRule) int {
	n := 0
	for _, r := range rules {
		c := max(len(r.Verbs), 1) * max(len(r.APIGroups), 1) * max(len(r.Resources), 1) * max(len(r.ResourceNames), 1)
		c += len(r.Verbs) * len(r.NonResourceURLs)
		if c > MaxCombinations || n+c > MaxCombinations {
			return MaxCombinations + 1
		}
		n += c
	}
	return n
}

func sameSubject(a, b rbacv1.Subject) bool {
	return a.Kind == b.Kind && a.Name == b.Name && a.Namespace == b.Namespace && (a.APIGroup == b.APIGroup || a.APIGroup == "" || b.APIGroup == "")
}

func describeSubject(s rbacv1.Subject) string {
	if s.Namespace != "" {
		return fmt.Sprintf("%s %s/%s", s.Kind, s.Namespace, s.Name)
	}
	return s.Kind + " " + s.Name
}

// describeRules names missing rules (broken down, one combination each) in one
// line, the first few of them.
func describeRules(rules []rbacv1.PolicyRule) string {
	const shown = 3
	parts := make([]string, 0, shown+1)
	for i, r := range rules {
		if i == shown {
			parts = append(parts, fmt.Sprintf("and %d more", len(rules)-shown))
			break
		}
		parts = append(parts, describeRule(r))
	}
	return strings.Join(parts, "; ")
}

func describeRule(r rbacv1.PolicyRule) string {
	var b strings.Builder
	fmt.Fprintf(&b, "rule {verbs: [%s]", strings.Join(r.Verbs, " "))
	if len(r.NonResourceURLs) > 0 {
		fmt.Fprintf(&b, ", nonResourceURLs: [%s]}", strings.Join(r.NonResourceURLs, " "))
		return b.String()
	}
	group := strings.Join(r.APIGroups, " ")
	if group == "" {
		group = `""`
	}
	fmt.Fprintf(&b, ", apiGroups: [%s], resources: [%s]", group, strings.Join(r.Resources, " "))
	if len(r.ResourceNames) > 0 {
		fmt.Fprintf(&b, ", resourceNames: [%s]", strings.Join(r.ResourceNames, " "))
	}
	return b.String() + "}"
}
