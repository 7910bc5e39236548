package config

import (
	"slices"
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
		"placements.placement.lodestar.dev", "works.multicluster.x-k8s.io",
		"clusterprofiles.multicluster.x-k8s.io", "placementdecisions.multicluster.x-k8s.io"))

	member, err := MemberCRDs()
	g.Expect(err).NotTo(HaveOccurred())
	var memberNames []string
	for _, c := range member {
		memberNames = append(memberNames, c.Name)
	}
	g.Expect(memberNames).To(ConsistOf("appliedworks.work.lodestar.dev", "clusterproperties.about.k8s.io"))
}

func TestRules(t *testing.T) {
	g := NewWithT(t)
	agent, err := AgentHubRules()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(agent).NotTo(BeEmpty())
	for _, r := range agent {
		g.Expect(r.Resources).NotTo(ContainElement("secrets"), "the agent never reads Secrets on the hub")
		g.Expect(r.Resources).NotTo(ContainElement("*"))
		if slices.Contains(r.Resources, "works") {
			g.Expect(r.Verbs).NotTo(ContainElement(BeElementOf("create", "delete", "deletecollection", "*")), "the agent never creates or deletes Works")
		}
	}
	hubRules, err := HubManagerRules()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hubRules).NotTo(BeEmpty())
}
