package placementstatus

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
)

func TestComputePaceSpacesLargePlacementsOnly(t *testing.T) {
	g := NewWithT(t)
	var p computePace
	key := types.NamespacedName{Namespace: "shop", Name: "web"}
	now := time.Now()
	g.Expect(p.wait(key, 1, 5000, now)).To(BeZero(), "the first computation runs at once")
	g.Expect(p.wait(key, 1, 5000, now.Add(100*time.Millisecond))).To(Equal(400*time.Millisecond), "5 000 clusters: every 0.5 s")
	g.Expect(p.wait(key, 2, 5000, now.Add(100*time.Millisecond))).To(BeZero(), "a new generation runs at once")
	g.Expect(p.wait(key, 2, 5000, now.Add(700*time.Millisecond))).To(BeZero(), "past the spacing")
	g.Expect(p.wait(key, 2, 100_000, now.Add(800*time.Millisecond))).To(Equal(900*time.Millisecond), "at most a second")

	small := types.NamespacedName{Namespace: "shop", Name: "small"}
	g.Expect(p.wait(small, 1, 100, now)).To(BeZero())
	g.Expect(p.wait(small, 1, 100, now.Add(10*time.Millisecond))).To(BeZero(), "100 clusters: 10 ms, less than the gathering window")
	p.forget(small)
	g.Expect(p.wait(small, 1, 100, now.Add(11*time.Millisecond))).To(BeZero())
}
