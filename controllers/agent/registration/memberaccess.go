package registration

import (
	"context"
	"errors"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/metrics"
)

// The agent's hub identity may write exactly one Secret, its member-access
// token's; `kubectl lodestar join` creates it (RBAC cannot allow creating only
// one name).
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;update;patch,resourceNames=lodestar-member-access

// MinMemberTokenTTL is the shortest token lifetime a member's API server issues.
const MinMemberTokenTTL = 10 * time.Minute

// DefaultMemberTokenTTL is the default lifetime of member-access tokens.
const DefaultMemberTokenTTL = time.Hour

// MemberAccess keeps a short-lived token of a member ServiceAccount in the
// cluster's member-access Secret on the hub, renewed before it expires, for the
// platform teams' controllers that a MemberAccessGrant lets reach the member.
type MemberAccess struct {
	// Hub is the agent's client of the hub.
	Hub client.Client
	// Member requests the tokens on the member.
	Member kubernetes.Interface
	// Namespace is the cluster's namespace on the hub.
	Namespace string
	// ServiceAccount is the member ServiceAccount whose tokens are handed out;
	// its RBAC on the member is what consumers may do.
	ServiceAccount types.NamespacedName
	// TTL is the lifetime asked for each token (at least MinMemberTokenTTL).
	TTL time.Duration
	// RenewAt is the fraction of a token's lifetime after which it is renewed
	// (default 0.8).
	RenewAt float64
	// RetryAfter is how long to wait after a failure (default 10s).
	RetryAfter time.Duration
}

// Start renews the token until ctx ends.
func (m *MemberAccess) Start(ctx context.Context) error {
	if m.TTL < MinMemberTokenTTL {
		return fmt.Errorf("member access: a token lifetime of %s is below the API server's minimum of %s", m.TTL, MinMemberTokenTTL)
	}
	if m.RenewAt <= 0 || m.RenewAt >= 1 {
		m.RenewAt = 0.8
	}
	if m.RetryAfter == 0 {
		m.RetryAfter = 10 * time.Second
	}
	log := ctrl.LoggerFrom(ctx).WithName("member-access").WithValues("serviceAccount", m.ServiceAccount)
	for {
		wait := m.RetryAfter
		issued, expires, err := m.renew(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			metrics.MemberTokenRenewals.WithLabelValues("failure").Inc()
			log.Error(err, "Renewing the member-access token; retrying", "after", m.RetryAfter)
		case err == nil:
			metrics.MemberTokenRenewals.WithLabelValues("success").Inc()
			log.V(2).Info("Renewed the member-access token", "expires", expires)
			wait = time.Until(issued.Add(time.Duration(float64(expires.Sub(issued)) * m.RenewAt)))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// NeedLeaderElection is false: the agent runs one replica per member.
func (m *MemberAccess) NeedLeaderElection() bool { return false }

// renew requests a token on the member and writes it to the hub Secret.
func (m *MemberAccess) renew(ctx context.Context) (issued, expires time.Time, err error) {
	issued = time.Now()
	tr, err := m.Member.CoreV1().ServiceAccounts(m.ServiceAccount.Namespace).CreateToken(ctx, m.ServiceAccount.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(m.TTL.Seconds()))},
	}, metav1.CreateOptions{})
	if err != nil {
		return issued, issued, fmt.Errorf("requesting a token of %s on the member: %w", m.ServiceAccount, err)
	}
	expires = tr.Status.ExpirationTimestamp.Time
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: m.Namespace, Name: placementv1alpha1.MemberAccessSecret}
	if err := m.Hub.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return issued, expires, errors.New("the hub has no Secret " + key.String() + " for the member-access token: join the cluster again (kubectl lodestar join) to create it")
		}
		return issued, expires, fmt.Errorf("reading Secret %s: %w", key, err)
	}
	patch := client.MergeFrom(secret.DeepCopy())
	if secret.Labels == nil {
		secret.Labels = map[string]string{}
	}
	secret.Labels[placementv1alpha1.MemberAccessLabel] = "source"
	if secret.Annotations == nil {
		secret.Annotations = map[string]string{}
	}
	secret.Annotations[placementv1alpha1.MemberAccessExpiresAnnotation] = expires.UTC().Format(time.RFC3339)
	secret.Data = map[string][]byte{"token": []byte(tr.Status.Token)}
	if err := m.Hub.Patch(ctx, secret, patch); err != nil {
		return issued, expires, fmt.Errorf("writing Secret %s: %w", key, err)
	}
	return issued, expires, nil
}
