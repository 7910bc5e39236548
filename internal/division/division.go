// Package division divides a workload's replicas over clusters by Webster's
// divisor method (Sainte-Laguë): replicas are handed out one at a time, each to
// the cluster with the highest weight/(2·share+1), compared by integer
// cross-multiplication (no floats), within each cluster's minimum and maximum.
// Ties go by a hash of (seed, cluster name), so that over many workloads (seeded
// by their Placement's UID) every cluster gets the remainders about equally.
//
// Handing out one replica at a time makes the division house-monotone: the
// division of total+1 is that of total plus one replica, so no cluster's share
// ever drops when the total grows.
package division

import (
	"container/heap"
	"errors"
	"fmt"
	"hash/fnv"
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

// MaxValue bounds weights, minima, maxima and totals, so that the
// cross-multiplied priorities stay within an int64.
const MaxValue = 1 << 30

// ErrNotEnoughRoom is returned when the clusters' maxima add up to less than
// the total.
var ErrNotEnoughRoom = errors.New("not enough room")

// Divide divides total over clusters. It fails when the minima add up to more
// than total, or the maxima (and zero weights) leave replicas nowhere to go;
// the error names each cluster's room.
func Divide(total int64, clusters []Cluster, seed string) (map[string]int64, error) {
	if total < 0 || total > MaxValue {
		return nil, fmt.Errorf("cannot divide %d replicas (0 to %d)", total, MaxValue)
	}
	shares := make(map[string]int64, len(clusters))
	var mins int64
	h := &seats{}
	for _, c := range clusters {
		if c.Weight < 0 || c.Min < 0 || c.Max < 0 || (c.Max > 0 && c.Min > c.Max) || max(c.Weight, c.Min, c.Max) > MaxValue {
			return nil, fmt.Errorf("cluster %s: weight %d, min %d, max %d are not a division's", c.Name, c.Weight, c.Min, c.Max)
		}
		if _, dup := shares[c.Name]; dup {
			return nil, fmt.Errorf("cluster %s is named twice", c.Name)
		}
		shares[c.Name] = c.Min
		mins += c.Min
		if c.Weight > 0 && (c.Max == 0 || c.Min < c.Max) {
			h.items = append(h.items, &seat{Cluster: c, share: c.Min, tie: tieBreak(seed, c.Name)})
		}
	}
	if mins > total {
		return nil, fmt.Errorf("the clusters' minimums add up to %d, more than the %d replicas", mins, total)
	}
	heap.Init(h)
	for left := total - mins; left > 0; left-- {
		if h.Len() == 0 {
			return nil, fmt.Errorf("%w: %d of %d replicas have no cluster to go to (%s)", ErrNotEnoughRoom, left, total, rooms(clusters))
		}
		s := h.items[0]
		s.share++
		shares[s.Name] = s.share
		if s.Max > 0 && s.share >= s.Max {
			heap.Pop(h)
		} else {
			heap.Fix(h, 0)
		}
	}
	return shares, nil
}

// Steady divides a new total over clusters that hold prev: a smaller total is
// divided with the current shares as weights (each cluster keeps its part);
// a larger one keeps every current replica where it is and divides only the
// new ones over the clusters' weights and room (Max counts the new replicas).
// Clusters not in prev start from nothing.
func Steady(total int64, prev map[string]int64, clusters []Cluster, seed string) (map[string]int64, error) {
	var held int64
	for _, c := range clusters {
		held += prev[c.Name]
	}
	if total <= held {
		byShare := make([]Cluster, len(clusters))
		for i, c := range clusters {
			byShare[i] = Cluster{Name: c.Name, Weight: prev[c.Name]}
		}
		return Divide(total, byShare, seed)
	}
	added, err := Divide(total-held, clusters, seed)
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

// seat is a cluster's place in the queue for the next replica.
type seat struct {
	Cluster
	share int64
	tie   uint64
}

// seats is a max-heap by Webster priority weight/(2·share+1).
type seats struct{ items []*seat }

func (s *seats) Len() int { return len(s.items) }

// Less compares a.Weight/(2a.share+1) with b.Weight/(2b.share+1) by
// cross-multiplication; equal priorities go by the tie-break hash, then name.
func (s *seats) Less(i, j int) bool {
	a, b := s.items[i], s.items[j]
	l, r := a.Weight*(2*b.share+1), b.Weight*(2*a.share+1)
	if l != r {
		return l > r
	}
	if a.tie != b.tie {
		return a.tie > b.tie
	}
	return a.Name < b.Name
}

func (s *seats) Swap(i, j int) { s.items[i], s.items[j] = s.items[j], s.items[i] }
func (s *seats) Push(x any)    { s.items = append(s.items, x.(*seat)) }
func (s *seats) Pop() any {
	last := s.items[len(s.items)-1]
	s.items = s.items[:len(s.items)-1]
	return last
}

// Room is how many pods of the given requests fit in a cluster's free capacity:
// the least over the resources the pod requests (a resource it does not request
// does not bound it). A resource the cluster does not report counts as no room.
// With no requests at all the room is unbounded (ok false).
func Room(free, request map[string]resource.Quantity) (pods int64, ok bool) {
	pods = MaxValue
	for name, want := range request {
		if want.Sign() <= 0 {
			continue
		}
		ok = true
		have, reported := free[name]
		if !reported || have.Sign() <= 0 {
			return 0, true
		}
		// Milli-units keep CPU exact; memory and the like fit in them too.
		n := have.MilliValue() / want.MilliValue()
		pods = min(pods, n)
	}
	return pods, ok
}
