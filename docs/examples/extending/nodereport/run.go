// Package nodereport is a small controller built on multicluster-runtime
// that platform teams can copy: run on the hub as a ServiceAccount that a
// ConsumerAccessGrant names, it engages every member of a cluster set through
// the lodestar-tunnel access provider (the member needs no route from the
// hub, only its agent's outbound tunnel) and keeps on each member a ConfigMap
// listing its nodes. Replicas share the members: multicluster-runtime's
// sharded coordinator gives each member to one replica (Leases on the hub),
// and another takes it when that replica stops. See ../README.md.
package nodereport

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/manager/coordinator/sharded"
	"sigs.k8s.io/multicluster-runtime/pkg/manager/coordinator/sharded/peers"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
)

// Options configure a replica.
type Options struct {
	// Hub is the replica's connection to the hub, as its ServiceAccount.
	Hub *rest.Config
	// ClusterSet is the set whose members it reports on.
	ClusterSet string
	// Access is the consumer's access provider configuration (its
	// lodestar-tunnel provider runs lodestar-credentials).
	Access *access.Config
	// Replica is this replica's name (a pod's name); LeaseNamespace is the hub
	// namespace of the sharding Leases (the replica's own).
	Replica, LeaseNamespace string
	// LeaseDuration is how long a stopped replica's members wait for another
	// (default 15s); the peers' own Leases last 30s.
	LeaseDuration time.Duration
}

// Run runs a replica until ctx ends.
func Run(ctx context.Context, opts Options) error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := cpv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	lease := opts.LeaseDuration
	if lease == 0 {
		lease = 15 * time.Second
	}
	hub, err := client.New(opts.Hub, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	log := ctrl.Log.WithName("node-report").WithValues("replica", opts.Replica)
	provider := NewProvider(opts.ClusterSet, opts.Access)
	mgr, err := mcmanager.New(opts.Hub, provider, manager.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Replicas may share a process (tests): their controllers share names.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		// The replica reads only its set's ClusterProfiles on the hub.
		Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{opts.ClusterSet: {}}},
	}, mcmanager.WithCoordinator(sharded.New(hub, log.WithName("shards"),
		sharded.WithShardLease(opts.LeaseNamespace, "node-report"),
		sharded.WithPerClusterLease(true),
		sharded.WithLeaseTimings(lease, lease/3, time.Second),
		sharded.WithSynchronizationIntervals(time.Second, 5*time.Second),
		sharded.WithPeerRegistry(peers.NewLeaseRegistry(hub, opts.LeaseNamespace, "node-report-peer", opts.Replica, 1, log)),
	)))
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := provider.SetupWithManager(mgr.GetLocalManager()); err != nil {
		return err
	}
	if err := (&Reconciler{Replica: opts.Replica}).SetupWithManager(mgr); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
