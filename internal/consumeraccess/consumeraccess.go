// Package consumeraccess is what a ConsumerAccessGrant makes, decided from the
// grant and its clusters alone: the hub role that lets its consumers use the
// tunnel access provider of those clusters (the debug API's
// clusters/<cluster>/proxy), and the Work that carries, to each cluster, a
// ClusterRole of the grant's rules bound to the consumers' member identities.
// The controller (controllers/hub/consumeraccess) writes them.
package consumeraccess

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	debugv1alpha1 "github.com/lodestar-dev/lodestar/api/debug/v1alpha1"
	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// RoleName is the name of the grant's roles and bindings, on the hub (its
// consumers' use of the tunnel provider) and on each member (its rules).
func RoleName(grant string) string { return "lodestar:consumer-access:" + grant }

// WorkName is the name of the Work carrying the grant's rules to a cluster:
// no dot, so never a Placement's Work ("<namespace>.<placement>").
func WorkName(grant string) string { return "consumer-access-" + grant }

// HubRole is the grant's hub ClusterRole: the tunnel provider of its clusters,
// by name. Without clusters it grants nothing (a rule without names would
// grant every cluster).
func HubRole(grant string, clusters []string) *rbacv1.ClusterRole {
	role := &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: RoleName(grant), Labels: map[string]string{placementv1alpha1.ConsumerAccessGrantLabel: grant}},
	}
	if len(clusters) > 0 {
		role.Rules = []rbacv1.PolicyRule{{
			APIGroups: []string{debugv1alpha1.Group}, Resources: []string{debugv1alpha1.Clusters + "/" + debugv1alpha1.Proxy},
			ResourceNames: slices.Sorted(slices.Values(clusters)), Verbs: debugv1alpha1.ProxyVerbs,
		}}
	}
	return role
}

// HubBinding binds the grant's hub ClusterRole to its consumers' ServiceAccounts.
func HubBinding(grant *placementv1alpha1.ConsumerAccessGrant) *rbacv1.ClusterRoleBinding {
	b := &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: RoleName(grant.Name), Labels: map[string]string{placementv1alpha1.ConsumerAccessGrantLabel: grant.Name}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: RoleName(grant.Name)},
	}
	for _, c := range grant.Spec.Consumers {
		b.Subjects = append(b.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: c.Namespace, Name: c.Name})
	}
	return b
}

// MemberObjects are the member's ClusterRole of the grant's rules and its
// binding to the consumers' member identities.
func MemberObjects(grant *placementv1alpha1.ConsumerAccessGrant) (*rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding) {
	role := &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: RoleName(grant.Name)},
		Rules:      grant.Spec.Rules,
	}
	b := &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: RoleName(grant.Name)},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: RoleName(grant.Name)},
	}
	for _, c := range grant.Spec.Consumers {
		b.Subjects = append(b.Subjects, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: debugv1alpha1.ConsumerUser(c.Namespace, c.Name)})
	}
	return role, b
}

// Work is the Work that carries the grant's member objects to cluster, labelled
// with the grant and the hub manager that owns the cluster's set.
func Work(grant *placementv1alpha1.ConsumerAccessGrant, cluster, manager string) (*workv1alpha1.Work, error) {
	role, binding := MemberObjects(grant)
	w := &workv1alpha1.Work{
		TypeMeta: metav1.TypeMeta{APIVersion: workv1alpha1.GroupVersion.String(), Kind: "Work"},
		ObjectMeta: metav1.ObjectMeta{Name: WorkName(grant.Name), Namespace: names.ClusterNamespace(cluster), Labels: map[string]string{
			placementv1alpha1.ConsumerAccessGrantLabel: grant.Name, placementv1alpha1.HubManagerLabel: manager,
		}},
	}
	var content []byte
	for _, obj := range []runtime.Object{role, binding} {
		raw, err := json.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("encoding the member's %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, err)
		}
		w.Spec.Workload.Manifests = append(w.Spec.Workload.Manifests, workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}})
		content = append(content, raw...)
	}
	w.Annotations = map[string]string{placementv1alpha1.ConsumerAccessContentAnnotation: names.Hash(string(content))[:16]}
	return w, nil
}

// Current tells whether have, the grant's Work as the hub holds it, already
// carries what want carries, for the same hub manager.
func Current(have, want *workv1alpha1.Work) bool {
	return have.DeletionTimestamp.IsZero() &&
		have.Annotations[placementv1alpha1.ConsumerAccessContentAnnotation] == want.Annotations[placementv1alpha1.ConsumerAccessContentAnnotation] &&
		have.Labels[placementv1alpha1.HubManagerLabel] == want.Labels[placementv1alpha1.HubManagerLabel]
}

// Applied says whether the agent applied the Work as it is now (its Applied
// condition True for its generation), and the condition's message when it failed.
func Applied(w *workv1alpha1.Work) (applied bool, failure string) {
	c := apimeta.FindStatusCondition(w.Status.Conditions, lodestarworkv1alpha1.ConditionApplied)
	if c == nil || c.ObservedGeneration != w.Generation {
		return false, ""
	}
	if c.Status == metav1.ConditionTrue {
		return true, ""
	}
	if c.Status == metav1.ConditionFalse {
		return false, c.Message
	}
	return false, ""
}

// Ready is the grant's Ready condition: invalid (a selector that does not
// parse), failed (cluster: the member's refusal), pending (clusters whose
// member has not applied the rules yet).
func Ready(invalid error, failed map[string]string, pending []string) metav1.Condition {
	c := metav1.Condition{Type: placementv1alpha1.ReadyCondition, Status: metav1.ConditionFalse}
	switch {
	case invalid != nil:
		c.Reason, c.Message = placementv1alpha1.ReasonInvalidGrantSelector, invalid.Error()
	case len(failed) > 0:
		c.Reason = placementv1alpha1.ReasonRulesFailed
		var parts []string
		for _, cluster := range slices.Sorted(maps.Keys(failed)) {
			parts = append(parts, cluster+": "+failed[cluster])
		}
		c.Message = "members refused the grant's rules (their admin lets the agent grant less; agent chart consumerAccess.rules): " + strings.Join(parts, "; ")
	case len(pending) > 0:
		c.Reason = placementv1alpha1.ReasonRulesPending
		c.Message = "the rules are not applied yet on " + strings.Join(slices.Sorted(slices.Values(pending)), ", ")
	default:
		c.Status, c.Reason = metav1.ConditionTrue, placementv1alpha1.ReasonRulesApplied
		c.Message = "every granted cluster holds the grant's rules for its consumers"
	}
	return c
}
