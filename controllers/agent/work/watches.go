package work

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/lodestar-dev/lodestar/internal/metrics"
)

// pruneDelay gathers the failures of several watches (a CRD and its kinds
// removed together) into one look at discovery.
const pruneDelay = time.Second

// WatchErrorHandler is the member cache's watch error handler: it logs as
// client-go's does and, when a watch fails because the member no longer serves
// the kind (its CRD was deleted), has the watches checked against discovery.
func (r *Reconciler) WatchErrorHandler(ctx context.Context, refl *toolscache.Reflector, err error) {
	toolscache.DefaultWatchErrorHandler(ctx, refl, err)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		r.WatchFailed()
	}
}

// WatchFailed asks for the watches to be checked against the member's discovery.
func (r *Reconciler) WatchFailed() {
	select {
	case r.watchFailed <- struct{}{}:
	default:
	}
}

// WatchPruner stops the member watches of kinds the member no longer serves, so
// that an informer does not list and fail for as long as the agent runs after a
// CRD is deleted. A Work that places the kind again starts a new watch.
type WatchPruner struct {
	Reconciler *Reconciler
	// Discovery is the member's discovery client.
	Discovery discovery.DiscoveryInterface
}

// Start prunes after each signalled failure until ctx ends.
func (p *WatchPruner) Start(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-p.Reconciler.watchFailed:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pruneDelay):
		}
		p.prune(ctx)
	}
}

// NeedLeaderElection is false: the agent runs one replica per member.
func (p *WatchPruner) NeedLeaderElection() bool { return false }

// prune removes the watch of every watched kind that discovery says is gone.
func (p *WatchPruner) prune(ctx context.Context) {
	r := p.Reconciler
	log := ctrl.LoggerFrom(ctx).WithName("watches")
	r.watched.Range(func(key, _ any) bool {
		gvk := key.(schema.GroupVersionKind)
		served, err := servesKind(p.Discovery, gvk)
		if err != nil {
			log.Error(err, "Checking whether the member still serves a watched kind", "kind", gvk)
			return true
		}
		if served {
			return true
		}
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(gvk)
		if err := r.MemberCache.RemoveInformer(ctx, obj); err != nil {
			log.Error(err, "Stopping the watch of a kind the member no longer serves", "kind", gvk)
			return true
		}
		r.watched.Delete(gvk)
		metrics.WatchedKinds.WithLabelValues(gvk.Group, gvk.Kind).Dec()
		log.Info("Stopped watching a kind the member no longer serves", "kind", gvk)
		return true
	})
}

// servesKind tells whether the member's discovery lists the kind.
func servesKind(d discovery.DiscoveryInterface, gvk schema.GroupVersionKind) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(gvk.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, res := range list.APIResources {
		if res.Kind == gvk.Kind {
			return true, nil
		}
	}
	return false, nil
}
