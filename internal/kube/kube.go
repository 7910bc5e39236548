// Package kube holds small helpers over controller-runtime clients that several
// controllers share.
package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/manager/signals"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ApplyStatus writes the status fields set in obj with server-side apply under the
// field owner owner. Only what obj sets is claimed: fields and list entries (such as
// conditions keyed by type) that other owners set are left to them, and fields this
// owner set before but leaves out now are removed. A deleted object is not an error.
func ApplyStatus(ctx context.Context, c client.Client, obj client.Object, owner string) error {
	return ApplyStatusWith(ctx, c, obj, owner, nil)
}

// ApplyStatusWith is ApplyStatus with a last edit of the status as it is sent, for
// fields the typed object cannot express (a zero value its JSON tag omits).
func ApplyStatusWith(ctx context.Context, c client.Client, obj client.Object, owner string, edit func(status map[string]any)) error {
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return err
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("converting %s %s: %w", gvk.Kind, client.ObjectKeyFromObject(obj), err)
	}
	if status, ok := content["status"].(map[string]any); ok && edit != nil {
		edit(status)
	}
	metadata := map[string]any{"name": obj.GetName()}
	if ns := obj.GetNamespace(); ns != "" {
		metadata["namespace"] = ns
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvk.GroupVersion().String(),
		"kind":       gvk.Kind,
		"metadata":   metadata,
		"status":     content["status"],
	}}
	err = c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(owner), client.ForceOwnership)
	if apierrors.IsNotFound(err) {
		return nil // The object is gone, and its status with it.
	}
	if err != nil {
		return fmt.Errorf("applying status of %s %s: %w", gvk.Kind, client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

// ReplaceStatus writes the whole status of desired over that of current (the
// object as last read) with one JSON merge patch of the status subresource, for a
// status that owner alone writes: cheaper for the API server than an apply, which
// merges field ownership. Top-level status fields current has and desired leaves
// out are removed. edit, when set, is a last edit of the status as it is sent. A
// deleted object is not an error.
func ReplaceStatus(ctx context.Context, c client.Client, current, desired client.Object, owner string, edit func(status map[string]any)) error {
	was, err := runtime.DefaultUnstructuredConverter.ToUnstructured(current)
	if err != nil {
		return err
	}
	now, err := runtime.DefaultUnstructuredConverter.ToUnstructured(desired)
	if err != nil {
		return err
	}
	status, _ := now["status"].(map[string]any)
	if status == nil {
		status = map[string]any{}
	}
	if edit != nil {
		edit(status)
	}
	old, _ := was["status"].(map[string]any)
	for k := range old {
		if _, ok := status[k]; !ok {
			status[k] = nil // removed by the merge patch
		}
	}
	body, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	err = c.Status().Patch(ctx, desired, client.RawPatch(types.MergePatchType, body), client.FieldOwner(owner))
	if apierrors.IsNotFound(err) {
		return nil // The object is gone, and its status with it.
	}
	if err != nil {
		return fmt.Errorf("writing status of %s: %w", client.ObjectKeyFromObject(desired), err)
	}
	return nil
}

// SetFinalizer adds (present) or removes the finalizer on obj with a merge patch
// of metadata.finalizers, and does nothing when obj already agrees. A deleted
// object is not an error.
func SetFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizer string, present bool) error {
	base, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("%T is not a client.Object", obj)
	}
	var changed bool
	if present {
		changed = controllerutil.AddFinalizer(obj, finalizer)
	} else {
		changed = controllerutil.RemoveFinalizer(obj, finalizer)
	}
	if !changed {
		return nil
	}
	if err := c.Patch(ctx, obj, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("setting finalizer %s: %w", finalizer, err)
	}
	return nil
}

// Condition returns c as it should be written over existing: with the transition
// time of the existing condition of its type when the status did not change, and
// now otherwise.
func Condition(existing []metav1.Condition, c metav1.Condition) metav1.Condition {
	conditions := slices.Clone(existing)
	meta.SetStatusCondition(&conditions, c)
	return *meta.FindStatusCondition(conditions, c.Type)
}

// Run adds the health and readiness checks to mgr and runs it until a termination
// signal; it returns the error that stopped it.
func Run(mgr manager.Manager) error {
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("adding the readiness check: %w", err)
	}
	return mgr.Start(signals.SetupSignalHandler())
}

// Decision is the one condition a reconcile decides on, kept until the reconcile's
// single status write. It is empty while nothing was decided (for example when the
// reconcile ended on a transient error), and then nothing is written.
type Decision struct {
	condition *metav1.Condition
}

// Set decides the condition of type t.
func (d *Decision) Set(t string, status metav1.ConditionStatus, reason, format string, args ...any) {
	d.condition = &metav1.Condition{Type: t, Status: status, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// For returns the decided condition at generation gen, to be written over
// existing, and false when nothing was decided.
func (d *Decision) For(existing []metav1.Condition, gen int64) (metav1.Condition, bool) {
	if d.condition == nil {
		return metav1.Condition{}, false
	}
	c := *d.condition
	c.ObservedGeneration = gen
	return Condition(existing, c), true
}

// Truncate shortens a message to at most n bytes, ending in "..." when cut, for
// condition messages and status fields that have a maximum length.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// SameCondition tells whether existing already has c as it would be written: same
// status, reason, message and observed generation. Controllers use it to skip
// writes that would change nothing.
func SameCondition(existing []metav1.Condition, c metav1.Condition) bool {
	old := meta.FindStatusCondition(existing, c.Type)
	return old != nil && old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message && old.ObservedGeneration == c.ObservedGeneration
}

// ConditionMoved tells whether c differs from the condition of its type in
// existing in what a reader acts on: its status, reason or observed generation
// (not only its message), or whether there was none.
func ConditionMoved(existing []metav1.Condition, c metav1.Condition) bool {
	old := meta.FindStatusCondition(existing, c.Type)
	return old == nil || old.Status != c.Status || old.Reason != c.Reason || old.ObservedGeneration != c.ObservedGeneration
}

// CoalescingHandler enqueues the requests mapFn returns after delay, so that a
// burst of events for the same object leads to one reconcile.
func CoalescingHandler(mapFn handler.MapFunc, delay time.Duration) handler.EventHandler {
	return coalescing(mapFn, nil, delay)
}

// RecheckingHandler enqueues the requests mapFn returns at once and again after
// each of delays, for a change whose effects another component shows later (a
// new CRD's kind in the API server's discovery). mapFn runs once per event.
func RecheckingHandler(mapFn handler.MapFunc, delays ...time.Duration) handler.EventHandler {
	return coalescing(mapFn, nil, append([]time.Duration{0}, delays...)...)
}

// BackgroundHandler is CoalescingHandler at low priority (with the controller's
// priority queue, controller-runtime's default): the reconciles it asks for wait
// behind those of changes (a new Placement, new decisions), so that a burst of
// status reports across many Placements never delays them.
func BackgroundHandler(mapFn handler.MapFunc, delay time.Duration) handler.EventHandler {
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

// Kubeconfig returns a kubeconfig for cfg (server, CA, token or client
// certificate), with one context named name.
func Kubeconfig(cfg *rest.Config, name string) ([]byte, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{
		Token: cfg.BearerToken, ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData,
	}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	return clientcmd.Write(*kc)
}
