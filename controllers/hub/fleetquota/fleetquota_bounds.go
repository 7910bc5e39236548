package fleetquota

import (
	"context"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/lookup"
)

// bound is one quota over a set of namespaces: a FleetQuota (its own) or a
// ClusterFleetQuota (those it selects).
type bound struct {
	// what names it in messages: "FleetQuota team", "ClusterFleetQuota org".
	what       string
	hard       map[string]resource.Quantity
	uncounted  placementv1alpha1.UncountedPolicy
	namespaces []string
	namespaced *placementv1alpha1.FleetQuota
	cluster    *placementv1alpha1.ClusterFleetQuota
}

// bounds are the quotas that bound namespace.
func (r *Reconciler) bounds(ctx context.Context, namespace string) ([]bound, error) {
	quotas := &placementv1alpha1.FleetQuotaList{}
	if err := r.Client.List(ctx, quotas, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	var out []bound
	for i := range quotas.Items {
		fq := &quotas.Items[i]
		out = append(out, bound{what: "FleetQuota " + fq.Name, hard: fq.Spec.Hard, uncounted: fq.Spec.Uncounted, namespaces: []string{namespace}, namespaced: fq})
	}
	clusterQuotas, err := lookup.ClusterQuotasOf(ctx, r.Client, namespace)
	if err != nil {
		return nil, err
	}
	for _, cfq := range clusterQuotas {
		selected, err := lookup.SelectedBy(ctx, r.Client, cfq)
		if err != nil {
			return nil, err
		}
		out = append(out, bound{what: "ClusterFleetQuota " + cfq.Name, hard: cfq.Spec.Hard, uncounted: cfq.Spec.Uncounted, namespaces: selected, cluster: cfq})
	}
	return out, nil
}

// bounded maps a change in namespace to the namespaces whose admissions it
// may change: namespace itself when a quota bounds it, and every namespace a
// ClusterFleetQuota bounds together with it.
func (r *Reconciler) bounded(ctx context.Context, namespace string) []reconcile.Request {
	if namespace == "" {
		return nil
	}
	seen := map[string]bool{}
	quotas := &placementv1alpha1.FleetQuotaList{}
	if err := r.Client.List(ctx, quotas, client.InNamespace(namespace), client.Limit(1)); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing FleetQuotas", "namespace", namespace)
		return nil
	}
	if len(quotas.Items) > 0 {
		seen[namespace] = true
	}
	clusterQuotas, err := lookup.ClusterQuotasOf(ctx, r.Client, namespace)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Reading ClusterFleetQuotas", "namespace", namespace)
		return nil
	}
	return r.namespacesOf(ctx, seen, clusterQuotas)
}

// selected maps ClusterFleetQuotas (an update's old and new) to the
// namespaces they select: those it no longer selects lose its bound.
func (r *Reconciler) selected(ctx context.Context, objs ...client.Object) []reconcile.Request {
	var quotas []*placementv1alpha1.ClusterFleetQuota
	for _, obj := range objs {
		if cfq, ok := obj.(*placementv1alpha1.ClusterFleetQuota); ok {
			quotas = append(quotas, cfq)
		}
	}
	return r.namespacesOf(ctx, map[string]bool{}, quotas)
}

// namespacesOf are requests for the namespaces of seen and those the
// ClusterFleetQuotas select, each once, sorted.
func (r *Reconciler) namespacesOf(ctx context.Context, seen map[string]bool, quotas []*placementv1alpha1.ClusterFleetQuota) []reconcile.Request {
	for _, cfq := range quotas {
		selected, err := lookup.SelectedBy(ctx, r.Client, cfq)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing the namespaces of a ClusterFleetQuota", "clusterFleetQuota", cfq.Name)
			continue
		}
		for _, ns := range selected {
			seen[ns] = true
		}
	}
	reqs := make([]reconcile.Request, 0, len(seen))
	for _, ns := range slices.Sorted(maps.Keys(seen)) {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns}})
	}
	return reqs
}
