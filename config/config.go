// Package config embeds the generated CRDs and RBAC roles, so that tests, the quick
// start and the charts all install exactly what `make manifests` produced.
package config

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

//go:embed crd/bases/*.yaml admission/*.yaml optional-admission/*.yaml rbac/hub/role.yaml rbac/agent/role.yaml rbac/agent-clusterprofile/role.yaml rbac/tenancy/roles.yaml rbac/debug/member-roles.yaml
var files embed.FS

// CRDs returns the CRDs whose API group is one of groups.
func CRDs(groups ...string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	entries, err := fs.ReadDir(files, "crd/bases")
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, e := range entries {
		b, err := files.ReadFile(path.Join("crd/bases", e.Name()))
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(b, crd); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", e.Name(), err)
		}
		for _, g := range groups {
			if crd.Spec.Group == g {
				out = append(out, crd)
			}
		}
	}
	return out, nil
}

// HubCRDs are the CRDs a hub serves.
func HubCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return CRDs("placement.lodestar.dev", "multicluster.x-k8s.io", "services.lodestar.dev")
}

// MemberCRDs are the CRDs a member cluster serves.
func MemberCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	crds, err := CRDs("work.lodestar.dev", "about.k8s.io", "multicluster.x-k8s.io")
	// Of the SIG-Multicluster group, members serve the Multicluster Services
	// API only (Works and ClusterProfiles are the hub's).
	return slices.DeleteFunc(crds, func(c *apiextensionsv1.CustomResourceDefinition) bool {
		return c.Spec.Group == "multicluster.x-k8s.io" && !slices.Contains(mcsKinds, c.Spec.Names.Kind)
	}), err
}

// mcsKinds are the kinds of the Multicluster Services API.
var mcsKinds = []string{"ServiceExport", "ServiceImport"}

// AgentHubRules are the rules the agent needs in its cluster's namespace on the hub,
// as generated from the agent's RBAC markers.
func AgentHubRules() ([]rbacv1.PolicyRule, error) { return rules("rbac/agent/role.yaml") }

// AgentClusterProfileRules are the rules the agent needs in its cluster set's
// namespace on the hub, for its own ClusterProfile (the join adds resourceNames),
// as generated from the RBAC markers of the agent's profile reporter.
func AgentClusterProfileRules() ([]rbacv1.PolicyRule, error) {
	return rules("rbac/agent-clusterprofile/role.yaml")
}

// HubManagerRules are the rules the hub manager needs, as generated from the hub
// controllers' RBAC markers.
func HubManagerRules() ([]rbacv1.PolicyRule, error) { return rules("rbac/hub/role.yaml") }

func rules(name string) ([]rbacv1.PolicyRule, error) {
	b, err := files.ReadFile(name)
	if err != nil {
		return nil, err
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal([]byte(strings.TrimPrefix(string(b), "---\n")), role); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", name, err)
	}
	return role.Rules, nil
}

// TenancyRoles are the ClusterRoles of a hub's users: lodestar:tenant,
// lodestar:approver, lodestar:clusterset-admin and the debug roles
// (docs/tenancy.md, docs/debugging.md).
func TenancyRoles() ([]*rbacv1.ClusterRole, error) {
	return clusterRoles("rbac/tenancy/roles.yaml")
}

// DebugMemberRoles are the member ClusterRoles the agent chart installs for
// hub users debugging their Placements' pods (docs/debugging.md).
func DebugMemberRoles() ([]*rbacv1.ClusterRole, error) {
	return clusterRoles("rbac/debug/member-roles.yaml")
}

// clusterRoles decodes the ClusterRoles of a multi-document file.
func clusterRoles(name string) ([]*rbacv1.ClusterRole, error) {
	b, err := files.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var out []*rbacv1.ClusterRole
	for _, doc := range strings.Split(string(b), "\n---\n") {
		if strings.Contains(doc, "\nkind: ClusterRoleBinding\n") {
			continue // TenancyBindings
		}
		role := &rbacv1.ClusterRole{}
		if err := yaml.UnmarshalStrict([]byte(doc), role); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", name, err)
		}
		out = append(out, role)
	}
	return out, nil
}

// TenancyBindings are the ClusterRoleBindings among the tenancy roles: every
// user reads the ResourceInterpretations.
func TenancyBindings() ([]*rbacv1.ClusterRoleBinding, error) {
	b, err := files.ReadFile("rbac/tenancy/roles.yaml")
	if err != nil {
		return nil, err
	}
	var out []*rbacv1.ClusterRoleBinding
	for _, doc := range strings.Split(string(b), "\n---\n") {
		if !strings.Contains(doc, "\nkind: ClusterRoleBinding\n") {
			continue
		}
		binding := &rbacv1.ClusterRoleBinding{}
		if err := yaml.UnmarshalStrict([]byte(doc), binding); err != nil {
			return nil, fmt.Errorf("decoding a binding of the tenancy roles: %w", err)
		}
		out = append(out, binding)
	}
	return out, nil
}

// HubAdmissionPolicies are the ValidatingAdmissionPolicies (and their bindings) a
// hub installs, from config/admission.
func HubAdmissionPolicies() ([]client.Object, error) {
	return admissionPolicies("admission")
}

// ClusterNamesPolicy is the optional policy (with its binding for the default
// cluster set) that refuses a ClusterProfile whose name another managed cluster
// set uses, from config/optional-admission.
func ClusterNamesPolicy() ([]client.Object, error) {
	return admissionPolicies("optional-admission")
}

// admissionPolicies decodes the policies and bindings of the files in dir.
func admissionPolicies(dir string) ([]client.Object, error) {
	entries, err := fs.ReadDir(files, dir)
	if err != nil {
		return nil, err
	}
	var out []client.Object
	for _, e := range entries {
		b, err := files.ReadFile(path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		for _, doc := range strings.Split(string(b), "\n---\n") {
			head := struct {
				Kind string `json:"kind"`
			}{}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				return nil, fmt.Errorf("decoding %s: %w", e.Name(), err)
			}
			var obj client.Object
			switch head.Kind {
			case "ValidatingAdmissionPolicy":
				obj = &admissionregistrationv1.ValidatingAdmissionPolicy{}
			case "ValidatingAdmissionPolicyBinding":
				obj = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
			case "MutatingAdmissionPolicy":
				obj = &admissionregistrationv1.MutatingAdmissionPolicy{}
			case "MutatingAdmissionPolicyBinding":
				obj = &admissionregistrationv1.MutatingAdmissionPolicyBinding{}
			default:
				return nil, fmt.Errorf("%s: unexpected kind %q", e.Name(), head.Kind)
			}
			if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
				return nil, fmt.Errorf("decoding %s: %w", e.Name(), err)
			}
			out = append(out, obj)
		}
	}
	return out, nil
}
