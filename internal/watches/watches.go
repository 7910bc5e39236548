// Package watches starts and stops watches of kinds chosen at run time (the kinds
// Placements select on the hub, the kinds Works place on a member), and reads from
// discovery which kinds an API server serves.
package watches

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// pruneDelay gathers several failures (a CRD and its kinds removed together)
// into one look at discovery.
const pruneDelay = time.Second

// Set tracks the kinds a controller watches on demand (the kinds
// Placements select on the hub, the kinds Works place on a member), and stops
// the watch of a kind the API server no longer serves, its CRD deleted, so that
// an informer does not list and fail for as long as the process runs. A kind
// used again is watched anew.
type Set struct {
	// Cache holds the informers.
	Cache interface {
		RemoveInformer(ctx context.Context, obj client.Object) error
	}
	// Discovery says which kinds are served.
	Discovery discovery.DiscoveryInterface
	// Object is the object an informer of gvk was made for (unstructured,
	// metadata only).
	Object func(gvk schema.GroupVersionKind) client.Object
	// OnStop, when set, is told of each watch stopped.
	OnStop func(gvk schema.GroupVersionKind)

	kinds   sync.Map
	once    sync.Once
	changed chan struct{}
}

// Add records gvk as watched; false when it was already.
func (w *Set) Add(gvk schema.GroupVersionKind) bool {
	_, loaded := w.kinds.LoadOrStore(gvk, struct{}{})
	return !loaded
}

// Forget drops gvk, whose watch could not be started.
func (w *Set) Forget(gvk schema.GroupVersionKind) { w.kinds.Delete(gvk) }

// Check asks for the watched kinds to be checked against discovery soon: a
// watch failed, or a CRD went.
func (w *Set) Check() {
	select {
	case w.signal() <- struct{}{}:
	default:
	}
}

func (w *Set) signal() chan struct{} {
	w.once.Do(func() { w.changed = make(chan struct{}, 1) })
	return w.changed
}

// ErrorHandler is a cache's watch error handler: it logs as client-go's does
// and, when a watch fails because its kind is not served, calls Check.
func (w *Set) ErrorHandler(ctx context.Context, refl *toolscache.Reflector, err error) {
	toolscache.DefaultWatchErrorHandler(ctx, refl, err)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		w.Check()
	}
}

// Start checks after each Check until ctx ends.
func (w *Set) Start(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.signal():
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pruneDelay):
		}
		w.prune(ctx)
	}
}

// NeedLeaderElection is false: a follower's cache has informers too.
func (w *Set) NeedLeaderElection() bool { return false }

// prune stops the watch of every watched kind discovery no longer lists.
func (w *Set) prune(ctx context.Context) {
	log := ctrl.LoggerFrom(ctx).WithName("watches")
	w.kinds.Range(func(key, _ any) bool {
		gvk := key.(schema.GroupVersionKind)
		served, err := ServesKind(w.Discovery, gvk)
		if err != nil {
			log.Error(err, "Checking whether a watched kind is still served", "kind", gvk)
			return true
		}
		if served {
			return true
		}
		if err := w.Cache.RemoveInformer(ctx, w.Object(gvk)); err != nil {
			log.Error(err, "Stopping the watch of a kind no longer served", "kind", gvk)
			return true
		}
		w.kinds.Delete(gvk)
		if w.OnStop != nil {
			w.OnStop(gvk)
		}
		log.Info("Stopped watching a kind no longer served", "kind", gvk)
		return true
	})
}

// ServesKind tells whether discovery lists the kind.
func ServesKind(d discovery.DiscoveryInterface, gvk schema.GroupVersionKind) (bool, error) {
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
