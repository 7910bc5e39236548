package fleet

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lodestar-dev/lodestar/internal/agentidentity"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// Revoke cuts off every hub token of the cluster's agent, stolen or not: the
// agent's ServiceAccount is deleted and made anew. The API server checks a bound
// token against the UID of its ServiceAccount, so tokens of the old one, and the
// renewals they could request, stop working at once; the Roles and their
// bindings name the account and stay. The cluster keeps what it runs, and gets
// no changes until its admin installs the kubeconfig of a new join.
func Revoke(ctx context.Context, c client.Client, name string) error {
	ns := names.ClusterNamespace(name)
	sa := &corev1.ServiceAccount{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: agentidentity.ServiceAccount}, sa); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("cluster %s has no agent identity on this hub (ServiceAccount %s/%s): was it joined?", name, ns, agentidentity.ServiceAccount)
		}
		return err
	}
	old := sa.UID
	if err := c.Delete(ctx, sa, client.Preconditions{UID: &old}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting the agent's ServiceAccount: %w", err)
	}
	// The deletion is done when the account is gone (or replaced); then it is made anew.
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got := &corev1.ServiceAccount{}
		err := c.Get(ctx, client.ObjectKeyFromObject(sa), got)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && got.UID != old, err
	})
	if err != nil {
		return fmt.Errorf("waiting for the agent's old ServiceAccount to go: %w", err)
	}
	return createIfMissing(ctx, c, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: agentidentity.ServiceAccount, Namespace: ns}})
}
