package placementstatus

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// A Placement's status is computed from all its Works: for thousands of
// clusters, tens of milliseconds of the hub manager's CPU each time, while
// their reports stream in (a fan-out to 5 000 clusters is recomputed at every
// gathering window). The computations of a large Placement are spaced by
// perClusterCompute per selected cluster, at most maxComputeEvery: 10 ms for
// 100 clusters (below the gathering window: no change), 0.5 s for 5 000. A new
// generation is computed at once.
const (
	perClusterCompute = 100 * time.Microsecond
	maxComputeEvery   = time.Second
)

// computePace remembers when each Placement's status was last computed.
type computePace struct {
	last sync.Map // types.NamespacedName → computed
}

type computed struct {
	generation int64
	at         time.Time
}

// wait tells how long the computation of key (at generation, with clusters
// selected) must wait; 0 means compute now, and the computation is counted
// from now.
func (p *computePace) wait(key types.NamespacedName, generation int64, clusters int32, now time.Time) time.Duration {
	every := min(time.Duration(clusters)*perClusterCompute, maxComputeEvery)
	if v, ok := p.last.Load(key); ok {
		if last := v.(computed); last.generation == generation {
			if wait := every - now.Sub(last.at); wait > 0 {
				return wait
			}
		}
	}
	p.last.Store(key, computed{generation: generation, at: now})
	return 0
}

// forget drops what the pace remembers of key.
func (p *computePace) forget(key types.NamespacedName) { p.last.Delete(key) }
