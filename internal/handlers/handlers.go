// Package handlers turns watch events into reconcile requests at a pace: after
// a delay that gathers a burst into one reconcile, again later for changes whose
// effects show late, behind the reconciles of changes; and StatusPace spaces a
// controller's status writes that only move counts.
package handlers

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/lodestar-dev/lodestar/internal/metrics"
)

// Coalescing enqueues the requests mapFn returns after delay, so that a
// burst of events for the same object leads to one reconcile.
func Coalescing(mapFn handler.MapFunc, delay time.Duration) handler.EventHandler {
	return coalescing(mapFn, nil, after(delay))
}

// CoalescingBy is Coalescing with a delay per request: a window that grows
// with what the reconcile has to gather (a Placement's clusters), so that a
// small one is not held back as long as a large one must be.
func CoalescingBy(mapFn handler.MapFunc, delay func(reconcile.Request) time.Duration) handler.EventHandler {
	return coalescing(mapFn, nil, func(req reconcile.Request) []time.Duration { return []time.Duration{delay(req)} })
}

// Rechecking enqueues the requests mapFn returns at once and again after
// each of delays, for a change whose effects another component shows later (a
// new CRD's kind in the API server's discovery). mapFn runs once per event.
func Rechecking(mapFn handler.MapFunc, delays ...time.Duration) handler.EventHandler {
	return coalescing(mapFn, nil, after(append([]time.Duration{0}, delays...)...))
}

// Background is Coalescing at low priority (with the controller's
// priority queue, controller-runtime's default): the reconciles it asks for wait
// behind those of changes (a new Placement, new decisions), so that a burst of
// status reports across many Placements never delays them.
func Background(mapFn handler.MapFunc, delay time.Duration) handler.EventHandler {
	return coalescing(mapFn, ptr.To(handler.LowPriority), after(delay))
}

// NamespaceBudget is how many reconciles the object changes of one namespace
// ask for at once (Burst) and per second (Rate), so that one tenant's churn
// (a Secret per second under forty Placements that select every Secret)
// cannot fill a controller's queue ahead of the other tenants' changes.
type NamespaceBudget struct {
	Rate  rate.Limit
	Burst int
	// Over is how long a request over its namespace's budget waits; it then
	// waits behind the requests within budget (low priority).
	Over time.Duration

	limiters sync.Map // namespace → *rate.Limiter
}

// within tells whether a request of namespace ns is within its budget.
func (b *NamespaceBudget) within(ns string) bool {
	l, ok := b.limiters.Load(ns)
	if !ok {
		l, _ = b.limiters.LoadOrStore(ns, rate.NewLimiter(b.Rate, b.Burst))
	}
	return l.(*rate.Limiter).Allow()
}

// Fair enqueues the requests mapFn returns at once while their namespace is
// within budget; past it, after budget.Over and at low priority: a tenant's
// burst is carried out, behind the others'.
func Fair(mapFn handler.MapFunc, budget *NamespaceBudget) handler.EventHandler {
	return enqueue(mapFn, func(req reconcile.Request) ([]time.Duration, *int) {
		if budget.within(req.Namespace) {
			return []time.Duration{0}, nil
		}
		metrics.OverBudget.Inc()
		return []time.Duration{budget.Over}, ptr.To(handler.LowPriority)
	})
}

// after is the same delays for every request.
func after(delays ...time.Duration) func(reconcile.Request) []time.Duration {
	return func(reconcile.Request) []time.Duration { return delays }
}

// coalescing enqueues the requests of each event after each of the delays of
// the request, at priority when set.
func coalescing(mapFn handler.MapFunc, priority *int, delays func(reconcile.Request) []time.Duration) handler.EventHandler {
	return enqueue(mapFn, func(req reconcile.Request) ([]time.Duration, *int) { return delays(req), priority })
}

// enqueue enqueues the requests of each event after each of the delays plan
// gives the request, at the priority it gives when set.
func enqueue(mapFn handler.MapFunc, plan func(reconcile.Request) ([]time.Duration, *int)) handler.EventHandler {
	add := func(ctx context.Context, obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
		for _, req := range mapFn(ctx, obj) {
			delays, priority := plan(req)
			for _, delay := range delays {
				if ok && priority != nil {
					pq.AddWithOpts(priorityqueue.AddOpts{After: delay, Priority: priority}, req)
					continue
				}
				q.AddAfter(req, delay)
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, e.Object, q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, e.ObjectNew, q)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, e.Object, q)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, e.Object, q)
		},
	}
}

// ClusterIndex remembers, per cluster, the objects (Placements) that a change
// of the cluster concerns: a controller's own memory of which Placements to
// wake when a ClusterProfile changes (those whose overrides fail on it, those
// whose copy there is held by its claims, say).
type ClusterIndex struct {
	mu          sync.Mutex
	byCluster   map[string]map[client.ObjectKey]bool
	byPlacement map[client.ObjectKey][]string
}

// Set records the clusters the index holds for the Placement now.
func (f *ClusterIndex) Set(key client.ObjectKey, clusters []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byCluster == nil {
		f.byCluster, f.byPlacement = map[string]map[client.ObjectKey]bool{}, map[client.ObjectKey][]string{}
	}
	for _, c := range f.byPlacement[key] {
		delete(f.byCluster[c], key)
		if len(f.byCluster[c]) == 0 {
			delete(f.byCluster, c)
		}
	}
	delete(f.byPlacement, key)
	if len(clusters) == 0 {
		return
	}
	f.byPlacement[key] = clusters
	for _, c := range clusters {
		if f.byCluster[c] == nil {
			f.byCluster[c] = map[client.ObjectKey]bool{}
		}
		f.byCluster[c][key] = true
	}
}

// Requests are the requests of the objects recorded for cluster.
func (f *ClusterIndex) Requests(cluster string) []reconcile.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	reqs := make([]reconcile.Request, 0, len(f.byCluster[cluster]))
	for k := range f.byCluster[cluster] {
		reqs = append(reqs, reconcile.Request{NamespacedName: k})
	}
	return reqs
}

// Interest is how the status reports of an object's dependents (a
// Placement's Works) concern a controller now.
type Interest int

const (
	// Gating is when what the controller does waits for them (a rollout, a removal).
	Gating Interest = iota
	// Reporting is when they only move the object's status.
	Reporting
	// Idle is when they do not concern it.
	Idle
)

// Interests remembers each object's Interest; an object not recorded yet is
// Gating.
type Interests struct{ m sync.Map }

// Set records key's interest.
func (in *Interests) Set(key client.ObjectKey, v Interest) { in.m.Store(key, v) }

// Swap records key's interest and returns the one it had (Gating when none
// was recorded).
func (in *Interests) Swap(key client.ObjectKey, v Interest) Interest {
	if old, ok := in.m.Swap(key, v); ok {
		return old.(Interest)
	}
	return Gating
}

// Forget drops key.
func (in *Interests) Forget(key client.ObjectKey) { in.m.Delete(key) }

// Only lets through mapFn's requests of the objects whose interest is want.
func (in *Interests) Only(mapFn handler.MapFunc, want Interest) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		return slices.DeleteFunc(mapFn(ctx, obj), func(req reconcile.Request) bool {
			got := Gating
			if v, ok := in.m.Load(req.NamespacedName); ok {
				got = v.(Interest)
			}
			return got != want
		})
	}
}

// All maps any event to every object of newList's kind (cluster-scoped, or
// across namespaces): for kinds of few objects whose reconciles read caches,
// such as the access grants, which any ClusterProfile change may concern.
func All(c client.Reader, newList func() client.ObjectList) handler.MapFunc {
	return func(ctx context.Context, _ client.Object) []reconcile.Request {
		list := newList()
		if err := c.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing every object to reconcile", "kind", fmt.Sprintf("%T", list))
			return nil
		}
		var reqs []reconcile.Request
		_ = apimeta.EachListItem(list, func(o runtime.Object) error {
			if obj, ok := o.(client.Object); ok {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
			}
			return nil
		})
		return reqs
	}
}
