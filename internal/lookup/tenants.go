// The tenants' hub namespaces: marked with placementv1alpha1.TenantNamespaceLabel
// while they are bound to a cluster set or hold Placements. The hub chart's
// tenant-pods admission policy refuses Pods in them.

package lookup

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// MarkTenant sets placementv1alpha1.TenantNamespaceLabel on namespace, which has a
// ClusterSetBinding or a Placement: the caller just read one. It reads only the
// Namespace (from the manager's cache) when the label is there already.
func MarkTenant(ctx context.Context, c client.Client, namespace string) error {
	return setTenant(ctx, c, namespace, func() (bool, error) { return true, nil })
}

// UnmarkTenant removes placementv1alpha1.TenantNamespaceLabel from namespace when it has
// neither a ClusterSetBinding nor a Placement (not being deleted, other than
// except) any more.
func UnmarkTenant(ctx context.Context, c client.Client, namespace string, except client.Object) error {
	return setTenant(ctx, c, namespace, func() (bool, error) { return isTenant(ctx, c, namespace, except) })
}

// setTenant gives namespace the label when tenant says so, and takes it away when not;
// tenant is asked only when the label may have to change.
func setTenant(ctx context.Context, c client.Client, namespace string, tenant func() (bool, error)) error {
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		return client.IgnoreNotFound(err)
	}
	want, err := tenant()
	if err != nil {
		return err
	}
	// The control plane's and Lodestar's own namespaces are never tenants: the
	// tenant-pods policy would refuse the pods of kube-system.
	want = want && !placementv1alpha1.IsReservedNamespace(namespace)
	if _, marked := ns.Labels[placementv1alpha1.TenantNamespaceLabel]; marked == want {
		return nil
	}
	base := ns.DeepCopy()
	if want {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[placementv1alpha1.TenantNamespaceLabel] = "true"
	} else {
		delete(ns.Labels, placementv1alpha1.TenantNamespaceLabel)
	}
	if err := c.Patch(ctx, ns, client.MergeFrom(base)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("labelling namespace %s: %w", namespace, err))
	}
	return nil
}

// isTenant tells whether namespace has a ClusterSetBinding or a Placement that
// stays (not except, not being deleted).
func isTenant(ctx context.Context, c client.Reader, namespace string, except client.Object) (bool, error) {
	stays := func(o client.Object) bool {
		return o.GetDeletionTimestamp().IsZero() && (except == nil || o.GetUID() != except.GetUID())
	}
	bindings := &placementv1alpha1.ClusterSetBindingList{}
	if err := c.List(ctx, bindings, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return false, fmt.Errorf("listing ClusterSetBindings: %w", err)
	}
	for i := range bindings.Items {
		if stays(&bindings.Items[i]) {
			return true, nil
		}
	}
	placements := &placementv1alpha1.PlacementList{}
	if err := c.List(ctx, placements, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return false, fmt.Errorf("listing Placements: %w", err)
	}
	for i := range placements.Items {
		if stays(&placements.Items[i]) {
			return true, nil
		}
	}
	return false, nil
}

// NotReservedError says that a namespace Lodestar would use exists without its
// mark (placementv1alpha1.ReservedNamespaceLabel for the purpose): it is
// someone else's.
type NotReservedError struct{ Namespace, For string }

func (e *NotReservedError) Error() string {
	return fmt.Sprintf("namespace %s exists and is not Lodestar's (no label %s=%s)", e.Namespace, placementv1alpha1.ReservedNamespaceLabel, e.For)
}

// Reserve creates namespace name marked as Lodestar's for purpose, or checks
// that the one there is: a *NotReservedError when it exists without the mark.
func Reserve(ctx context.Context, c client.Client, name, purpose string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{placementv1alpha1.ReservedNamespaceLabel: purpose}}}
	err := c.Create(ctx, ns)
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("creating namespace %s: %w", name, err)
		}
		return nil
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(ns), ns); err != nil {
		return err
	}
	if ns.Labels[placementv1alpha1.ReservedNamespaceLabel] != purpose {
		return &NotReservedError{Namespace: name, For: purpose}
	}
	return nil
}
