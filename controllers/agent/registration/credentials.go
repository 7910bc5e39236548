// Package registration keeps the agent registered with the hub: it renews the
// agent's own hub token before it expires and its Lease in the cluster's namespace,
// which carries the member's readiness to the hub's cluster health controller.
package registration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/lodestar-dev/lodestar/internal/agentidentity"
	"github.com/lodestar-dev/lodestar/internal/metrics"
)

// +kubebuilder:rbac:groups="",resources=serviceaccounts/token,verbs=create,resourceNames=lodestar-agent

// Credentials hold the agent's hub token and renew it, with the token itself,
// before it expires: the agent needs no operator action as long as it reaches the
// hub once per token lifetime.
type Credentials struct {
	// Namespace is the cluster's namespace on the hub, where the agent's
	// ServiceAccount lives.
	Namespace string
	// File keeps the current token across restarts; empty keeps it in memory only.
	File string
	// TTL is the lifetime asked for each renewed token.
	TTL time.Duration
	// RenewAt is the fraction of a token's lifetime after which it is renewed.
	RenewAt float64

	mu     sync.RWMutex
	token  string
	claims claims
	hub    kubernetes.Interface
}

type claims struct {
	IssuedAt  int64 `json:"iat"`
	ExpiresAt int64 `json:"exp"`
}

func (c claims) issued() time.Time  { return time.Unix(c.IssuedAt, 0) }
func (c claims) expires() time.Time { return time.Unix(c.ExpiresAt, 0) }

// parseClaims reads the lifetime of a JWT without verifying it: the hub verifies;
// the agent only needs to know when to renew.
func parseClaims(token string) (claims, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return claims{}, errors.New("the hub token is not a JWT")
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return claims{}, fmt.Errorf("decoding the hub token's claims: %w", err)
	}
	var c claims
	if err := json.Unmarshal(b, &c); err != nil {
		return claims{}, fmt.Errorf("decoding the hub token's claims: %w", err)
	}
	if c.ExpiresAt == 0 || c.IssuedAt == 0 {
		return claims{}, errors.New("the hub token has no iat or exp claim")
	}
	return c, nil
}

// Wrap starts from the token of hub (or of File, when it holds a token that
// expires later, as after an earlier renewal) and returns hub's connection with its
// token replaced by the renewed ones.
func (c *Credentials) Wrap(hub *rest.Config) (*rest.Config, error) {
	if c.TTL == 0 {
		c.TTL = agentidentity.DefaultTokenTTL
	}
	if c.RenewAt == 0 {
		c.RenewAt = 0.8
	}
	token := hub.BearerToken
	if token == "" && hub.BearerTokenFile != "" {
		b, err := os.ReadFile(hub.BearerTokenFile)
		if err != nil {
			return nil, fmt.Errorf("reading the hub token: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" {
		return nil, errors.New("the hub kubeconfig has no token: the agent authenticates with the token `kubectl lodestar join` issued")
	}
	cl, err := parseClaims(token)
	if err != nil {
		return nil, err
	}
	if c.File != "" {
		if b, err := os.ReadFile(c.File); err == nil {
			saved := strings.TrimSpace(string(b))
			if sc, err := parseClaims(saved); err == nil && sc.ExpiresAt > cl.ExpiresAt {
				token, cl = saved, sc
			}
		}
	}
	c.token, c.claims = token, cl

	cfg := rest.CopyConfig(hub)
	cfg.BearerToken, cfg.BearerTokenFile = "", ""
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return &bearer{creds: c, next: rt} }
	if c.hub, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Token returns the current token.
func (c *Credentials) Token() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.token
}

// Expires returns when the current token expires.
func (c *Credentials) Expires() time.Time {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.claims.expires()
}

// Start renews the token until ctx ends.
func (c *Credentials) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("credentials")
	for {
		c.mu.RLock()
		cl := c.claims
		c.mu.RUnlock()
		lifetime := cl.expires().Sub(cl.issued())
		wait := time.Until(cl.issued().Add(time.Duration(float64(lifetime) * c.RenewAt)))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		if err := c.renew(ctx); err != nil {
			metrics.TokenRenewals.WithLabelValues("failure").Inc()
			if time.Now().After(cl.expires()) {
				log.Error(err, "Renewing the hub token failed and the token has expired: the cluster must join again (kubectl lodestar join)")
			} else {
				log.Error(err, "Renewing the hub token; retrying", "expires", cl.expires())
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(10 * time.Second):
			}
			continue
		}
		metrics.TokenRenewals.WithLabelValues("success").Inc()
		log.Info("Renewed the hub token", "expires", c.Expires())
	}
}

// NeedLeaderElection is false: the agent runs one replica per member.
func (c *Credentials) NeedLeaderElection() bool { return false }

func (c *Credentials) renew(ctx context.Context) error {
	token, err := agentidentity.RequestToken(ctx, c.hub, c.Namespace, c.TTL)
	if err != nil {
		return err
	}
	cl, err := parseClaims(token)
	if err != nil {
		return err
	}
	if c.File != "" {
		if err := writeFileAtomic(c.File, []byte(token+"\n")); err != nil {
			return fmt.Errorf("keeping the renewed token in %s: %w", c.File, err)
		}
	}
	c.mu.Lock()
	c.token, c.claims = token, cl
	c.mu.Unlock()
	return nil
}

func writeFileAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// bearer sets the current token on each request.
type bearer struct {
	creds *Credentials
	next  http.RoundTripper
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.creds.Token())
	return b.next.RoundTrip(req)
}
