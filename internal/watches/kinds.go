package watches

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	// failed are the groups the last discovery could not read.
	failed map[string]bool
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
	s.failed = map[string]bool{}
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Some API groups could not be discovered; selectors without kind skip them")
		var failed *discovery.ErrGroupDiscoveryFailed
		if errors.As(err, &failed) {
			for gv := range failed.Groups {
				s.failed[gv.Group] = true
			}
		}
	}
	s.kinds, s.at = kinds, time.Now()
	return kinds, nil
}

// Serves tells whether the hub serves kind gk (in some version), by the kinds
// Get discovers; an error when gk's group could not be discovered, so that a
// group whose API server is down does not read as a kind removed.
func (s *ServedKinds) Serves(ctx context.Context, gk schema.GroupKind) (bool, error) {
	kinds, err := s.Get(ctx)
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	failed := s.failed[gk.Group]
	s.mu.Unlock()
	if failed {
		return false, fmt.Errorf("the hub's discovery of group %s failed", gk.Group)
	}
	return slices.ContainsFunc(kinds, func(k schema.GroupVersionKind) bool { return k.GroupKind() == gk }), nil
}

// Invalidate makes the next Get discover again.
func (s *ServedKinds) Invalidate() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kinds, s.changed = nil, time.Now()
}
