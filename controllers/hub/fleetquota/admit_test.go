package fleetquota

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/quota"
)

func rev(n int64, admitted bool) *placementv1alpha1.PlacementRevision {
	r := &placementv1alpha1.PlacementRevision{Spec: placementv1alpha1.PlacementRevisionSpec{Revision: n}}
	if admitted {
		r.Annotations = map[string]string{placementv1alpha1.QuotaAdmittedAnnotation: "true"}
	}
	return r
}

func cpu(s string) quota.Usage { return quota.Usage{"requests.cpu": resource.MustParse(s)} }

func placedOf(name string, use map[string]string, target *placementv1alpha1.PlacementRevision, ask string, askOn ...string) *placed {
	pl := &placed{placement: &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: name}}, byCluster: map[string]quota.Usage{}, target: target}
	for cluster, u := range use {
		pl.byCluster[cluster] = cpu(u)
	}
	if ask != "" {
		pl.ask, pl.askClusters = cpu(ask), askOn
	}
	return pl
}

func quotas(hard map[string]string) []bound {
	b := bound{what: "FleetQuota team", hard: map[string]resource.Quantity{}, namespaces: []string{"ns"}}
	for k, v := range hard {
		b.hard[k] = resource.MustParse(v)
	}
	return []bound{b}
}

func in(ps ...*placed) map[string][]*placed { return map[string][]*placed{"ns": ps} }

// Oldest first, each beside what the others claim; an admitted revision
// rolling out claims the larger of its use and its ask.
func TestAdmit(t *testing.T) {
	g := NewWithT(t)
	a := placedOf("a", map[string]string{"m1": "1", "m2": "1"}, rev(3, true), "3", "m1", "m2")
	b := placedOf("b", nil, rev(1, false), "2", "m3")
	ds := admit("ns", in(a, b), quotas(map[string]string{"requests.cpu": "4"}))
	g.Expect(ds).To(HaveLen(2))
	g.Expect(ds[0].admit).To(BeTrue())
	g.Expect(ds[1].admit).To(BeFalse(), "a claims 3 (rolling out), b asks 2: 5 > 4")
	g.Expect(ds[1].message).To(ContainSubstring("requests.cpu: 3 used by the other Placements it bounds and 2 asked, more than the 4 allowed"))
	g.Expect(ds[1].condition().Reason).To(Equal(placementv1alpha1.ReasonQuotaExceeded))

	ds = admit("ns", in(a, b), quotas(map[string]string{"requests.cpu": "5", "clusters": "2"}))
	g.Expect(ds[1].admit).To(BeFalse(), "a third cluster")
	g.Expect(ds[1].message).To(ContainSubstring("clusters: 2 used by the other Placements it bounds and 1 asked, more than the 2 allowed"))

	b2 := placedOf("b", nil, rev(1, false), "2", "m1")
	ds = admit("ns", in(a, b2), quotas(map[string]string{"requests.cpu": "5", "clusters": "2"}))
	g.Expect(ds[1].admit).To(BeTrue(), "a cluster already in use adds none")

	// Two new revisions that each fit alone: the older Placement's first.
	c := placedOf("c", nil, rev(1, false), "3", "m1")
	d := placedOf("d", nil, rev(1, false), "3", "m1")
	ds = admit("ns", in(c, d), quotas(map[string]string{"requests.cpu": "4"}))
	g.Expect([]bool{ds[0].admit, ds[1].admit}).To(Equal([]bool{true, false}))
}
