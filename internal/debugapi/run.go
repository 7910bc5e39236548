package debugapi

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/agentidentity"
	"github.com/lodestar-dev/lodestar/internal/tunnel"
)

// Options configure the hub's debug server.
type Options struct {
	// BindAddress is where it listens (TLS), unless Listener is set.
	BindAddress string
	// Listener, when set, is what it serves on (tests, the quick start).
	Listener net.Listener
	// Namespace, Service and Secret are where the chart installs it: the
	// Service the APIService names (the certificate's DNS names) and the
	// Secret holding the certificate every replica serves.
	Namespace, Service, Secret string
	// ReplicaID identifies this replica to the agents; Replicas is how many
	// there are (each agent holds a tunnel to every one).
	ReplicaID string
	Replicas  int
	// StreamsPerUser, Streams and Recheck are the Server's.
	StreamsPerUser, StreamsPerNamespace, Streams int
	Recheck, ConsumerRecheck                     time.Duration
	// TunnelRecheck is how often an open tunnel's ServiceAccount is compared
	// (tunnel.DefaultRecheck), TunnelAuthorizeEvery how often its opener is
	// authorised again (DefaultAuthorizeEvery).
	TunnelRecheck, TunnelAuthorizeEvery time.Duration
	// Local are the subresources the hub manager answers itself, such as
	// Fleet, by name.
	Local map[string]LocalHandler
}

// LocalHandler answers a GET of a Placement's subresource on the hub itself
// (a user the hub authorised for it), for cluster, with what reader reads
// (the hub manager's cache); the answer is written as JSON.
type LocalHandler func(ctx context.Context, reader client.Reader, placement *placementv1alpha1.Placement, cluster string) (any, error)

// Defaults of Options, as the hub chart installs it.
const (
	DefaultService = "lodestar-debug"
	DefaultSecret  = "lodestar-debug-serving"
)

// Runnable serves the debug API from a manager: on every replica, leader or not.
type Runnable struct {
	Options
	mgr     manager.Manager
	Tunnels *tunnel.Registry

	mu   sync.Mutex
	addr net.Addr
}

// Add adds the debug server to mgr.
func Add(mgr manager.Manager, opts Options) (*Runnable, error) {
	if opts.Service == "" {
		opts.Service = DefaultService
	}
	if opts.Secret == "" {
		opts.Secret = DefaultSecret
	}
	r := &Runnable{Options: opts, mgr: mgr, Tunnels: tunnel.NewRegistry(opts.ReplicaID, opts.Replicas)}
	return r, mgr.Add(r)
}

// NeedLeaderElection is false: every replica serves.
func (r *Runnable) NeedLeaderElection() bool { return false }

// Addr is the address it listens on, once it does.
func (r *Runnable) Addr() net.Addr {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.addr
}

// agentAccounts is a cache of the agents' ServiceAccounts alone (their
// metadata, by name across the cluster namespaces), started and synced.
func agentAccounts(ctx context.Context, mgr manager.Manager) (client.Reader, error) {
	sa := &metav1.PartialObjectMetadata{}
	sa.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ServiceAccount"))
	c, err := cache.New(mgr.GetConfig(), cache.Options{Scheme: mgr.GetScheme(), ByObject: map[client.Object]cache.ByObject{
		sa: {Field: fields.OneTermEqualSelector("metadata.name", agentidentity.ServiceAccount)},
	}})
	if err != nil {
		return nil, err
	}
	if _, err := c.GetInformer(ctx, sa); err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, errors.New("the agents' ServiceAccounts did not sync")
	}
	return c, nil
}

// Start serves until ctx ends.
func (r *Runnable) Start(ctx context.Context) error {
	log := ctrl.Log.WithName("debug-server")
	direct, err := client.New(r.mgr.GetConfig(), client.Options{Scheme: r.mgr.GetScheme()})
	if err != nil {
		return err
	}
	auth, err := LoadFrontProxy(ctx, direct)
	if err != nil {
		return err
	}
	cert, ca, err := ServingCertificate(ctx, direct, r.Namespace, r.Secret, r.Service)
	if err != nil {
		return err
	}
	if err := PublishCA(ctx, direct, ca); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(r.mgr.GetConfig())
	if err != nil {
		return err
	}
	accounts, err := agentAccounts(ctx, r.mgr)
	if err != nil {
		return err
	}
	ta := &tunnelAuth{Direct: direct, Accounts: accounts, Reviews: cs.AuthorizationV1().SubjectAccessReviews(),
		AuthorizeEvery: cmp.Or(r.TunnelAuthorizeEvery, DefaultAuthorizeEvery)}
	r.Tunnels.Check, r.Tunnels.Recheck = ta.Check, r.TunnelRecheck
	go func() { _ = r.Tunnels.Run(ctx) }()
	srv := &Server{
		Reader: r.mgr.GetClient(), Works: r.mgr.GetAPIReader(), Reviews: cs.AuthorizationV1().SubjectAccessReviews(), Tunnels: r.Tunnels, Auth: auth,
		StreamsPerUser: r.StreamsPerUser, StreamsPerNamespace: r.StreamsPerNamespace, Streams: r.Streams, Recheck: r.Recheck, ConsumerRecheck: r.ConsumerRecheck, Log: log, tunnelAuth: ta,
		Local: r.Local, localPace: userPace{every: DefaultLocalPerUser, burst: DefaultLocalBurst},
	}
	l := r.Listener
	if l == nil {
		if l, err = net.Listen("tcp", r.BindAddress); err != nil {
			return fmt.Errorf("debug server: %w", err)
		}
	}
	r.mu.Lock()
	r.addr = l.Addr()
	r.mu.Unlock()
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 30 * time.Second,
		// HTTP/2 and HTTP/1.1: the hub API server sends streams over a few
		// HTTP/2 connections, and connection upgrades (tunnels, exec,
		// port-forward) on HTTP/1.1 connections of their own.
		TLSConfig: &tls.Config{
			MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert},
			// The hub API server's proxy certificate is checked per request.
			ClientAuth: tls.RequestClientCert,
		},
	}
	go func() {
		<-ctx.Done()
		r.Tunnels.Close()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(shutdown)
		_ = hs.Close()
	}()
	log.Info("serving the debug API", "address", l.Addr().String(), "replica", r.ReplicaID)
	if err := hs.ServeTLS(l, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
