package division

import (
	"crypto/sha256"
	"encoding/binary"
	"maps"
	"sync"
)

// Memo keeps divisions across reconciles, keyed by everything a division
// depends on (the total, each cluster's name, weight, minimum and maximum, and
// the seed), so that a Placement reconciled again with nothing changed does
// not divide again. It holds at most about MemoEntries clusters' shares: the
// divisions used since the last two turnovers. The zero Memo is ready; a nil
// one divides every time.
type Memo struct {
	mu        sync.Mutex
	cur, prev map[[sha256.Size]byte]memoized
	size      int
}

// MemoEntries bounds what a Memo keeps, in clusters' shares (about 64 bytes
// each).
const MemoEntries = 1 << 18

type memoized struct {
	shares map[string]int64
	err    error
}

// Divide is Divide, remembered. The returned map is the caller's own.
func (m *Memo) Divide(total int64, clusters []Cluster, seed string) (map[string]int64, error) {
	if m == nil {
		return Divide(total, clusters, seed)
	}
	key := memoKey(total, clusters, seed)
	m.mu.Lock()
	got, ok := m.cur[key]
	if !ok {
		if got, ok = m.prev[key]; ok {
			m.keep(key, got)
		}
	}
	m.mu.Unlock()
	if !ok {
		shares, err := Divide(total, clusters, seed)
		got = memoized{shares: shares, err: err}
		m.mu.Lock()
		m.keep(key, got)
		m.mu.Unlock()
	}
	return maps.Clone(got.shares), got.err
}

// keep records a division in the current generation, turning the generations
// over when it is full; the caller holds m.mu.
func (m *Memo) keep(key [sha256.Size]byte, v memoized) {
	if m.cur == nil || m.size+len(v.shares)+1 > MemoEntries {
		m.prev, m.cur, m.size = m.cur, map[[sha256.Size]byte]memoized{}, 0
	}
	m.cur[key] = v
	m.size += len(v.shares) + 1
}

func memoKey(total int64, clusters []Cluster, seed string) [sha256.Size]byte {
	h := sha256.New()
	var buf [8]byte
	word := func(v int64) {
		binary.LittleEndian.PutUint64(buf[:], uint64(v))
		h.Write(buf[:])
	}
	str := func(s string) {
		word(int64(len(s)))
		h.Write([]byte(s))
	}
	str(seed)
	word(total)
	for _, c := range clusters {
		str(c.Name)
		word(c.Weight)
		word(c.Min)
		word(c.Max)
	}
	var key [sha256.Size]byte
	h.Sum(key[:0])
	return key
}
