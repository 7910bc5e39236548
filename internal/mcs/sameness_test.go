package mcs

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestSamenessDomains(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sets := map[string][]string{
		"edge":   {"e1", "e2"},
		"retail": {"e2", "r1"},       // shares e2 with edge: one domain
		"lab":    {"l1"},             // alone
		"cloud":  {"c1", "c2", "e1"}, // hub-placed, but e1 is also edge's
		"empty":  nil,
	}
	sameness := map[string]bool{"edge": true, "retail": true, "lab": true, "empty": true}
	d := SamenessDomains(sets, sameness)
	g.Expect(d).To(Equal(Domains{"e1": "edge", "e2": "edge", "r1": "edge", "l1": "lab", "c1": HubPlaced, "c2": HubPlaced}))
	g.Expect(d.Clusters("edge")).To(Equal([]string{"e1", "e2", "r1"}))
	g.Expect(d.Clusters(HubPlaced)).To(Equal([]string{"c1", "c2"}))
	g.Expect(d.Of("unknown")).To(Equal(HubPlaced))

	// The domain's name does not hang on map order: the first set's name.
	for range 20 {
		g.Expect(SamenessDomains(sets, sameness).Of("r1")).To(Equal("edge"))
	}
	// A chain of sets joined by shared clusters is one domain.
	chain := map[string][]string{"a": {"x"}, "b": {"x", "y"}, "c": {"y", "z"}, "d": {"z"}}
	all := map[string]bool{"a": true, "b": true, "c": true, "d": true}
	g.Expect(SamenessDomains(chain, all)).To(Equal(Domains{"x": "a", "y": "a", "z": "a"}))

	// Without a set in sameness every cluster is the hub's.
	g.Expect(SamenessDomains(sets, nil).Clusters(HubPlaced)).To(Equal([]string{"c1", "c2", "e1", "e2", "l1", "r1"}))
}
