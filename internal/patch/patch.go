// Package patch writes one part of an object a reconciler owns, and only that:
// its status with server-side apply (a field owner per controller) or with one
// merge patch when the controller alone writes it, and one finalizer.
package patch

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
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

// Apply writes obj (a typed object with its TypeMeta set) with server-side
// apply under the field owner owner, taking the fields it sets from anyone.
func Apply(ctx context.Context, c client.Client, obj client.Object, owner string) error {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("converting %s: %w", client.ObjectKeyFromObject(obj), err)
	}
	if metadata, ok := content["metadata"].(map[string]any); ok {
		delete(metadata, "creationTimestamp") // A zero time, which would claim the field.
	}
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: content}), client.FieldOwner(owner), client.ForceOwnership)
}
