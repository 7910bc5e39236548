package mcs

import (
	"testing"

	. "github.com/onsi/gomega"

	servicesv1alpha1 "github.com/lodestar-dev/lodestar/api/services/v1alpha1"
)

func TestFitKeepsTheOldestWithinTheBudget(t *testing.T) {
	g := NewWithT(t)
	sources := []servicesv1alpha1.SourceSlices{{Cluster: "a"}, {Cluster: "b"}, {Cluster: "c"}}
	size := func(cluster string) int { return map[string]int{"a": 10, "b": 20, "c": 5}[cluster] }

	kept, left := Fit(sources, size, 100)
	g.Expect(kept).To(HaveLen(3))
	g.Expect(left).To(BeEmpty())

	kept, left = Fit(sources, size, 32)
	g.Expect(kept).To(Equal(sources[:2]), "11 + 21 bytes")
	g.Expect(left).To(Equal([]string{"c"}))

	// Order is kept: a small source after one that does not fit is left out
	// too, so that which exporters are imported does not depend on sizes.
	kept, left = Fit(sources, size, 20)
	g.Expect(kept).To(Equal(sources[:1]))
	g.Expect(left).To(Equal([]string{"b", "c"}))

	kept, left = Fit(sources, size, 0)
	g.Expect(kept).To(BeEmpty())
	g.Expect(left).To(Equal([]string{"a", "b", "c"}))

	kept, left = Fit(nil, size, 0)
	g.Expect(kept).To(BeEmpty())
	g.Expect(left).To(BeEmpty())
}
