package names

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestWork(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Work("team-a", "web")).To(Equal("team-a.web"))

	long := Work("team-a", strings.Repeat("x", 253))
	g.Expect(len(long)).To(BeNumerically("<=", validation.DNS1123SubdomainMaxLength))
	g.Expect(validation.IsDNS1123Subdomain(long)).To(BeEmpty())
	g.Expect(Work("team-a", strings.Repeat("x", 253))).To(Equal(long), "deterministic")
	g.Expect(Work("team-a", strings.Repeat("x", 252)+"y")).NotTo(Equal(long))
}

func TestWorkPart(t *testing.T) {
	g := NewWithT(t)
	g.Expect(WorkPart("team-a", "web", 0)).To(Equal(Work("team-a", "web")), "part 0 is the Work of a Placement that fits in one")
	g.Expect(WorkPart("team-a", "web", 2)).To(Equal("team-a.web-part2"))
	long := WorkPart("team-a", strings.Repeat("x", 253), 1)
	g.Expect(validation.IsDNS1123Subdomain(long)).To(BeEmpty())
	g.Expect(long).NotTo(Equal(WorkPart("team-a", strings.Repeat("x", 253), 2)))
}

func TestDecisionSlice(t *testing.T) {
	g := NewWithT(t)
	g.Expect(DecisionSlice("web", 0)).To(Equal("web-0"))
	g.Expect(DecisionSlice("web", 12)).To(Equal("web-12"))
	long := DecisionSlice(strings.Repeat("p", 253), 123)
	g.Expect(validation.IsDNS1123Subdomain(long)).To(BeEmpty())
}

func TestLabelValue(t *testing.T) {
	g := NewWithT(t)
	g.Expect(LabelValue("web")).To(Equal("web"))
	long := LabelValue(strings.Repeat("a", 100))
	g.Expect(validation.IsValidLabelValue(long)).To(BeEmpty())
	g.Expect(long).NotTo(Equal(LabelValue(strings.Repeat("a", 101))))
}

func TestClusterNamespace(t *testing.T) {
	g := NewWithT(t)
	g.Expect(ClusterNamespace("east")).To(Equal("lodestar-cluster-east"))
	c, ok := ClusterFromNamespace("lodestar-cluster-east")
	g.Expect(ok).To(BeTrue())
	g.Expect(c).To(Equal("east"))
	_, ok = ClusterFromNamespace("team-a")
	g.Expect(ok).To(BeFalse())
	_, ok = ClusterFromNamespace("lodestar-cluster-")
	g.Expect(ok).To(BeFalse())
}

func TestAppliedWork(t *testing.T) {
	g := NewWithT(t)
	g.Expect(AppliedWork("0123abcd", "lodestar-cluster-a", "demo.web")).To(Equal("0123abcd.lodestar-cluster-a.demo.web"))
	g.Expect(AppliedWork("0123abcd", "lodestar-cluster-a", "demo.web")).NotTo(Equal(AppliedWork("0123abcd", "lodestar-cluster-b", "demo.web")))
	g.Expect(AppliedWork("0123abcd", "lodestar-cluster-a", "demo.web")).NotTo(Equal(AppliedWork("4567ef01", "lodestar-cluster-a", "demo.web")), "two hubs")
	long := AppliedWork("0123abcd", "lodestar-cluster-a", strings.Repeat("x", 250))
	g.Expect(long).To(HaveLen(253))
	g.Expect(IsShortened(long)).To(BeTrue())
	g.Expect(IsShortened("lodestar-cluster-a.demo.web")).To(BeFalse())
}

func TestHubID(t *testing.T) {
	g := NewWithT(t)
	g.Expect(HubID("https://hub.example.com:6443")).To(HaveLen(12))
	g.Expect(HubID("https://hub.example.com:6443/")).To(Equal(HubID("https://HUB.example.com:6443")))
	g.Expect(HubID("https://hub.example.com:6443")).NotTo(Equal(HubID("https://other.example.com:6443")))
}
