package division

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// oneAtATime is the definition Divide computes: replicas handed out one at a
// time, each to the cluster whose next replica ranks first (before). It runs
// in O(total · log clusters) and serves only as the reference.
func oneAtATime(total int64, clusters []Cluster, seed string) (map[string]int64, bool) {
	shares := map[string]int64{}
	q := &queue{better: func(a, b *seat) bool { return before(a, a.share, b, b.share) }, pos: func(s *seat) *int { return &s.next }}
	left := total
	for _, c := range clusters {
		shares[c.Name] = c.Min
		left -= c.Min
		if c.Weight > 0 && (c.Max == 0 || c.Min < c.Max) {
			q.update(&seat{Cluster: c, share: c.Min, tie: tieBreak(seed, c.Name), next: -1, last: -1}, true)
		}
	}
	for ; left > 0; left-- {
		if q.Len() == 0 {
			return nil, false
		}
		s := q.items[0]
		s.share++
		shares[s.Name] = s.share
		q.update(s, s.Max == 0 || s.share < s.Max)
	}
	return shares, left == 0
}

func randomClusters(r *rand.Rand, n int, maxWeight int64) []Cluster {
	cs := make([]Cluster, n)
	for i := range cs {
		c := Cluster{Name: fmt.Sprintf("c%d", i), Weight: r.Int64N(maxWeight + 1)}
		if r.IntN(4) == 0 {
			c.Min = r.Int64N(4)
		}
		if r.IntN(3) == 0 {
			c.Max = c.Min + r.Int64N(20)
		}
		cs[i] = c
	}
	return cs
}

// The divisor search gives exactly what handing out one replica at a time
// gives, minima, maxima and zero weights included.
func TestDivideIsOneAtATime(t *testing.T) {
	g := NewWithT(t)
	r := rand.New(rand.NewPCG(7, 11))
	for round := range 2000 {
		cs := randomClusters(r, 1+r.IntN(12), []int64{1, 3, 1000, MaxValue}[r.IntN(4)])
		total := r.Int64N(300)
		seed := fmt.Sprint(round)
		want, ok := oneAtATime(total, cs, seed)
		got, err := Divide(total, cs, seed)
		if mins := sumMin(cs); mins > total || !ok {
			g.Expect(err).To(HaveOccurred(), "round %d: %d over %+v", round, total, cs)
			continue
		}
		g.Expect(err).NotTo(HaveOccurred(), "round %d: %d over %+v", round, total, cs)
		g.Expect(got).To(Equal(want), "round %d: %d over %+v", round, total, cs)
	}
}

func sumMin(cs []Cluster) int64 {
	var n int64
	for _, c := range cs {
		n += c.Min
	}
	return n
}

// A tenant's 2^30 replicas over thousands of clusters take a number of steps
// bounded by the clusters, not the replicas (the one-at-a-time loop took 2^30
// steps, and stalled the work generator's workers).
func TestDivideStepsAreBoundedByClusters(t *testing.T) {
	g := NewWithT(t)
	r := rand.New(rand.NewPCG(3, 5))
	for _, n := range []int{1, 2, 10, 1000, 5000} {
		for _, maxWeight := range []int64{1, 7, MaxValue} {
			cs := randomClusters(r, n, maxWeight)
			cs[0].Max, cs[0].Weight = 0, max(cs[0].Weight, 1) // room for every replica
			for _, total := range []int64{MaxValue, MaxValue - 1, 1 << 20, 12345} {
				got, moves, err := divide(total, cs, "uid")
				g.Expect(err).NotTo(HaveOccurred())
				var sum int64
				for _, c := range cs {
					g.Expect(got[c.Name]).To(BeNumerically(">=", c.Min))
					if c.Max > 0 {
						g.Expect(got[c.Name]).To(BeNumerically("<=", c.Max))
					}
					sum += got[c.Name]
				}
				g.Expect(sum).To(Equal(total))
				g.Expect(moves).To(BeNumerically("<=", 4*n+4), "%d replicas over %d clusters (weights up to %d)", total, n, maxWeight)
			}
		}
	}
}

// Past the cap, a workload is refused with a reason, not divided.
func TestTotalsAboveTheCapAreRefused(t *testing.T) {
	g := NewWithT(t)
	_, err := Divide(MaxValue+1, weighted("a", 1), "uid")
	g.Expect(err).To(MatchError(ContainSubstring("cannot divide 1073741825 replicas")))
	w, ok := WorkloadOf([]byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"big"},"spec":{"replicas":2147483648}}`), nil)
	g.Expect(ok).To(BeTrue())
	g.Expect(w.Invalid).To(ContainSubstring("more than a division takes"))
}

// A pod requesting 1e16 cores is refused as absurd; dividing by it panicked
// (its milli-value overflowed to 0), in the hub and in kubectl lodestar render.
func TestAbsurdRequestsAreRefusedNotDividedBy(t *testing.T) {
	g := NewWithT(t)
	raw := []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"greedy"},"spec":{"replicas":3,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1e16"}}}]}}}}`)
	w, ok := WorkloadOf(raw, nil)
	g.Expect(ok).To(BeTrue())
	g.Expect(w.Invalid).To(ContainSubstring("request 10e15 of cpu, more than a division takes"))
	pods, bounded := Room(map[string]resource.Quantity{"cpu": resource.MustParse("1e17")}, w.Requests)
	g.Expect(bounded).To(BeTrue())
	g.Expect(pods).To(BeZero())

	spec := &placementv1alpha1.ReplicaDivision{Method: placementv1alpha1.DivisionCapacity}
	free := map[string]resource.Quantity{"cpu": resource.MustParse("1e18"), "memory": resource.MustParse("1e30")}
	a := Assign(spec, Workloads([]runtime.RawExtension{{Raw: raw}}, nil), []Candidate{{Name: "a", Free: free}, {Name: "b", Free: free}}, "uid", nil)
	g.Expect(a.Problems).To(HaveLen(1))
	g.Expect(a.Problems[0].Message).To(ContainSubstring("more than a division takes"))
}

// FuzzDivide: whatever the input, Divide does not panic, and what it returns is
// a division (the total, within each cluster's minimum and maximum), the one
// handed out one at a time when that is cheap to check.
func FuzzDivide(f *testing.F) {
	f.Add(int64(10), []byte{1, 2, 3}, uint64(0))
	f.Add(int64(MaxValue), []byte{255, 0, 7, 1}, uint64(42))
	f.Add(int64(-1), []byte{}, uint64(1))
	f.Add(int64(MaxValue+1), []byte{9}, uint64(3))
	f.Fuzz(func(t *testing.T, total int64, weights []byte, salt uint64) {
		if len(weights) > 64 {
			weights = weights[:64]
		}
		r := rand.New(rand.NewPCG(salt, uint64(len(weights))))
		cs := make([]Cluster, len(weights))
		for i, w := range weights {
			cs[i] = Cluster{Name: fmt.Sprint(i), Weight: int64(w) << r.IntN(23)}
			if r.IntN(3) == 0 {
				cs[i].Min = r.Int64N(5)
			}
			if r.IntN(3) == 0 {
				cs[i].Max = cs[i].Min + r.Int64N(1<<r.IntN(31))
			}
		}
		got, err := Divide(total, cs, "fuzz")
		if err != nil {
			return
		}
		var sum int64
		for _, c := range cs {
			if got[c.Name] < c.Min || (c.Max > 0 && got[c.Name] > c.Max) || (c.Weight == 0 && got[c.Name] != c.Min) {
				t.Fatalf("cluster %+v got %d", c, got[c.Name])
			}
			sum += got[c.Name]
		}
		if sum != total {
			t.Fatalf("%d handed out of %d", sum, total)
		}
		if total <= 1<<12 {
			if want, _ := oneAtATime(total, cs, "fuzz"); fmt.Sprint(want) != fmt.Sprint(got) {
				t.Fatalf("%d over %+v: %v, one at a time %v", total, cs, got, want)
			}
		}
	})
}

// FuzzRoom: no request or free capacity a tenant or an agent reports makes
// Room panic or return a negative room.
func FuzzRoom(f *testing.F) {
	for _, s := range [][2]string{{"1e16", "4"}, {"1n", "1e18"}, {"0.001", "9223372036854775807"}, {"1Ei", "1Ei"}, {"-1", "2"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, want, have string) {
		w, err1 := resource.ParseQuantity(want)
		h, err2 := resource.ParseQuantity(have)
		if err1 != nil || err2 != nil {
			return
		}
		pods, _ := Room(map[string]resource.Quantity{"cpu": h}, map[string]resource.Quantity{"cpu": w})
		if pods < 0 || pods > MaxValue {
			t.Fatalf("room %d for %s in %s", pods, want, have)
		}
		spec := &placementv1alpha1.ReplicaDivision{Method: placementv1alpha1.DivisionCapacity, Weights: []placementv1alpha1.ReplicaWeight{{Min: ptr.To[int32](0)}}}
		raw := fmt.Appendf(nil, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"w"},"spec":{"replicas":%d,"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":%q}}}]}}}}`, pods%7+1, want)
		Assign(spec, Workloads([]runtime.RawExtension{{Raw: raw}}, nil), []Candidate{{Name: "a", Free: map[string]resource.Quantity{"cpu": h}}}, "fuzz", nil)
	})
}

// The queue keeps each seat's place as it moves.
func TestQueuePlaces(t *testing.T) {
	g := NewWithT(t)
	q := &queue{better: func(a, b *seat) bool { return a.share > b.share }, pos: func(s *seat) *int { return &s.next }}
	seats := make([]*seat, 50)
	for i := range seats {
		seats[i] = &seat{share: int64(i * 7 % 50), next: -1}
		q.update(seats[i], true)
	}
	for i := range seats {
		seats[i].share = int64(i * 13 % 50)
		q.update(seats[i], i%3 != 0)
	}
	g.Expect(heap.Pop(q).(*seat).share).To(Equal(int64(49)))
	for i, s := range q.items {
		g.Expect(s.next).To(Equal(i))
	}
}

// A Memo answers as Divide does, hands each caller its own map, and keeps no
// more than it may.
func TestMemo(t *testing.T) {
	g := NewWithT(t)
	m := &Memo{}
	cs := weighted("a", 1, "b", 3)
	want, _ := Divide(9, cs, "uid")
	got, err := m.Divide(9, cs, "uid")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want))
	got["a"] = 100
	again, _ := m.Divide(9, cs, "uid")
	g.Expect(again).To(Equal(want))
	_, err = m.Divide(9, []Cluster{{Name: "a", Weight: 1, Min: 10}}, "uid")
	g.Expect(err).To(MatchError(ContainSubstring("minimums add up to 10")))
	for i := range MemoEntries / 2 {
		_, _ = m.Divide(int64(i), cs, "uid")
	}
	g.Expect(len(m.cur) + len(m.prev)).To(BeNumerically("<=", MemoEntries))
	var nilMemo *Memo
	got, err = nilMemo.Divide(9, cs, "uid")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want))
}
