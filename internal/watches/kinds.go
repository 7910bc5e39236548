package watches

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"
)

// KindsMaxAge is how long the discovered kinds are used before they are
// discovered again; a CRD change discovers them again at once. The API server
// lists a new CRD's kind in discovery a moment after the CRD is established
// (longer when it is busy), so for KindsSettle after a CRD change the kinds are
// discovered anew each time, and the Placements concerned are looked at again
// after KindsRecheck and KindsSettle.
const (
	KindsMaxAge  = time.Minute
	KindsRecheck = 2 * time.Second
	KindsSettle  = 10 * time.Second
)

// ServedKinds caches the hub's namespaced kinds for selectors without kind.
type ServedKinds struct {
	// Discovery lists the kinds.
	Discovery discovery.DiscoveryInterface
	mu        sync.Mutex
	kinds     []schema.GroupVersionKind
	// at is when kinds were discovered, changed when a CRD last changed.
	at, changed time.Time
}

// Get returns the kinds, discovered again when they are older than KindsMaxAge,
// were invalidated, or were discovered within KindsSettle of a CRD change. A
// group that cannot be discovered is logged and left out.
func (s *ServedKinds) Get(ctx context.Context) ([]schema.GroupVersionKind, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kinds != nil && time.Since(s.at) < KindsMaxAge && s.at.Sub(s.changed) >= KindsSettle {
		return s.kinds, nil
	}
	kinds, err := NamespacedKinds(s.Discovery)
	if kinds == nil && err != nil {
		return nil, err
	}
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Some API groups could not be discovered; selectors without kind skip them")
	}
	s.kinds, s.at = kinds, time.Now()
	return kinds, nil
}

// Invalidate makes the next Get discover again.
func (s *ServedKinds) Invalidate() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kinds, s.changed = nil, time.Now()
}
