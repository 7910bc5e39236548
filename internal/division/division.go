// Package division divides a workload's replicas over clusters by Webster's
// divisor method (Sainte-Laguë). The answer is the one of handing replicas out
// one at a time, each to the cluster with the highest weight/(2·share+1),
// compared by integer cross-multiplication (no floats), within each cluster's
// minimum and maximum. Ties go by a hash of (seed, cluster name), so that over
// many workloads (seeded by their Placement's UID) every cluster gets the
// remainders about equally.
//
// That answer is computed in O(clusters · log clusters), whatever the total: a
// divisor found by bisection gives every cluster about its share, the shares
// are trimmed until every replica handed out ranks before every one not handed
// out (then they are exactly the first replicas of the one-at-a-time order),
// and the few replicas left are handed out one at a time. Handing out in that
// order makes the division house-monotone: the division of total+1 is that of
// total plus one replica, so no cluster's share ever drops when the total grows.
package division

import (
	"container/heap"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Cluster is one cluster's claim on the replicas.
type Cluster struct {
	Name string
	// Weight is its relative weight (a static weight, or its free room in
	// pods); 0 gets nothing beyond Min.
	Weight int64
	// Min is the share it gets first; Max, when above 0, caps its share.
	Min, Max int64
}

// MaxValue bounds weights, minima, maxima and totals (2^30), so that the
// cross-multiplied priorities stay within an int64. A workload of more
// replicas is not divided (docs/replicas.md).
const MaxValue = 1 << 30

// ErrNotEnoughRoom is returned when the clusters' maxima add up to less than
// the total.
var ErrNotEnoughRoom = errors.New("not enough room")

// Divide divides total over clusters. It fails when the minima add up to more
// than total, or the maxima (and zero weights) leave replicas nowhere to go;
// the error names each cluster's room.
func Divide(total int64, clusters []Cluster, seed string) (map[string]int64, error) {
	shares, _, err := divide(total, clusters, seed)
	return shares, err
}

// divide is Divide, and how many replicas fill moved one at a time.
func divide(total int64, clusters []Cluster, seed string) (map[string]int64, int, error) {
	if total < 0 || total > MaxValue {
		return nil, 0, fmt.Errorf("cannot divide %d replicas (0 to %d)", total, MaxValue)
	}
	shares := make(map[string]int64, len(clusters))
	var mins, room int64
	unbounded := false
	var open []*seat
	for _, c := range clusters {
		if c.Weight < 0 || c.Min < 0 || c.Max < 0 || (c.Max > 0 && c.Min > c.Max) || max(c.Weight, c.Min, c.Max) > MaxValue {
			return nil, 0, fmt.Errorf("cluster %s: weight %d, min %d, max %d are not a division's", c.Name, c.Weight, c.Min, c.Max)
		}
		if _, dup := shares[c.Name]; dup {
			return nil, 0, fmt.Errorf("cluster %s is named twice", c.Name)
		}
		shares[c.Name] = c.Min
		mins += c.Min
		if c.Weight > 0 && (c.Max == 0 || c.Min < c.Max) {
			open = append(open, &seat{Cluster: c, share: c.Min, tie: tieBreak(seed, c.Name), next: -1, last: -1})
			if c.Max == 0 {
				unbounded = true
			} else {
				room += c.Max - c.Min
			}
		}
	}
	if mins > total {
		return nil, 0, fmt.Errorf("the clusters' minimums add up to %d, more than the %d replicas", mins, total)
	}
	if left := total - mins; !unbounded && room < left {
		if len(clusters) == 0 {
			return nil, 0, fmt.Errorf("%w: no cluster is selected for the %d replicas", ErrNotEnoughRoom, total)
		}
		return nil, 0, fmt.Errorf("%w: %d of %d replicas have no cluster to go to (%s)", ErrNotEnoughRoom, left-room, total, rooms(clusters))
	}
	estimate(open, total-mins)
	moves := fill(open, total-mins)
	for _, s := range open {
		shares[s.Name] = s.share
	}
	return shares, moves, nil
}

// estimate gives each open cluster about its share of left (beyond its
// minimum), by the divisor that bisection finds, at most left in all: a start
// that fill corrects in O(clusters) steps. Floats only choose the start; the
// answer does not depend on them.
func estimate(open []*seat, left int64) {
	if len(open) == 0 || left == 0 {
		return
	}
	// beyond is the replicas a cluster gets beyond its minimum at multiplier
	// lambda (its seats s with weight/(2s+1) > 1/(2·lambda), about).
	beyond := func(s *seat, lambda float64) int64 {
		n := int64(math.Min(math.Floor(lambda*float64(s.Weight)+0.5), MaxValue))
		if s.Max > 0 {
			n = min(n, s.Max)
		}
		return max(n-s.Min, 0)
	}
	sum := func(lambda float64) int64 {
		var n int64
		for _, s := range open {
			n += beyond(s, lambda)
		}
		return n
	}
	lo, hi := 0.0, float64(left)+float64(slices.MaxFunc(open, func(a, b *seat) int { return int(a.Min - b.Min) }).Min)+1
	for range 64 {
		mid := (lo + hi) / 2
		if mid <= lo || mid >= hi {
			break
		}
		if sum(mid) <= left {
			lo = mid
		} else {
			hi = mid
		}
	}
	for _, s := range open {
		s.share = s.Min + beyond(s, lo)
	}
}

// fill makes the open clusters' shares exactly the first left replicas (beyond
// the minima) of the one-at-a-time order. While the worst replica handed out
// ranks after the best one not handed out, it hands out the one for the other;
// then the replicas out are the first of the order, and it hands out (or takes
// back) one at a time until left are out. It returns how many replicas it
// moved: each swap lowers the ranks out, so there are as many as the start
// was wrong by.
func fill(open []*seat, left int64) int {
	next := &queue{better: func(a, b *seat) bool { return before(a, a.share, b, b.share) }, pos: func(s *seat) *int { return &s.next }}
	last := &queue{better: func(a, b *seat) bool { return before(b, b.share-1, a, a.share-1) }, pos: func(s *seat) *int { return &s.last }}
	var out int64
	moves := 0
	for _, s := range open {
		out += s.share - s.Min
		next.update(s, s.Max == 0 || s.share < s.Max)
		last.update(s, s.share > s.Min)
	}
	move := func(s *seat, by int64) {
		moves++
		s.share += by
		out += by
		next.update(s, s.Max == 0 || s.share < s.Max)
		last.update(s, s.share > s.Min)
	}
	for last.Len() > 0 && next.Len() > 0 {
		worst, best := last.items[0], next.items[0]
		if before(worst, worst.share-1, best, best.share) {
			break
		}
		move(worst, -1)
		move(best, 1)
	}
	for out < left && next.Len() > 0 {
		move(next.items[0], 1)
	}
	for out > left && last.Len() > 0 {
		move(last.items[0], -1)
	}
	return moves
}

// Steady divides a new total over clusters that hold prev: a smaller total is
// divided with the current shares as weights (each cluster keeps its part);
// a larger one keeps every current replica where it is and divides only the
// new ones over the clusters' weights and room (Max counts the new replicas).
// Clusters not in prev start from nothing.
func Steady(total int64, prev map[string]int64, clusters []Cluster, seed string) (map[string]int64, error) {
	return steady(nil, total, prev, clusters, seed)
}

func steady(m *Memo, total int64, prev map[string]int64, clusters []Cluster, seed string) (map[string]int64, error) {
	var held int64
	for _, c := range clusters {
		held += prev[c.Name]
	}
	if total <= held {
		byShare := make([]Cluster, len(clusters))
		for i, c := range clusters {
			byShare[i] = Cluster{Name: c.Name, Weight: prev[c.Name]}
		}
		return m.Divide(total, byShare, seed)
	}
	added, err := m.Divide(total-held, clusters, seed)
	if err != nil {
		return nil, err
	}
	for _, c := range clusters {
		added[c.Name] += prev[c.Name]
	}
	return added, nil
}

func rooms(clusters []Cluster) string {
	parts := make([]string, 0, len(clusters))
	for _, c := range clusters {
		switch {
		case c.Weight == 0:
			parts = append(parts, c.Name+" none")
		case c.Max > 0:
			parts = append(parts, fmt.Sprintf("%s %d", c.Name, c.Max))
		default:
			parts = append(parts, c.Name+" unbounded")
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// tieBreak orders clusters of equal priority for one seed.
func tieBreak(seed, name string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(seed))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(name))
	// FNV alone keeps names that differ in their last byte correlated (a
	// bias towards one of "a", "b", "c"); the finaliser of MurmurHash3 mixes it.
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// seat is an open cluster: its share, and its places in fill's queues.
type seat struct {
	Cluster
	share      int64
	tie        uint64
	next, last int // indices in the queues, -1 when not in one
}

// before tells whether replica i of cluster a (counted from 0) goes out before
// replica j of cluster b: by Webster priority weight/(2i+1), compared by
// cross-multiplication; equal priorities by the tie-break hash, then name.
func before(a *seat, i int64, b *seat, j int64) bool {
	l, r := a.Weight*(2*j+1), b.Weight*(2*i+1)
	if l != r {
		return l > r
	}
	if a.tie != b.tie {
		return a.tie > b.tie
	}
	return a.Name < b.Name
}

// queue is a heap of seats, best first, that knows each seat's place in it.
type queue struct {
	items  []*seat
	better func(a, b *seat) bool
	pos    func(*seat) *int
}

func (q *queue) Len() int           { return len(q.items) }
func (q *queue) Less(i, j int) bool { return q.better(q.items[i], q.items[j]) }
func (q *queue) Swap(i, j int) {
	q.items[i], q.items[j] = q.items[j], q.items[i]
	*q.pos(q.items[i]), *q.pos(q.items[j]) = i, j
}
func (q *queue) Push(x any) {
	s := x.(*seat)
	*q.pos(s) = len(q.items)
	q.items = append(q.items, s)
}
func (q *queue) Pop() any {
	s := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	*q.pos(s) = -1
	return s
}

// update puts s in the queue, fixes its place, or takes it out.
func (q *queue) update(s *seat, in bool) {
	switch i := *q.pos(s); {
	case i >= 0 && in:
		heap.Fix(q, i)
	case i >= 0:
		heap.Remove(q, i)
	case in:
		heap.Push(q, s)
	}
}

// MaxRequest bounds what one pod may request of a resource to be divided by
// capacity (2^50 units: about 10^15 cores or a petabyte and more of memory).
// More is refused as absurd (Workload.Invalid), never divided by; a cluster
// reporting more free counts as having that much.
var MaxRequest = resource.NewQuantity(1<<50, resource.DecimalSI)

// milli is q in milli-units, at most MaxRequest's, and whether q was within it.
func milli(q resource.Quantity) (int64, bool) {
	if q.Cmp(*MaxRequest) > 0 {
		return MaxRequest.MilliValue(), false
	}
	return q.MilliValue(), true
}

// OnOneNode is the suffix of a free capacity's entry (FreeCapacity) that says
// how much of a resource is free on one node at most: a pod that requests
// more fits nowhere in the cluster, whatever its total.
const OnOneNode = "@node"

// Room is how many pods of the given requests fit in a cluster's free capacity:
// the least over the resources the pod requests (a resource it does not request
// does not bound it). A resource the cluster does not report counts as no room,
// and so does a request above MaxRequest, or above what one node has free
// (name+OnOneNode, when reported). With no requests at all the room is
// unbounded (ok false).
func Room(free, request map[string]resource.Quantity) (pods int64, ok bool) {
	pods = MaxValue
	for name, want := range request {
		if want.Sign() <= 0 {
			continue
		}
		ok = true
		have, reported := free[name]
		w, sane := milli(want)
		if !reported || have.Sign() <= 0 || !sane {
			return 0, true
		}
		if node, reported := free[name+OnOneNode]; reported && want.Cmp(node) > 0 {
			return 0, true
		}
		// Milli-units keep CPU exact; memory and the like fit in them too
		// (a request of 1n rounds up to one milli-unit, never to 0).
		h, _ := milli(have)
		pods = min(pods, h/max(w, 1))
	}
	return pods, ok
}
