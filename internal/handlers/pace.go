package handlers

import (
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StatusPace spaces the status writes of each object that change only counts
// and per-item states (at most one per Every), while writes that change what a
// reader acts on (a condition's status or reason, say) go at once.
type StatusPace struct {
	// Every is the least time between two paced writes of one object.
	Every time.Duration
	last  sync.Map // client.ObjectKey → time.Time
}

// Wait tells how long a write of key must wait; 0 means write now, and the
// write is counted from now. A material write never waits.
func (p *StatusPace) Wait(key client.ObjectKey, material bool, now time.Time) time.Duration {
	if v, ok := p.last.Load(key); ok && !material {
		if wait := p.Every - now.Sub(v.(time.Time)); wait > 0 {
			return wait
		}
	}
	p.last.Store(key, now)
	return 0
}

// Recheck tells when a reconcile of key that found nothing to write looks
// again: 0 unless a status of key was written less than StatusSettle before
// now. Such a reconcile compared with its cache, which may not show that
// write yet (what it computed was then compared with the status before it),
// and a status-only change brings no reconcile back. It looks again after as
// long as the write is old, at least after least: a few looks in all, the
// first soon.
func (p *StatusPace) Recheck(key client.ObjectKey, now time.Time, least time.Duration) time.Duration {
	v, ok := p.last.Load(key)
	if !ok {
		return 0
	}
	age := now.Sub(v.(time.Time))
	if age >= StatusSettle {
		return 0
	}
	return max(age, least)
}

// StatusSettle is how long after a status write the cache may not show it
// yet: longer than a busy hub takes.
const StatusSettle = 2 * time.Second

// Forget drops what the pace remembers of key.
func (p *StatusPace) Forget(key client.ObjectKey) { p.last.Delete(key) }
