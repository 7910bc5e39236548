package lookup

import (
	"context"
	"k8s.io/apimachinery/pkg/api/meta"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// FromLabels maps an object to the Placement its labels name: the name (or its
// hash, for names too long for a label) in nameLabel, and the namespace in nsLabel
// or, when nsLabel is empty, the object's own namespace.
func FromLabels(c client.Reader, nameLabel, nsLabel string) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		key, ok := obj.GetLabels()[nameLabel]
		if !ok || key == "" {
			return nil
		}
		ns := obj.GetNamespace()
		if nsLabel != "" {
			ns = obj.GetLabels()[nsLabel]
		}
		reqs := []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: key}}}
		if !strings.HasPrefix(key, names.HashedLabelPrefix) {
			return reqs
		}
		// Possibly a hashed name: find the Placement whose name hashes to it.
		list := &placementv1alpha1.PlacementList{}
		if err := c.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing Placements for a labelled object", "object", klog.KObj(obj))
			return reqs
		}
		for _, p := range list.Items {
			if p.Name != key && names.LabelValue(p.Name) == key {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
			}
		}
		return reqs
	}
}

// InNamespace maps an object (a ClusterSetBinding) to every Placement of its
// namespace, and a Namespace to every Placement in it.
func InNamespace(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		ns := obj.GetNamespace()
		if ns == "" {
			ns = obj.GetName() // a Namespace
		}
		list := &placementv1alpha1.PlacementList{}
		if err := c.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing Placements of a namespace", "object", klog.KObj(obj))
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return reqs
	}
}

// ApprovedPlacement maps a RolloutApproval to its Placement.
func ApprovedPlacement(_ context.Context, obj client.Object) []reconcile.Request {
	a, ok := obj.(*placementv1alpha1.RolloutApproval)
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: a.Namespace, Name: a.Spec.Placement}}}
}

// RenderedChanged tells whether an update is the revision maker's: a new
// status.revision, or the Rendered condition moved.
func RenderedChanged(old, now *placementv1alpha1.Placement) bool {
	a := meta.FindStatusCondition(old.Status.Conditions, placementv1alpha1.RenderedCondition)
	b := meta.FindStatusCondition(now.Status.Conditions, placementv1alpha1.RenderedCondition)
	return old.Status.Revision != now.Status.Revision || (a == nil) != (b == nil) ||
		a != nil && (a.Status != b.Status || a.ObservedGeneration != b.ObservedGeneration)
}
