package nodereport

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/multicluster-runtime/pkg/clusters"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
)

// Provider is a multicluster-runtime provider of the members of one cluster
// set: a cluster for each ClusterProfile of the set, reached through the
// access provider the consumer's provider file configures (lodestar-tunnel:
// the hub's API server, through the member's agent). A profile deleted, or one
// whose provider changes, is removed (and engaged again).
//
// It plays the part of multicluster-runtime's cluster-inventory-api provider
// (sigs.k8s.io/multicluster-runtime/providers/cluster-inventory-api), a module
// of its own that the Go module proxy here does not serve.
type Provider struct {
	// ClusterSet is the hub namespace of the set's ClusterProfiles.
	ClusterSet string
	// Access builds a member's rest.Config from its ClusterProfile.
	Access *access.Config
	// Scheme of the members' clusters (client-go's when nil).
	Scheme *runtime.Scheme

	clusters clusters.Clusters[cluster.Cluster]
	hub      client.Reader
	mu       sync.Mutex
	aware    multicluster.Aware
	ctx      context.Context
}

var (
	_ multicluster.Provider         = &Provider{}
	_ multicluster.ProviderRunnable = &Provider{}
)

// NewProvider is the provider of the members of clusterSet, reached as
// providers configures.
func NewProvider(clusterSet string, providers *access.Config) *Provider {
	p := &Provider{ClusterSet: clusterSet, Access: providers, clusters: clusters.New[cluster.Cluster]()}
	// Two configs of one member are the same when they reach the same server
	// with the same CA (a rest.Config holds functions, which no comparison
	// finds equal).
	p.clusters.EqualClusters = func(a, b cluster.Cluster) bool { return sameMember(a.GetConfig(), b.GetConfig()) }
	return p
}

func sameMember(a, b *rest.Config) bool {
	return a.Host == b.Host && bytes.Equal(a.CAData, b.CAData)
}

// Get returns the engaged cluster of that name.
func (p *Provider) Get(ctx context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	return p.clusters.Get(ctx, name)
}

// IndexField indexes a field on every cluster, engaged now or later.
func (p *Provider) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	return p.clusters.IndexField(ctx, obj, field, extract)
}

// Start records what clusters are engaged with until ctx ends; the
// ClusterProfiles reach it through SetupWithManager's controller.
func (p *Provider) Start(ctx context.Context, aware multicluster.Aware) error {
	p.mu.Lock()
	p.aware, p.ctx = aware, ctx
	p.mu.Unlock()
	<-ctx.Done()
	return nil
}

// SetupWithManager watches the set's ClusterProfiles with the host (hub) manager.
func (p *Provider) SetupWithManager(mgr ctrl.Manager) error {
	p.hub = mgr.GetClient()
	return ctrl.NewControllerManagedBy(mgr).
		Named("clusterprofiles").
		// A member whose agent is away takes a while to fail; others go on.
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		For(&cpv1alpha1.ClusterProfile{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == p.ClusterSet
		}))).
		Complete(p)
}

// Reconcile engages the member of a ClusterProfile, or removes it.
func (p *Provider) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p.mu.Lock()
	aware, runCtx := p.aware, p.ctx
	p.mu.Unlock()
	if aware == nil {
		return ctrl.Result{RequeueAfter: time.Second}, nil // The manager is not started yet.
	}
	name := multicluster.ClusterName(req.Name)
	profile := &cpv1alpha1.ClusterProfile{}
	if err := p.hub.Get(ctx, req.NamespacedName, profile); err != nil {
		if apierrors.IsNotFound(err) {
			p.clusters.Remove(name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !profile.DeletionTimestamp.IsZero() {
		p.clusters.Remove(name)
		return ctrl.Result{}, nil
	}
	cfg, err := p.Access.BuildConfigFromCP(profile)
	if err != nil {
		// No provider of ours in the profile (yet): nothing to engage.
		p.clusters.Remove(name)
		ctrl.LoggerFrom(ctx).Info("Member not reachable", "cluster", req.Name, "reason", err.Error())
		return ctrl.Result{}, nil
	}
	if existing, err := p.clusters.Get(ctx, name); err == nil && sameMember(existing.GetConfig(), cfg) {
		return ctrl.Result{}, nil
	}
	cl, err := cluster.New(cfg, func(o *cluster.Options) {
		if p.Scheme != nil {
			o.Scheme = p.Scheme
		}
	})
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("member %s: %w", req.Name, err)
	}
	if err := p.clusters.AddOrReplace(runCtx, name, cl, aware); err != nil {
		return ctrl.Result{}, fmt.Errorf("engaging member %s: %w", req.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Engaged member", "cluster", req.Name, "server", cfg.Host)
	return ctrl.Result{}, nil
}
