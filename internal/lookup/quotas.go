package lookup

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// ClusterQuotasOf are the ClusterFleetQuotas that select namespace.
func ClusterQuotasOf(ctx context.Context, c client.Reader, namespace string) ([]*placementv1alpha1.ClusterFleetQuota, error) {
	list := &placementv1alpha1.ClusterFleetQuotaList{}
	if err := c.List(ctx, list); err != nil || len(list.Items) == 0 {
		return nil, err
	}
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	var out []*placementv1alpha1.ClusterFleetQuota
	for i := range list.Items {
		sel, err := metav1.LabelSelectorAsSelector(&list.Items[i].Spec.NamespaceSelector)
		if err != nil {
			return nil, fmt.Errorf("ClusterFleetQuota %s: %w", list.Items[i].Name, err)
		}
		if sel.Matches(labels.Set(ns.Labels)) {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// SelectedBy are the namespaces a ClusterFleetQuota selects, sorted.
func SelectedBy(ctx context.Context, c client.Reader, cfq *placementv1alpha1.ClusterFleetQuota) ([]string, error) {
	sel, err := metav1.LabelSelectorAsSelector(&cfq.Spec.NamespaceSelector)
	if err != nil {
		return nil, fmt.Errorf("ClusterFleetQuota %s: %w", cfq.Name, err)
	}
	list := &corev1.NamespaceList{}
	if err := c.List(ctx, list, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, list.Items[i].Name)
	}
	slices.Sort(out)
	return out, nil
}

// QuotaBounded tells whether a FleetQuota of namespace, or a
// ClusterFleetQuota that selects it, bounds its Placements.
func QuotaBounded(ctx context.Context, c client.Reader, namespace string) (bool, error) {
	quotas := &placementv1alpha1.FleetQuotaList{}
	if err := c.List(ctx, quotas, client.InNamespace(namespace), client.Limit(1)); err != nil {
		return false, err
	}
	if len(quotas.Items) > 0 {
		return true, nil
	}
	clusterQuotas, err := ClusterQuotasOf(ctx, c, namespace)
	return len(clusterQuotas) > 0, err
}
