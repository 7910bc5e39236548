package rbacguard

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

const role = `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"r","namespace":"shop"},"rules":%s}`
const binding = `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"b","namespace":"shop"},"roleRef":%s,"subjects":%s}`

func TestCheck(t *testing.T) {
	getCM := `[{"apiGroups":[""],"resources":["configmaps"],"verbs":["get","list"]}]`
	tests := []struct {
		name          string
		before, after string
		refused       string // a substring of the error; "" passes
	}{
		{"the same rules", fmt.Sprintf(role, getCM), fmt.Sprintf(role, getCM), ""},
		{"fewer verbs", fmt.Sprintf(role, getCM), fmt.Sprintf(role, `[{"apiGroups":[""],"resources":["configmaps"],"verbs":["get"]}]`), ""},
		{"named resources within a wildcard", fmt.Sprintf(role, `[{"apiGroups":["*"],"resources":["*"],"verbs":["get"]}]`),
			fmt.Sprintf(role, `[{"apiGroups":["apps"],"resources":["deployments"],"resourceNames":["web"],"verbs":["get"]}]`), ""},
		{"the issue's endpointslices", fmt.Sprintf(role, getCM),
			fmt.Sprintf(role, `[{"apiGroups":["discovery.k8s.io"],"resources":["endpointslices"],"verbs":["create","update"]}]`),
			"rule {verbs: [create], apiGroups: [discovery.k8s.io], resources: [endpointslices]}"},
		{"endpoints of the core group", fmt.Sprintf(role, getCM),
			fmt.Sprintf(role, `[{"apiGroups":[""],"resources":["endpoints"],"verbs":["create"]}]`), `apiGroups: [""], resources: [endpoints]`},
		{"a wildcard verb", fmt.Sprintf(role, getCM), fmt.Sprintf(role, `[{"apiGroups":[""],"resources":["configmaps"],"verbs":["*"]}]`), "verbs: [*]"},
		{"a resource name dropped", fmt.Sprintf(role, `[{"apiGroups":[""],"resources":["secrets"],"resourceNames":["one"],"verbs":["get"]}]`),
			fmt.Sprintf(role, `[{"apiGroups":[""],"resources":["secrets"],"verbs":["get"]}]`), "resources: [secrets]"},
		{"a subresource", fmt.Sprintf(role, `[{"apiGroups":[""],"resources":["pods"],"verbs":["get"]}]`),
			fmt.Sprintf(role, `[{"apiGroups":[""],"resources":["pods/exec"],"verbs":["get"]}]`), "pods/exec"},
		{"an aggregation rule added",
			`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"c"},"rules":[]}`,
			`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"c"},"aggregationRule":{"clusterRoleSelectors":[{"matchLabels":{"x":"y"}}]}}`,
			"aggregationRule"},
		{"a binding's subject removed",
			fmt.Sprintf(binding, `{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"r"}`, `[{"kind":"ServiceAccount","name":"a","namespace":"shop"},{"kind":"ServiceAccount","name":"b","namespace":"shop"}]`),
			fmt.Sprintf(binding, `{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"r"}`, `[{"kind":"ServiceAccount","name":"a","namespace":"shop"}]`), ""},
		{"a binding's subject added",
			fmt.Sprintf(binding, `{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"r"}`, `[{"kind":"ServiceAccount","name":"a","namespace":"shop"}]`),
			fmt.Sprintf(binding, `{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"r"}`, `[{"kind":"Group","name":"system:authenticated"}]`),
			"subject Group system:authenticated"},
		{"a binding's role changed",
			fmt.Sprintf(binding, `{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"r"}`, `[]`),
			fmt.Sprintf(binding, `{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"cluster-admin"}`, `[]`),
			"roleRef ClusterRole cluster-admin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := Check([]byte(tt.before), []byte(tt.after))
			if tt.refused == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tt.refused)))
			g.Expect(err).To(BeAssignableToTypeOf(&Error{}))
		})
	}
}

// A rule list a tenant makes huge (RBAC breaks rules down into every
// combination) is refused, not broken down.
func TestHugeRulesAreRefusedNotBrokenDown(t *testing.T) {
	g := NewWithT(t)
	many := make([]string, 200)
	for i := range many {
		many[i] = fmt.Sprintf("%q", fmt.Sprintf("r%d", i))
	}
	list := "[" + strings.Join(many, ",") + "]"
	rule := fmt.Sprintf(`[{"apiGroups":%s,"resources":%s,"verbs":%s}]`, list, list, list)
	err := Check([]byte(fmt.Sprintf(role, rule)), []byte(fmt.Sprintf(role, rule)))
	g.Expect(err).To(MatchError(ContainSubstring("more than the 16384 compared")))
}

func TestGuarded(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Guarded("rbac.authorization.k8s.io/v1", "Role")).To(BeTrue())
	g.Expect(Guarded("rbac.authorization.k8s.io/v1", "ClusterRoleBinding")).To(BeTrue())
	g.Expect(Guarded("v1", "ConfigMap")).To(BeFalse())
	g.Expect(Guarded("example.com/v1", "Role")).To(BeFalse())
}
