package debugapi

import (
	"context"
	"fmt"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1alpha1 "github.com/lodestar-dev/lodestar/api/debug/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/agentidentity"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/tunnel"
)

// DefaultAuthorizeEvery is how often an open tunnel's opener is authorised
// again (a SubjectAccessReview); its ServiceAccount is compared every
// tunnel.DefaultRecheck.
const DefaultAuthorizeEvery = time.Minute

// tunnelAuth binds a tunnel to the agent ServiceAccount that opened it and
// checks, while it is open, that the ServiceAccount is still that one (a
// `kubectl lodestar revoke` makes it anew) and that the hub still lets it
// open the tunnel.
type tunnelAuth struct {
	// Direct reads the ServiceAccount when a tunnel opens; Accounts (a cache
	// of the agents' ServiceAccounts alone) while it is open.
	Direct, Accounts client.Reader
	Reviews          authorizationclient.SubjectAccessReviewInterface
	AuthorizeEvery   time.Duration

	mu         sync.Mutex
	authorized map[string]time.Time // by cluster and ServiceAccount UID
}

// identity is the tunnel.Identity of user opening cluster's tunnel: refused
// when the agent's ServiceAccount is not the one the user's token was for.
func (a *tunnelAuth) identity(ctx context.Context, cluster string, user User) (tunnel.Identity, error) {
	sa, err := a.account(ctx, a.Direct, cluster)
	if err != nil {
		return tunnel.Identity{}, err
	}
	if user.UID != "" && user.UID != string(sa.UID) {
		return tunnel.Identity{}, fmt.Errorf("the token is of an earlier ServiceAccount %s (revoked); join the cluster again", agentidentity.User(cluster))
	}
	return tunnel.Identity{User: user.Name, UID: user.UID, Groups: user.Groups, Extra: user.Extra, ServiceAccountUID: string(sa.UID)}, nil
}

func (a *tunnelAuth) account(ctx context.Context, r client.Reader, cluster string) (*metav1.PartialObjectMetadata, error) {
	sa := &metav1.PartialObjectMetadata{}
	sa.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ServiceAccount"))
	if err := r.Get(ctx, client.ObjectKey{Namespace: names.ClusterNamespace(cluster), Name: agentidentity.ServiceAccount}, sa); err != nil {
		return nil, fmt.Errorf("reading the agent's ServiceAccount %s: %w", agentidentity.User(cluster), err)
	}
	return sa, nil
}

// Check says whether the identity that opened cluster's tunnel may still hold
// it (tunnel.Registry.Check).
func (a *tunnelAuth) Check(ctx context.Context, cluster string, id tunnel.Identity) error {
	sa, err := a.account(ctx, a.Accounts, cluster)
	if err != nil {
		return err
	}
	if string(sa.UID) != id.ServiceAccountUID {
		return fmt.Errorf("the agent's ServiceAccount %s was made anew (revoked)", agentidentity.User(cluster))
	}
	key := cluster + "/" + id.ServiceAccountUID
	a.mu.Lock()
	due := time.Since(a.authorized[key]) >= a.AuthorizeEvery
	a.mu.Unlock()
	if !due {
		return nil
	}
	review, err := askHub(ctx, a.Reviews, User{Name: id.User, UID: id.UID, Groups: id.Groups, Extra: id.Extra}, authorizationv1.ResourceAttributes{
		Namespace: names.ClusterNamespace(cluster), Verb: "create", Group: debugv1alpha1.Group, Version: debugv1alpha1.Version,
		Resource: debugv1alpha1.Tunnels, Subresource: debugv1alpha1.TunnelSubresource, Name: cluster,
	})
	if err != nil {
		return nil //nolint:nilerr // the hub API server unreachable for a moment cuts no tunnel
	}
	if !review.Status.Allowed {
		return fmt.Errorf("%s may no longer open cluster %s's tunnel", id.User, cluster)
	}
	a.mu.Lock()
	if a.authorized == nil {
		a.authorized = map[string]time.Time{}
	}
	a.authorized[key] = time.Now()
	a.mu.Unlock()
	return nil
}
