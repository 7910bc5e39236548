package mcs

import (
	"testing"

	. "github.com/onsi/gomega"
)

// What a tenant reads through placements/services is its Placement's: the
// Services it placed, on the clusters it reaches; not a member-local Service
// of the namespace, nor another cluster's export or problem.
func TestWithinOnePlacement(t *testing.T) {
	g := NewWithT(t)
	reports := []Report{
		{Name: "web", Type: "ClusterSetIP", Exporters: map[string]int{"member-1": 2, "member-2": 3, "member-9": 1},
			Withdrawn: []string{"member-2", "member-9"}, Problems: []string{"member-9: Conflict: ports differ", "member-1: Conflict: ports differ"}},
		{Name: "member-local", Exporters: map[string]int{"member-9": 1}},
	}
	got := Within(reports, map[string]bool{"web": true}, map[string]bool{"member-1": true, "member-2": true})
	g.Expect(got).To(HaveLen(1))
	g.Expect(got[0].Exporters).To(Equal(map[string]int{"member-1": 2, "member-2": 3}))
	g.Expect(got[0].Withdrawn).To(Equal([]string{"member-2"}))
	g.Expect(got[0].Problems).To(Equal([]string{"member-1: Conflict: ports differ"}))
	g.Expect(reports[0].Exporters).To(HaveKey("member-9"), "the namespace's reports are left as they are")
}
