// Package agentidentity is who a member's agent is on the hub: its
// ServiceAccount in the cluster's namespace, the user name that gives, the Role
// in the cluster set that lets it write its ClusterProfile, and how it asks
// for a token of its own. Join (internal/fleet), the agent, the hub's debug
// server and cleanup all agree on it here; it links nothing of the hub.
package agentidentity

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/lodestar-dev/lodestar/internal/names"
)

// ServiceAccount is the name of each agent's ServiceAccount in its cluster's
// namespace on the hub.
const ServiceAccount = "lodestar-agent"

// DefaultTokenTTL is the lifetime of the agent's hub token; the agent renews it
// before it expires.
const DefaultTokenTTL = time.Hour

// User is the hub user name of a cluster's agent.
func User(cluster string) string {
	return "system:serviceaccount:" + names.ClusterNamespace(cluster) + ":" + ServiceAccount
}

// ProfileRoleName is the name of the Role (and RoleBinding) in the cluster set that
// lets a cluster's agent write its ClusterProfile's status.
func ProfileRoleName(cluster string) string { return "lodestar-agent-" + cluster }

// RequestToken asks the hub for a token of the agent's ServiceAccount in ns.
func RequestToken(ctx context.Context, cs kubernetes.Interface, ns string, ttl time.Duration) (string, error) {
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, ServiceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(ttl.Seconds()))},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token for %s/%s: %w", ns, ServiceAccount, err)
	}
	return tr.Status.Token, nil
}
