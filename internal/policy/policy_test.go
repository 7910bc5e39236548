package policy

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// manifest is an object as a Work carries it, with its namespace.
type manifest struct {
	gvk schema.GroupVersionKind
	ns  string
	obj *unstructured.Unstructured
}

func m(apiVersion, kind, ns, name string, fields map[string]any) manifest {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": name}}}
	for k, v := range fields {
		u.Object[k] = v
	}
	return manifest{u.GroupVersionKind(), ns, u}
}

func rbac(kind, ns string, fields map[string]any) manifest {
	return m("rbac.authorization.k8s.io/v1", kind, ns, "x", fields)
}

func rules(verbs, resources []any) map[string]any {
	return map[string]any{"rules": []any{map[string]any{"verbs": verbs, "resources": resources}}}
}

func TestDenied(t *testing.T) {
	cm := func(ns string) manifest { return m("v1", "ConfigMap", ns, "c", nil) }
	clusterAdmin := rbac("ClusterRoleBinding", "", map[string]any{"roleRef": map[string]any{"kind": "ClusterRole", "name": "cluster-admin"}})
	tests := []struct {
		name   string
		policy Policy
		m      manifest
		want   string // a substring of the reason; "" means allowed
	}{
		{name: "default: an ordinary object", m: cm("app")},
		{name: "default: kube-system is denied", m: cm("kube-system"), want: "denies namespace kube-system"},
		{name: "default: the agent's namespace is denied", m: cm("lodestar-system"), want: "denies namespace lodestar-system"},
		{name: "default: a Namespace object named kube-system is denied", m: m("v1", "Namespace", "", "kube-system", nil), want: "denies namespace kube-system"},
		{name: "denied kind", policy: Policy{DeniedKinds: []string{"Secret"}}, m: m("v1", "Secret", "app", "s", nil), want: "denies kind Secret"},
		{name: "kinds not allowed", policy: Policy{AllowedKinds: []string{"apps/*"}}, m: cm("app"), want: "allows only kinds apps/*"},
		{name: "a group wildcard allows its kinds", policy: Policy{AllowedKinds: []string{"apps/*"}}, m: m("apps/v1", "Deployment", "app", "d", nil)},
		{name: "namespaces not allowed", policy: Policy{AllowedNamespaces: []string{"team-*"}}, m: cm("app"), want: "allows only namespaces team-*"},
		{name: "a namespace pattern allows", policy: Policy{AllowedNamespaces: []string{"team-*"}}, m: cm("team-a")},
		{name: "own denied namespaces replace kube-system", policy: Policy{DeniedNamespaces: []string{"prod"}}, m: cm("kube-system")},
		{name: "but never the agent's own", policy: Policy{DeniedNamespaces: []string{"prod"}}, m: cm("lodestar-system"), want: "denies namespace lodestar-system"},
		{name: "cluster-admin binding", m: clusterAdmin, want: "binds cluster-admin"},
		{name: "a wildcard verb", m: rbac("ClusterRole", "", rules([]any{"*"}, []any{"pods"})), want: `grants verb "*"`},
		{name: "escalate", m: rbac("Role", "app", rules([]any{"get", "escalate"}, []any{"roles"})), want: `grants verb "escalate"`},
		{name: "every resource", m: rbac("Role", "app", rules([]any{"get"}, []any{"*"})), want: "grants every resource"},
		{name: "a modest Role", m: rbac("Role", "app", rules([]any{"get", "list"}, []any{"configmaps"}))},
		{name: "escalation allowed by the admin", policy: Policy{AllowEscalatingRBAC: true}, m: clusterAdmin},
		{name: "a ServiceImport, whatever the policy", policy: Policy{AllowEscalatingRBAC: true, AllowedKinds: []string{"multicluster.x-k8s.io/*"}},
			m: m("multicluster.x-k8s.io/v1beta1", "ServiceImport", "app", "web", nil), want: "never placed"},
		{name: "an EndpointSlice with the MCS labels", m: m("discovery.k8s.io/v1", "EndpointSlice", "app", "web-1",
			map[string]any{"metadata": map[string]any{"name": "web-1", "labels": map[string]any{"multicluster.kubernetes.io/source-cluster": "member-2"}}}),
			want: "labelled multicluster.kubernetes.io/source-cluster"},
		{name: "a ServiceExport", m: m("multicluster.x-k8s.io/v1beta1", "ServiceExport", "app", "web", nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c, err := NewChecker(tt.policy, "lodestar-system")
			g.Expect(err).NotTo(HaveOccurred())
			got := c.Denied(tt.m.gvk, tt.m.ns, tt.m.obj)
			if tt.want == "" {
				g.Expect(got).To(BeEmpty())
			} else {
				g.Expect(got).To(ContainSubstring(tt.want))
			}
		})
	}
}

func TestValidate(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Policy{AllowedNamespaces: []string{"[bad"}}.Validate()).To(MatchError(ContainSubstring("namespace pattern")))
	g.Expect(Policy{DeniedKinds: []string{"a/b/c"}}.Validate()).To(MatchError(ContainSubstring("group/Kind")))
	g.Expect(Policy{AllowedKinds: []string{"apps/*", "ConfigMap"}}.Validate()).To(Succeed())
}

// The escalations a member is protected from unless its admin allows them, and
// cluster-scoped kinds off the allow list.
func TestEscalationsAndClusterScopedKinds(t *testing.T) {
	g := NewWithT(t)
	wide := m("rbac.authorization.k8s.io/v1", "ClusterRole", "", "wide", rules([]any{"*"}, []any{"pods"}))
	view := m("rbac.authorization.k8s.io/v1", "ClusterRole", "", "view", rules([]any{"get", "list"}, []any{"pods"}))
	deployer := m("rbac.authorization.k8s.io/v1", "ClusterRole", "", "deployer", rules([]any{"get", "create"}, []any{"deployments"}))
	c, err := NewChecker(Policy{AllowedClusterScopedKinds: []string{"Namespace", "rbac.authorization.k8s.io/*"}}, "lodestar-system")
	g.Expect(err).NotTo(HaveOccurred())
	c.LookupRole = func(kind, namespace, name string) (*unstructured.Unstructured, error) {
		switch {
		case kind == "ClusterRole" && name == "wide":
			return wide.obj, nil
		case kind == "ClusterRole" && name == "view":
			return view.obj, nil
		case kind == "ClusterRole" && name == "deployer":
			return deployer.obj, nil
		case name == "secret":
			return nil, errors.New("forbidden")
		}
		return nil, nil
	}
	denied := func(mf manifest) string { return c.Denied(mf.gvk, mf.ns, mf.obj) }
	binding := func(kind, ns, roleKind, role string) manifest {
		return rbac(kind, ns, map[string]any{"roleRef": map[string]any{"kind": roleKind, "name": role}})
	}
	g.Expect(denied(rbac("ClusterRole", "", map[string]any{"aggregationRule": map[string]any{}}))).To(ContainSubstring("aggregationRule"))
	g.Expect(denied(binding("RoleBinding", "shop", "ClusterRole", "admin"))).To(ContainSubstring("binds admin"))
	g.Expect(denied(binding("ClusterRoleBinding", "", "ClusterRole", "edit"))).To(ContainSubstring("binds edit"))
	g.Expect(denied(binding("RoleBinding", "shop", "ClusterRole", "wide"))).To(ContainSubstring("which escalates"))
	g.Expect(denied(binding("RoleBinding", "shop", "ClusterRole", "view"))).To(BeEmpty(), "a role that does not escalate")
	g.Expect(denied(binding("RoleBinding", "shop", "Role", "secret"))).To(ContainSubstring("cannot read"))
	g.Expect(denied(binding("ClusterRoleBinding", "", "ClusterRole", "system:controller:daemon-set-controller"))).To(ContainSubstring("binds system:controller:daemon-set-controller"))
	g.Expect(denied(binding("ClusterRoleBinding", "", "ClusterRole", "deployer"))).To(ContainSubstring("in every namespace, which grants creating deployments"))
	g.Expect(denied(binding("RoleBinding", "shop", "ClusterRole", "deployer"))).To(BeEmpty(), "creating pods in one namespace")
	why, retry := c.Check(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"}, "shop",
		binding("RoleBinding", "shop", "Role", "later").obj)
	g.Expect(why).To(ContainSubstring("which the member does not have (yet)"))
	g.Expect(retry).To(BeTrue(), "a role that may be created later")
	g.Expect(denied(m("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.example.com", nil))).To(ContainSubstring("only cluster-scoped kinds"))
	g.Expect(denied(m("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "hook", nil))).To(ContainSubstring("only cluster-scoped kinds"))
	g.Expect(denied(m("v1", "Namespace", "", "shop", nil))).To(BeEmpty())
	g.Expect(denied(m("v1", "ConfigMap", "shop", "c", nil))).To(BeEmpty(), "namespaced kinds are not limited by the cluster-scoped list")

	_, err = NewChecker(Policy{NamespacePodSecurity: "lenient"}, "")
	g.Expect(err).To(MatchError(ContainSubstring("namespacePodSecurity")))

	permissive, err := NewChecker(Policy{AllowedClusterScopedKinds: []string{"*"}}, "")
	g.Expect(err).NotTo(HaveOccurred())
	crd := m("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.example.com", nil)
	g.Expect(permissive.Denied(crd.gvk, "", crd.obj)).To(BeEmpty(), `["*"] allows every cluster-scoped kind`)
}
