package placementstatus

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
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

func TestCoalesceWindowGrowsWithThePlacement(t *testing.T) {
	g := NewWithT(t)
	g.Expect(coalesceWindowFor(0, false)).To(Equal(coalesceWindow), "not known yet: the large window")
	g.Expect(coalesceWindowFor(0, true)).To(Equal(5 * time.Millisecond))
	g.Expect(coalesceWindowFor(2, true)).To(Equal(5*time.Millisecond), "two clusters' reports are not held 100 ms")
	g.Expect(coalesceWindowFor(20, true)).To(Equal(20 * time.Millisecond))
	g.Expect(coalesceWindowFor(100, true)).To(Equal(coalesceWindow))
	g.Expect(coalesceWindowFor(1<<30, true)).To(Equal(coalesceWindow), "never more")

	var r Reconciler
	key := types.NamespacedName{Namespace: "shop", Name: "web"}
	g.Expect(r.window(reconcile.Request{NamespacedName: key})).To(Equal(coalesceWindow))
	r.sizes.Store(key, 40)
	g.Expect(r.window(reconcile.Request{NamespacedName: key})).To(Equal(40 * time.Millisecond))
}
