// Package unseen keeps a controller's writes that its cache may not show yet,
// so that a reconcile reads what it last wrote, never a stale cache.
package unseen

import (
	"strings"
	"sync"
	"time"
)

// TTL bounds how long a write not yet seen in the cache stands in for what the
// cache says.
const TTL = time.Minute

// Writes are the writes (a cluster's revision, its shares, a Placement's
// retained claims, ...) the cache may not show yet, by key, for at most TTL.
type Writes[T any] struct{ m sync.Map }

type unseenWrite[T any] struct {
	value T
	at    time.Time
}

// Store records a write of value under key, at at.
func (u *Writes[T]) Store(key string, value T, at time.Time) {
	u.m.Store(key, unseenWrite[T]{value: value, at: at})
}

// Lookup is the value last written under key while the cache does not show
// it (shown says whether it does) and the write is younger than
// TTL; otherwise the write is forgotten.
func (u *Writes[T]) Lookup(key string, shown func(T) bool) (T, bool) {
	var zero T
	v, ok := u.m.Load(key)
	if !ok {
		return zero, false
	}
	w := v.(unseenWrite[T])
	if shown(w.value) || time.Since(w.at) >= TTL {
		u.m.Delete(key)
		return zero, false
	}
	return w.value, true
}

// Forget drops the writes whose key starts with prefix.
func (u *Writes[T]) Forget(prefix string) {
	u.m.Range(func(k, _ any) bool {
		if strings.HasPrefix(k.(string), prefix) {
			u.m.Delete(k)
		}
		return true
	})
}
