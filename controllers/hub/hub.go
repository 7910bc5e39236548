// Package hub assembles the hub controllers into one manager.
package hub

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/labels"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/hub/clustercleanup"
	"github.com/lodestar-dev/lodestar/controllers/hub/clusterhealth"
	"github.com/lodestar-dev/lodestar/controllers/hub/clusterplacement"
	"github.com/lodestar-dev/lodestar/controllers/hub/clustersetbinding"
	"github.com/lodestar-dev/lodestar/controllers/hub/consumeraccess"
	"github.com/lodestar-dev/lodestar/controllers/hub/fleetquota"
	"github.com/lodestar-dev/lodestar/controllers/hub/fleetview"
	"github.com/lodestar-dev/lodestar/controllers/hub/interpretation"
	"github.com/lodestar-dev/lodestar/controllers/hub/memberaccess"
	"github.com/lodestar-dev/lodestar/controllers/hub/placementrevision"
	"github.com/lodestar-dev/lodestar/controllers/hub/placementstatus"
	"github.com/lodestar-dev/lodestar/controllers/hub/scheduler"
	"github.com/lodestar-dev/lodestar/controllers/hub/serviceimport"
	"github.com/lodestar-dev/lodestar/controllers/hub/settled"
	"github.com/lodestar-dev/lodestar/controllers/hub/tunnelprovider"
	"github.com/lodestar-dev/lodestar/controllers/hub/workgenerator"
	interpretationcache "github.com/lodestar-dev/lodestar/internal/interpretation"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/metrics"
	"github.com/lodestar-dev/lodestar/internal/scheme"
)

// DefaultLeaderElectionID is the name of the hub manager's leader election
// Lease (the hub chart names it after its release).
const DefaultLeaderElectionID = "lodestar-hub.placement.lodestar.dev"

// DefaultName is the hub manager's name when Options.Name is empty: the hub
// chart's default release.
const DefaultName = placementv1alpha1.DefaultHubManager

// DefaultWorkers is how many Placements each hub controller reconciles at once.
const DefaultWorkers = 4

// Options configure the hub controllers.
type Options struct {
	// ClusterSetNamespaces are the cluster sets the hub manages: the namespaces
	// whose ClusterProfiles get health and cleanup. ClusterProfiles elsewhere are
	// never acted on.
	ClusterSetNamespaces []string
	// Name is the hub manager's name, marked on the namespaces of its cluster
	// sets (default DefaultName); two releases on one hub have two names.
	Name string
	// SetsOnly: the manager takes only what belongs to its cluster sets, leaving
	// the rest (ClusterPlacements, namespaces that bind no marked set, the
	// heartbeat pace) to the hub's one hub-wide manager (docs/scale.md).
	SetsOnly bool
	// Workers is how many Placements each controller reconciles at once.
	Workers int
	// LeaseGracePeriod is how long after its Lease expires an agent still counts
	// as reachable.
	LeaseGracePeriod time.Duration
	// CleanupGracePeriod is how long a deleted cluster's unreachable agent has to
	// remove what it placed before the hub cleans up without it.
	CleanupGracePeriod time.Duration
	// HeartbeatWriteBudget is how many Lease renewals per second the agents may
	// cost the hub; their heartbeat interval is set for the fleet's size to fit
	// it (default clusterhealth.DefaultHeartbeatWriteBudget).
	HeartbeatWriteBudget float64
	// MaxHeartbeatInterval is the longest heartbeat interval asked of an agent
	// (default clusterhealth.DefaultMaxHeartbeatInterval).
	MaxHeartbeatInterval time.Duration
	// ExportableNamespaces are the namespaces among default and kube-* from
	// which members may export Services.
	ExportableNamespaces []string
	// ConsumerServer is the hub API server's address as consumers of the
	// agents' tunnels reach it, published in the lodestar-tunnel access
	// provider (default: the manager's own connection's).
	ConsumerServer string
}

// ManagerOptions returns the manager options the hub controllers need, starting
// from base: the hub scheme, a client that reads every kind (including the
// user objects that Placements select, as unstructured) from the cache, and a
// cache of only the Works of manager (Options.Name, DefaultName when empty).
func ManagerOptions(base ctrl.Options, manager string) ctrl.Options {
	base.Scheme = scheme.Hub()
	base.Client.Cache = &client.CacheOptions{Unstructured: true}
	// Of all Leases, only the agents' heartbeats are watched.
	if base.Cache.ByObject == nil {
		base.Cache.ByObject = map[client.Object]cache.ByObject{}
	}
	base.Cache.ByObject[&coordinationv1.Lease{}] = cache.ByObject{
		Label: labels.SelectorFromSet(labels.Set{placementv1alpha1.AgentLeaseLabel: "true"}),
	}
	if manager == "" {
		manager = DefaultName
	}
	base.Cache.ByObject[&workv1alpha1.Work{}] = cache.ByObject{
		Label: labels.SelectorFromSet(labels.Set{placementv1alpha1.HubManagerLabel: manager}),
	}
	return base
}

// Setup registers the cache indexes the hub controllers share, then adds the
// scheduler, the revision maker, the work generator, the cluster health and cleanup controllers and the
// status aggregator to mgr.
func Setup(mgr ctrl.Manager, opts Options) error {
	opts, scope, err := prepare(mgr, opts)
	if err != nil {
		return err
	}
	if err := (&scheduler.Reconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder(scheduler.Name),
		Scope:    scope,
		Workers:  opts.Workers,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the scheduler: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("creating the discovery client: %w", err)
	}
	interpretations := &interpretationcache.Cache{}
	if err := (&placementrevision.Reconciler{
		Client:    mgr.GetClient(),
		Discovery: disc,
		Cache:     mgr.GetCache(),
		Mapper:    mgr.GetRESTMapper(),
		Recorder:  mgr.GetEventRecorder(placementrevision.Name),
		Workers:   opts.Workers,
		Scope:     scope,
		// The work generator's, the status aggregator's and the
		// interpretation controllers': compiled once per generation.
		Interpretations: interpretations,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the revision maker: %w", err)
	}
	if err := (&workgenerator.Reconciler{
		Client:          mgr.GetClient(),
		APIReader:       mgr.GetAPIReader(),
		Recorder:        mgr.GetEventRecorder(workgenerator.Name),
		Workers:         opts.Workers,
		Scope:           scope,
		Interpretations: interpretations,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the work generator: %w", err)
	}
	if err := (&clusterhealth.Reconciler{
		Client: mgr.GetClient(), GracePeriod: opts.LeaseGracePeriod, Workers: opts.Workers, ClusterSetNamespaces: opts.ClusterSetNamespaces,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the cluster health controller: %w", err)
	}
	if err := setupHubWide(mgr, opts); err != nil {
		return err
	}
	if err := (&clustercleanup.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder(clustercleanup.Name), GracePeriod: opts.CleanupGracePeriod,
		ClusterSetNamespaces: opts.ClusterSetNamespaces,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the cluster cleanup controller: %w", err)
	}
	return setupStatus(mgr, opts, scope, interpretations)
}

// prepare fills in opts' defaults, marks the manager's cluster sets, adds the
// cache's indexes and the hub's metrics, and returns what the manager takes.
func prepare(mgr ctrl.Manager, opts Options) (Options, lookup.Scope, error) {
	if len(opts.ClusterSetNamespaces) == 0 {
		opts.ClusterSetNamespaces = []string{scheduler.DefaultClusterSetNamespace}
	}
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.Name == "" {
		opts.Name = DefaultName
	}
	scope := lookup.Scope{Sets: opts.ClusterSetNamespaces, SetsOnly: opts.SetsOnly, Manager: opts.Name}
	if err := markClusterSets(mgr, opts); err != nil {
		return opts, scope, err
	}
	if err := lookup.AddIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return opts, scope, err
	}
	if err := lookup.AddServiceIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return opts, scope, err
	}
	metrics.RegisterHub(mgr.GetClient())
	return opts, scope, nil
}

// setupStatus adds the controllers that report to tenants and serve them: the
// bindings' status, the status aggregator and the settled conditions, member
// access, the Service imports, and the interpretations' conditions.
func setupStatus(mgr ctrl.Manager, opts Options, scope lookup.Scope, interpretations *interpretationcache.Cache) error {
	if err := (&clustersetbinding.Reconciler{Client: mgr.GetClient(), Scope: scope}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the cluster-set binding controller: %w", err)
	}
	if err := (&placementstatus.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(placementstatus.Name), Workers: opts.Workers, Scope: scope,
		Interpretations: interpretations}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the status aggregator: %w", err)
	}
	if err := (&interpretation.PlacementReconciler{Client: mgr.GetClient(), Interpretations: interpretations, Workers: opts.Workers, Scope: scope}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the interpreted controller: %w", err)
	}
	if err := (&fleetquota.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(fleetquota.Name), Interpretations: interpretations, Scope: scope}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the fleet quota controller: %w", err)
	}
	if !scope.SetsOnly {
		// Cluster-scoped: the hub-wide manager reports on them.
		if err := (&interpretation.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(interpretation.Name), Interpretations: interpretations}).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the interpretation controller: %w", err)
		}
	}
	if err := (&settled.Reconciler{Client: mgr.GetClient(), Workers: opts.Workers, Scope: scope}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the settled controller: %w", err)
	}
	if err := (&memberaccess.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scope: scope}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the member access controller: %w", err)
	}
	if err := (&consumeraccess.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scope: scope}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the consumer access controller: %w", err)
	}
	ca, err := caOf(mgr.GetConfig())
	if err != nil {
		return err
	}
	if err := (&tunnelprovider.Reconciler{Client: mgr.GetClient(), Server: cmp.Or(opts.ConsumerServer, mgr.GetConfig().Host), CAData: ca}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the tunnel provider controller: %w", err)
	}
	if err := (&serviceimport.Reconciler{Client: mgr.GetClient(), Scope: scope, ExportableNamespaces: opts.ExportableNamespaces,
		Workers: opts.Workers}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the service import controller: %w", err)
	}
	return nil
}

// setupHubWide adds what only the hub-wide manager runs: the heartbeat pacer
// (the agents' Lease writes are the whole hub's budget), the ClusterPlacement
// controller, and the ReplicaSets of reflected Deployments (whichever manager
// reflects them).
func setupHubWide(mgr ctrl.Manager, opts Options) error {
	if opts.SetsOnly {
		return nil
	}
	if err := mgr.Add(&clusterhealth.Pacer{Client: mgr.GetClient(), Informers: mgr.GetCache(), WriteBudget: opts.HeartbeatWriteBudget, MaxInterval: opts.MaxHeartbeatInterval}); err != nil {
		return fmt.Errorf("setting up the heartbeat pacer: %w", err)
	}
	if err := (&clusterplacement.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the cluster placement controller: %w", err)
	}
	if err := (&fleetview.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader()}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the fleet view controller: %w", err)
	}
	return nil
}

// markClusterSets marks the namespaces of the manager's cluster sets as its own
// before any controller runs, with a client that reads from the API server (the
// cache has not started), and fails when another manager has marked one; then
// labels the Works of their clusters written before Works carried their
// manager's name, which its cache would not show otherwise.
func markClusterSets(mgr ctrl.Manager, opts Options) error {
	c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return fmt.Errorf("creating a client to mark the cluster sets: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := lookup.MarkClusterSets(ctx, c, opts.Name, opts.ClusterSetNamespaces); err != nil {
		return err
	}
	return lookup.LabelWorks(ctx, c, opts.Name, opts.ClusterSetNamespaces)
}

// caOf is the CA cfg trusts the API server by.
func caOf(cfg *rest.Config) ([]byte, error) {
	if len(cfg.CAData) > 0 || cfg.CAFile == "" {
		return cfg.CAData, nil
	}
	ca, err := os.ReadFile(cfg.CAFile)
	if err != nil {
		return nil, fmt.Errorf("reading the hub's CA for the lodestar-tunnel access provider: %w", err)
	}
	return ca, nil
}
