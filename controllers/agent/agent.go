// Package agent assembles the work agent: a manager on the hub whose cache holds
// only its cluster's namespace, and a client of the member cluster.
package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	"sigs.k8s.io/yaml"

	debugv1alpha1 "github.com/lodestar-dev/lodestar/api/debug/v1alpha1"
	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/agent/debug"
	"github.com/lodestar-dev/lodestar/controllers/agent/profile"
	"github.com/lodestar-dev/lodestar/controllers/agent/registration"
	"github.com/lodestar-dev/lodestar/controllers/agent/services"
	"github.com/lodestar-dev/lodestar/controllers/agent/work"
	"github.com/lodestar-dev/lodestar/internal/metrics"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/policy"
	"github.com/lodestar-dev/lodestar/internal/readiness"
	"github.com/lodestar-dev/lodestar/internal/scheme"
	"github.com/lodestar-dev/lodestar/internal/tunnel"
	"github.com/lodestar-dev/lodestar/internal/watches"
)

// Options configure an agent.
type Options struct {
	// ClusterName is the name of the member cluster's ClusterProfile on the hub.
	ClusterName string
	// Hub is the agent's own identity on the hub.
	Hub *rest.Config
	// Member is the agent's identity on the member cluster.
	Member *rest.Config
	// Manager are further manager options (metrics, health probes).
	Manager ctrl.Options
	// Config is the member admin's configuration of the agent.
	Config Config
	// ClusterSet is the cluster-set namespace of the cluster's ClusterProfile.
	ClusterSet string
	// TokenFile keeps the agent's renewed hub token across restarts; empty keeps it
	// in memory only.
	TokenFile string
	// TokenTTL is the lifetime of renewed hub tokens.
	TokenTTL time.Duration
	// TokenRenewAt is the fraction of a token's lifetime after which it is renewed
	// (default 0.8).
	TokenRenewAt float64
	// LeaseDuration is the duration of the agent's Lease on the hub.
	LeaseDuration time.Duration
	// PropertiesPeriod is how often the ClusterProfile's properties are refreshed.
	PropertiesPeriod time.Duration
	// AgentNamespace is the agent's own namespace on the member, which Works may
	// never write.
	AgentNamespace string
	// MissingWorkGracePeriod is how long a Work may be gone from the hub (its
	// finalizer removed while the agent was away, say) before the agent removes
	// what it placed for it (default work.DefaultMissingWorkGracePeriod).
	MissingWorkGracePeriod time.Duration
	// UnservedKindGracePeriod bounds how long cleanup waits for a recorded kind
	// the member no longer serves (default work.DefaultUnservedKindGracePeriod).
	UnservedKindGracePeriod time.Duration
	// HubID is the hub's identity in the names of the member's AppliedWorks;
	// empty derives it from the hub's address (names.HubID). Set it to keep the
	// records when the hub's address changes.
	HubID string
	// MemberAccess, when set, publishes the member's endpoint in the
	// ClusterProfile's status.accessProviders and keeps a token of a member
	// ServiceAccount on the hub for granted consumers (docs/member-access.md).
	MemberAccess *MemberAccess
	// Debug, when set, keeps the agent's tunnels to the hub's debug API open,
	// through which hub users reach the Placements' pods (docs/debugging.md).
	Debug *Debug
}

// Debug is the member admin's configuration of debugging from the hub.
type Debug struct {
	// TenantAccess is what the agent grants the tenant group of a namespace it
	// serves a request in: debug.TenantAccessNone, Logs (default) or Exec.
	TenantAccess string
	// ConsumerAccess serves platform teams' controllers through the tunnel
	// (the lodestar-tunnel access provider, docs/extending.md) as their own
	// member identities, and says so in the ClusterProfile (the property
	// placementv1alpha1.PropertyConsumerTunnel): the hub publishes the
	// provider.
	ConsumerAccess bool
}

// MemberAccess is the member admin's opt-in to member access.
type MemberAccess struct {
	// Server is the member API server's address as consumers on the hub's side
	// reach it.
	Server string
	// CAData is the PEM of the CA that signed the member API server's certificate.
	CAData []byte
	// ServiceAccount is the member ServiceAccount whose tokens consumers use.
	ServiceAccount types.NamespacedName
	// TTL is the tokens' lifetime (default registration.DefaultMemberTokenTTL,
	// at least registration.MinMemberTokenTTL).
	TTL time.Duration
	// RenewAt is the fraction of a token's lifetime after which it is renewed
	// (default 0.8).
	RenewAt float64
}

// Config is the agent's configuration file, owned by the member's admin.
type Config struct {
	// ReadinessRules are CEL rules that say when objects of a kind are available;
	// a rule for a built-in kind replaces the built-in check.
	ReadinessRules []readiness.Rule `json:"readinessRules,omitempty"`
	// Policy is the member's own limit on what the agent applies, whatever the
	// hub sends (docs/agent.md).
	Policy policy.Policy `json:"policy,omitempty"`
}

// DefaultConfig is the configuration of an agent run without a file: no
// readiness rules of the member's, and the default member policy.
func DefaultConfig() Config {
	return Config{Policy: policy.Defaults()}
}

// LoadConfig reads a configuration file over DefaultConfig: what the file sets
// replaces the default, field by field. Unknown fields are an error.
func LoadConfig(path string) (Config, error) {
	c := DefaultConfig()
	b, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return c, fmt.Errorf("reading %s: %w", path, err)
	}
	if _, err := readiness.NewChecker(c.ReadinessRules); err != nil {
		return c, fmt.Errorf("reading %s: %w", path, err)
	}
	if err := c.Policy.Validate(); err != nil {
		return c, fmt.Errorf("reading %s: policy: %w", path, err)
	}
	return c, nil
}

// NewManager returns an agent ready to Start.
func NewManager(opts Options) (ctrl.Manager, error) {
	if opts.ClusterName == "" {
		return nil, errors.New("the cluster name is required")
	}
	if opts.Hub == nil || opts.Member == nil {
		return nil, errors.New("both the hub and the member connection are required")
	}
	metrics.RegisterAgent()
	s := scheme.Agent()
	mgr, err := newHubManager(opts, s)
	if err != nil {
		return nil, err
	}
	m, err := connectMember(opts, s)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(m.cache); err != nil {
		return nil, err
	}
	clusterSet := opts.ClusterSet
	if clusterSet == "" {
		clusterSet = placementv1alpha1.DefaultClusterSet
	}
	reporter := &profile.Reporter{
		Hub: mgr.GetClient(), Member: m.client, MemberCache: m.cache, Discovery: m.discovery,
		ClusterSet: clusterSet, Cluster: opts.ClusterName, Period: opts.PropertiesPeriod,
	}
	if d := opts.Debug; d != nil && d.ConsumerAccess {
		reporter.Own = map[string]string{placementv1alpha1.PropertyConsumerTunnel: "true"}
	}
	if ma := opts.MemberAccess; ma != nil {
		if err := addMemberAccess(mgr, opts, ma, reporter); err != nil {
			return nil, err
		}
	}
	if err := mgr.Add(reporter); err != nil {
		return nil, err
	}
	works, err := addWorks(mgr, opts, m)
	if err != nil {
		return nil, err
	}
	if err := addServices(mgr, opts, m); err != nil {
		return nil, err
	}
	if opts.Debug != nil {
		access := cmp.Or(opts.Debug.TenantAccess, debug.TenantAccessLogs)
		if access != debug.TenantAccessNone && access != debug.TenantAccessLogs && access != debug.TenantAccessExec {
			return nil, fmt.Errorf("debug tenant access %q is not one of %s, %s, %s", access, debug.TenantAccessNone, debug.TenantAccessLogs, debug.TenantAccessExec)
		}
		log := ctrl.Log.WithName("debug-tunnel").WithValues("cluster", opts.ClusterName)
		if err := mgr.Add(&tunnel.Agent{Hub: mgr.GetConfig(), Path: debugv1alpha1.TunnelPath(opts.ClusterName), Log: log, Handler: &debug.Handler{
			Member: opts.Member, MemberClient: m.client, Hub: mgr.GetClient(), ClusterNamespace: names.ClusterNamespace(opts.ClusterName), HubID: works.HubID,
			TenantAccess: access, ConsumerAccess: opts.Debug.ConsumerAccess, Log: log,
		}}); err != nil {
			return nil, err
		}
	}
	// When the hub is back after an outage, every Work is reconciled, so that
	// what could not be reported meanwhile is reported at once.
	if err := mgr.Add(&registration.Heartbeat{
		Hub: mgr.GetClient(), Member: m.discovery.RESTClient(), Namespace: names.ClusterNamespace(opts.ClusterName), Cluster: opts.ClusterName,
		Duration: opts.LeaseDuration, OnReconnect: works.Resync,
	}); err != nil {
		return nil, err
	}
	return mgr, nil
}

// newHubManager is the agent's manager: its connection to the hub, through
// credentials it renews itself, scoped to the cluster's namespace there.
func newHubManager(opts Options, s *runtime.Scheme) (ctrl.Manager, error) {
	mopts := opts.Manager
	mopts.Scheme = s
	// Watch only the cluster's own namespace on the hub: the agent's identity may
	// read nothing else.
	// Neither cache keeps managedFields: the agent never reads them from a cache
	// (only from what an apply returns), and they are often half of an object.
	mopts.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{names.ClusterNamespace(opts.ClusterName): {}},
		DefaultTransform: cache.TransformStripManagedFields()}
	// Several agents may share a process (tests, simulated members in benchmarks);
	// each has a single controller, so its name needs no process-wide uniqueness.
	mopts.Controller.SkipNameValidation = ptr.To(true)
	// The Lease, the ClusterProfile and the member-access Secret are read and
	// written one object at a time: the agent may not list or watch them.
	mopts.Client.Cache = &client.CacheOptions{DisableFor: []client.Object{&coordinationv1.Lease{}, &cpv1alpha1.ClusterProfile{}, &corev1.Secret{}}}
	creds := &registration.Credentials{Namespace: names.ClusterNamespace(opts.ClusterName), File: opts.TokenFile, TTL: opts.TokenTTL, RenewAt: opts.TokenRenewAt}
	hubConfig, err := creds.Wrap(opts.Hub)
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(hubConfig, mopts)
	if err != nil {
		return nil, fmt.Errorf("creating the hub manager: %w", err)
	}
	return mgr, mgr.Add(creds)
}

// member is the agent's connection to its member cluster.
type member struct {
	client    client.Client
	cache     cache.Cache
	discovery *discovery.DiscoveryClient
	// watches are the kinds of placed objects watched on the member; a watch
	// that fails because its kind is gone (CRD deleted) is stopped.
	watches *watches.Set
}

// connectMember makes the agent's client, cache and discovery of the member.
func connectMember(opts Options, s *runtime.Scheme) (*member, error) {
	httpClient, err := rest.HTTPClientFor(opts.Member)
	if err != nil {
		return nil, fmt.Errorf("creating the member client: %w", err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(opts.Member, httpClient)
	if err != nil {
		return nil, fmt.Errorf("creating the member client: %w", err)
	}
	m := &member{watches: &watches.Set{Object: work.MetadataObject, OnStop: func(gvk schema.GroupVersionKind) {
		metrics.AgentWatchedKinds.WithLabelValues(gvk.Group, gvk.Kind).Dec()
	}}}
	if m.client, err = client.New(opts.Member, client.Options{Scheme: s, Mapper: mapper, HTTPClient: httpClient}); err != nil {
		return nil, fmt.Errorf("creating the member client: %w", err)
	}
	if m.cache, err = cache.New(opts.Member, cache.Options{Scheme: s, Mapper: mapper, HTTPClient: httpClient,
		DefaultWatchErrorHandler: m.watches.ErrorHandler, DefaultTransform: cache.TransformStripManagedFields()}); err != nil {
		return nil, fmt.Errorf("creating the member cache: %w", err)
	}
	if m.discovery, err = discovery.NewDiscoveryClientForConfigAndClient(opts.Member, httpClient); err != nil {
		return nil, fmt.Errorf("creating the member client: %w", err)
	}
	m.watches.Cache, m.watches.Discovery = m.cache, m.discovery
	return m, nil
}

// addWorks adds the work controller, under the member's policy, and the sweeper
// of Works gone from the hub.
func addWorks(mgr ctrl.Manager, opts Options, m *member) (*work.Reconciler, error) {
	checker, err := readiness.NewChecker(opts.Config.ReadinessRules)
	if err != nil {
		return nil, err
	}
	memberPolicy, err := policy.NewChecker(opts.Config.Policy, opts.AgentNamespace)
	if err != nil {
		return nil, fmt.Errorf("the agent's policy: %w", err)
	}
	memberPolicy.LookupRole = func(kind, namespace, name string) (*unstructured.Unstructured, error) {
		role := &unstructured.Unstructured{}
		role.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind(kind))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := m.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, role)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return role, err
	}
	hubID := opts.HubID
	if hubID == "" {
		hubID = names.HubID(opts.Hub.Host)
	}
	works := &work.Reconciler{
		Watches: m.watches, HubID: hubID, UnservedKindGracePeriod: opts.UnservedKindGracePeriod, Policy: memberPolicy,
		Hub: mgr.GetClient(), Member: m.client, MemberCache: m.cache, Readiness: checker, Recorder: mgr.GetEventRecorder("lodestar-agent"),
	}
	ns := names.ClusterNamespace(opts.ClusterName)
	if err := works.SetupWithManager(mgr, ns); err != nil {
		return nil, fmt.Errorf("setting up the work controller: %w", err)
	}
	if err := mgr.Add(m.watches); err != nil {
		return nil, err
	}
	return works, mgr.Add(&work.Sweeper{
		Reconciler: works, HubCache: mgr.GetCache(), HubReader: mgr.GetAPIReader(), Namespace: ns, GracePeriod: opts.MissingWorkGracePeriod,
	})
}

// addServices adds the Multicluster Services controllers when the member
// serves the MCS API (the agent chart installs its CRDs; a member without them
// neither exports nor imports, and an agent started before them must restart).
func addServices(mgr ctrl.Manager, opts Options, m *member) error {
	resources, err := m.discovery.ServerResourcesForGroupVersion(mcsv1beta1.GroupVersion.String())
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading whether the member serves %s: %w", mcsv1beta1.GroupVersion, err)
	}
	served := 0
	if resources != nil {
		for _, r := range resources.APIResources {
			if r.Name == mcsv1beta1.ServiceExportPluralName || r.Name == mcsv1beta1.ServiceImportPluralName {
				served++
			}
		}
	}
	ns := names.ClusterNamespace(opts.ClusterName)
	if served < 2 {
		ctrl.Log.WithName("lodestar-agent").Info("The member does not serve the Multicluster Services API: no exports or imports", "groupVersion", mcsv1beta1.GroupVersion)
		// The hub is told, import by import, so that moves do not wait for it.
		return (&services.Importer{Hub: mgr.GetClient(), Namespace: ns, Unserved: true}).SetupWithManager(mgr)
	}
	lease := &services.ExportsLease{Hub: mgr.GetClient(), Namespace: ns, Cluster: opts.ClusterName}
	if err := mgr.Add(lease); err != nil {
		return err
	}
	if err := (&services.Exporter{Hub: mgr.GetClient(), Member: m.client, MemberCache: m.cache, Namespace: ns, Lease: lease}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the service exporter: %w", err)
	}
	if err := (&services.Importer{Hub: mgr.GetClient(), Member: m.client, MemberCache: m.cache, Namespace: ns}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the service importer: %w", err)
	}
	return nil
}

// addMemberAccess adds the member-access token renewal, and has the reporter
// publish the access provider.
func addMemberAccess(mgr ctrl.Manager, opts Options, ma *MemberAccess, reporter *profile.Reporter) error {
	if ma.Server == "" || ma.ServiceAccount.Name == "" || ma.ServiceAccount.Namespace == "" {
		return errors.New("member access needs the member's server address and a ServiceAccount")
	}
	ttl := ma.TTL
	if ttl == 0 {
		ttl = registration.DefaultMemberTokenTTL
	}
	if ttl < registration.MinMemberTokenTTL {
		return fmt.Errorf("member access: a token lifetime of %s is below the API server's minimum of %s", ttl, registration.MinMemberTokenTTL)
	}
	cs, err := kubernetes.NewForConfig(opts.Member)
	if err != nil {
		return fmt.Errorf("creating the member client: %w", err)
	}
	reporter.AccessProviders = append(reporter.AccessProviders, profile.SecretReaderProvider(opts.ClusterName, ma.Server, ma.CAData))
	return mgr.Add(&registration.MemberAccess{
		Hub: mgr.GetClient(), Member: cs, Namespace: names.ClusterNamespace(opts.ClusterName),
		ServiceAccount: ma.ServiceAccount, TTL: ttl, RenewAt: ma.RenewAt,
	})
}
