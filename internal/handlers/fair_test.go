package handlers

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// One namespace's burst past its budget waits (here: is not in the queue at
// once); another namespace's request in the same moment does not.
func TestFairDefersANamespacePastItsBudget(t *testing.T) {
	budget := &NamespaceBudget{Rate: 0.001, Burst: 3, Over: time.Hour}
	// Each change wakes ten Placements of its namespace.
	wake := func(_ context.Context, obj client.Object) []reconcile.Request {
		var out []reconcile.Request
		for i := range 10 {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: fmt.Sprintf("p%d", i)}})
		}
		return out
	}
	h := Fair(wake, budget)
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	h.Create(context.Background(), event.CreateEvent{Object: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "noisy", Name: "s"}}}, q)
	if n := q.Len(); n != 3 {
		t.Fatalf("the noisy namespace's burst of 10: %d queued at once, want its budget's 3", n)
	}
	h.Create(context.Background(), event.CreateEvent{Object: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "quiet", Name: "s"}}}, q)
	if n := q.Len(); n != 6 {
		t.Fatalf("the quiet namespace's requests: %d queued in all, want 3 more at once", n)
	}
}
