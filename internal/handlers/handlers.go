// Package handlers turns watch events into reconcile requests at a pace: after
// a delay that gathers a burst into one reconcile, again later for changes whose
// effects show late, behind the reconciles of changes; and StatusPace spaces a
// controller's status writes that only move counts.
package handlers

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Coalescing enqueues the requests mapFn returns after delay, so that a
// burst of events for the same object leads to one reconcile.
func Coalescing(mapFn handler.MapFunc, delay time.Duration) handler.EventHandler {
	return coalescing(mapFn, nil, delay)
}

// Rechecking enqueues the requests mapFn returns at once and again after
// each of delays, for a change whose effects another component shows later (a
// new CRD's kind in the API server's discovery). mapFn runs once per event.
func Rechecking(mapFn handler.MapFunc, delays ...time.Duration) handler.EventHandler {
	return coalescing(mapFn, nil, append([]time.Duration{0}, delays...)...)
}

// Background is Coalescing at low priority (with the controller's
// priority queue, controller-runtime's default): the reconciles it asks for wait
// behind those of changes (a new Placement, new decisions), so that a burst of
// status reports across many Placements never delays them.
func Background(mapFn handler.MapFunc, delay time.Duration) handler.EventHandler {
	return coalescing(mapFn, ptr.To(handler.LowPriority), delay)
}

// coalescing enqueues the requests of each event after each of delays, at
// priority when set.
func coalescing(mapFn handler.MapFunc, priority *int, delays ...time.Duration) handler.EventHandler {
	add := func(ctx context.Context, obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
		for _, req := range mapFn(ctx, obj) {
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
