package workgenerator

import (
	"strings"
	"sync"
	"time"
)

// unseen keeps the generator's writes that the cache may not show yet (a
// cluster's revision, its shares, a Placement's retained claims), by key, for
// at most expectationTTL: a reconcile reads what it last wrote, never a stale
// cache.
type unseen[T any] struct{ m sync.Map }

type unseenWrite[T any] struct {
	value T
	at    time.Time
}

func (u *unseen[T]) store(key string, value T, at time.Time) {
	u.m.Store(key, unseenWrite[T]{value: value, at: at})
}

// lookup is the value last written under key while the cache does not show
// it (shown says whether it does) and the write is younger than
// expectationTTL; otherwise the write is forgotten.
func (u *unseen[T]) lookup(key string, shown func(T) bool) (T, bool) {
	var zero T
	v, ok := u.m.Load(key)
	if !ok {
		return zero, false
	}
	w := v.(unseenWrite[T])
	if shown(w.value) || time.Since(w.at) >= expectationTTL {
		u.m.Delete(key)
		return zero, false
	}
	return w.value, true
}

// forget drops the writes whose key starts with prefix.
func (u *unseen[T]) forget(prefix string) {
	u.m.Range(func(k, _ any) bool {
		if strings.HasPrefix(k.(string), prefix) {
			u.m.Delete(k)
		}
		return true
	})
}
