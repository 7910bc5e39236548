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

// Forget drops what the pace remembers of key.
func (p *StatusPace) Forget(key client.ObjectKey) { p.last.Delete(key) }
