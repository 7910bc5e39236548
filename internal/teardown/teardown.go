// Package teardown removes what join made of a cluster on the hub, once the
// cluster is gone: the cleanup reconciler's and `kubectl lodestar unjoin`'s one
// way to do it.
package teardown

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/agentidentity"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// RemoveHubSide deletes a cluster's hub side that join made: the agent's Role
// and RoleBinding in the cluster set, and the cluster's namespace (with the
// agent's identity, Lease and tokens) when it carries join's mark. A namespace
// of that name without the mark is someone else's and stays: kept says so.
func RemoveHubSide(ctx context.Context, c client.Client, clusterSet, cluster string) (kept bool, err error) {
	owned := []client.Object{
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: agentidentity.ProfileRoleName(cluster), Namespace: clusterSet}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: agentidentity.ProfileRoleName(cluster), Namespace: clusterSet}},
	}
	namespace := &corev1.Namespace{}
	switch err := c.Get(ctx, client.ObjectKey{Name: names.ClusterNamespace(cluster)}, namespace); {
	case err == nil && namespace.Labels[placementv1alpha1.ReservedNamespaceLabel] == placementv1alpha1.ReservedForCluster:
		owned = append(owned, namespace)
	case err == nil:
		kept = true
	case !apierrors.IsNotFound(err):
		return false, err
	}
	for _, obj := range owned {
		if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return kept, fmt.Errorf("deleting %T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
		}
	}
	return kept, nil
}
