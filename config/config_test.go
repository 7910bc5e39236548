package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestCRDs(t *testing.T) {
	g := NewWithT(t)
	hub, err := HubCRDs()
	g.Expect(err).NotTo(HaveOccurred())
	var hubNames []string
	for _, c := range hub {
		hubNames = append(hubNames, c.Name)
	}
	g.Expect(hubNames).To(ConsistOf(
		"placements.placement.lodestar.dev", "resourceinterpretations.placement.lodestar.dev", "placementrevisions.placement.lodestar.dev", "rolloutapprovals.placement.lodestar.dev", "clustersetbindings.placement.lodestar.dev", "clusterplacements.placement.lodestar.dev",
		"memberaccessgrants.placement.lodestar.dev", "consumeraccessgrants.placement.lodestar.dev", "fleetquotas.placement.lodestar.dev", "clusterfleetquotas.placement.lodestar.dev", "works.multicluster.x-k8s.io", "clusterprofiles.multicluster.x-k8s.io", "placementdecisions.multicluster.x-k8s.io",
		"serviceexports.multicluster.x-k8s.io", "serviceimports.multicluster.x-k8s.io", "exportedservices.services.lodestar.dev", "importedservices.services.lodestar.dev"))

	member, err := MemberCRDs()
	g.Expect(err).NotTo(HaveOccurred())
	var memberNames []string
	for _, c := range member {
		memberNames = append(memberNames, c.Name)
	}
	g.Expect(memberNames).To(ConsistOf("appliedworks.work.lodestar.dev", "clusterproperties.about.k8s.io",
		"serviceexports.multicluster.x-k8s.io", "serviceimports.multicluster.x-k8s.io"))
}

func TestRules(t *testing.T) {
	g := NewWithT(t)
	agent, err := AgentHubRules()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(agent).NotTo(BeEmpty())
	for _, r := range agent {
		if slices.Contains(r.Resources, "secrets") {
			// Member access: the agent writes its one Secret, and reads or lists no other.
			g.Expect(r.Resources).To(ConsistOf("secrets"))
			g.Expect(r.ResourceNames).To(ConsistOf("lodestar-member-access"))
			g.Expect(r.Verbs).To(ConsistOf("get", "update", "patch"))
		}
		g.Expect(r.Resources).NotTo(ContainElement("*"))
		if slices.Contains(r.Resources, "works") {
			g.Expect(r.Verbs).NotTo(ContainElement(BeElementOf("create", "delete", "deletecollection", "*")), "the agent never creates or deletes Works")
		}
	}
	hubRules, err := HubManagerRules()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hubRules).NotTo(BeEmpty())
}

// The charts ship exactly the generated CRDs, RBAC rules and admission policy
// (`make manifests` copies them); a chart that drifts from config/ fails here.
func TestChartsShipTheGeneratedFiles(t *testing.T) {
	g := NewWithT(t)
	same := func(chartFile, configFile string) {
		t.Helper()
		want, err := os.ReadFile(configFile)
		g.Expect(err).NotTo(HaveOccurred())
		got, err := os.ReadFile(filepath.Join("..", "charts", chartFile))
		g.Expect(err).NotTo(HaveOccurred(), "run make manifests")
		g.Expect(string(got)).To(Equal(string(want)), "charts/%s differs from config/%s: run make manifests", chartFile, configFile)
	}
	crds := func(chart string, prefixes ...string) {
		t.Helper()
		want := 0
		entries, err := os.ReadDir("crd/bases")
		g.Expect(err).NotTo(HaveOccurred())
		for _, e := range entries {
			if slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(e.Name(), p) }) {
				same(filepath.Join(chart, "crds", e.Name()), filepath.Join("crd/bases", e.Name()))
				want++
			}
		}
		shipped, err := os.ReadDir(filepath.Join("..", "charts", chart, "crds"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(shipped).To(HaveLen(want), "charts/%s/crds has CRDs that config/crd/bases does not", chart)
	}
	crds("lodestar-hub", "placement.lodestar.dev_", "multicluster.x-k8s.io_", "services.lodestar.dev_")
	crds("lodestar-agent", "work.lodestar.dev_", "about.k8s.io_", "multicluster.x-k8s.io_service")
	same("lodestar-hub/files/role.yaml", "rbac/hub/role.yaml")
	same("lodestar-hub/files/agent-works.yaml", "admission/agent-works.yaml")
	same("lodestar-hub/files/agent-tokens.yaml", "admission/agent-tokens.yaml")
	same("lodestar-hub/files/agent-profiles.yaml", "admission/agent-profiles.yaml")
	same("lodestar-hub/files/clusterset-bindings.yaml", "admission/clusterset-bindings.yaml")
	same("lodestar-hub/files/placement-scope.yaml", "admission/placement-scope.yaml")
	same("lodestar-hub/files/tenant-pods.yaml", "admission/tenant-pods.yaml")
	same("lodestar-hub/files/forbidden-kinds.yaml", "admission/forbidden-kinds.yaml")
	same("lodestar-hub/files/tenancy-roles.yaml", "rbac/tenancy/roles.yaml")
	same("lodestar-hub/files/cluster-names.yaml", "optional-admission/cluster-names.yaml")
}
