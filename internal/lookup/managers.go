// Which hub manager release takes what, on a hub that runs several
// (docs/scale.md). Each marks the namespaces of the cluster sets it manages
// with placementv1alpha1.HubManagerLabel. A namespace's Placements, Service
// exports and the like belong to the manager of the first of its bound cluster
// sets (sorted) that a manager has marked; a namespace that binds none of
// those, and the ClusterPlacements, belong to the hub-wide manager (the one
// release that is not SetsOnly). Every manager reads the same marks, so each
// namespace has one manager.

package lookup

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// Scope is what one hub manager takes.
type Scope struct {
	// Sets are the cluster sets it manages (and has marked).
	Sets []string
	// SetsOnly: it takes only what belongs to its sets, leaving namespaces that
	// bind no marked set, the ClusterPlacements and cluster sets nobody manages
	// to the hub-wide manager.
	SetsOnly bool
	// Manager is its name (placementv1alpha1.DefaultHubManager when empty),
	// which labels its Works.
	Manager string
}

// ManagerName is the manager's name, defaulted.
func (s Scope) ManagerName() string {
	if s.Manager == "" {
		return placementv1alpha1.DefaultHubManager
	}
	return s.Manager
}

// Only shards a reconciler whose requests are namespaced objects: it runs r
// for the namespaces this manager takes (Owns) and ends the others' requests
// at once, another manager's. Every such hub reconciler is wrapped once, where
// it is set up, so that no Reconcile repeats the guard.
func (s Scope) Only(c client.Reader, r reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		if owns, err := s.Owns(ctx, c, req.Namespace); !owns || err != nil {
			return reconcile.Result{}, err
		}
		return r.Reconcile(ctx, req)
	})
}

// OnlySets shards a reconciler of objects that name a cluster set (setOf):
// it runs r for those of the sets this manager answers for (OwnsSet), and for
// an object gone (r says what its end means).
func OnlySets[T client.Object](s Scope, c client.Reader, r reconcile.Reconciler, newObj func() T, setOf func(T) string) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		obj := newObj()
		if err := c.Get(ctx, req.NamespacedName, obj); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, err
		} else if err == nil {
			if answers, err := s.OwnsSet(ctx, c, setOf(obj)); !answers || err != nil {
				return reconcile.Result{}, err
			}
		}
		return r.Reconcile(ctx, req)
	})
}

// DecidingSet returns the cluster set that decides which manager takes
// namespace's Placements: the first of its bound sets (sorted) that is one of
// s.Sets or marked by another manager; "" when there is none (the hub-wide
// manager's).
func (s Scope) DecidingSet(ctx context.Context, c client.Reader, namespace string) (string, error) {
	if namespace == placementv1alpha1.ClusterPlacementNamespace {
		return "", nil
	}
	bound, err := boundSets(ctx, c, namespace)
	if err != nil {
		return "", err
	}
	for _, set := range bound {
		if slices.Contains(s.Sets, set) {
			return set, nil
		}
		manager, err := managerOf(ctx, c, set)
		if err != nil {
			return "", err
		}
		if manager != "" {
			return set, nil
		}
	}
	return "", nil
}

// Owns tells whether this manager takes namespace's Placements (and what else
// the namespace holds: its Service exports, its bindings' tenant mark).
func (s Scope) Owns(ctx context.Context, c client.Reader, namespace string) (bool, error) {
	set, err := s.DecidingSet(ctx, c, namespace)
	if err != nil {
		return false, err
	}
	if set == "" {
		return !s.SetsOnly, nil
	}
	return slices.Contains(s.Sets, set), nil
}

// OwnsSet tells whether this manager answers for cluster set: one of its own,
// or, for the hub-wide manager, a set no manager has marked (whose bindings
// and grants it reports as not managed).
func (s Scope) OwnsSet(ctx context.Context, c client.Reader, set string) (bool, error) {
	if slices.Contains(s.Sets, set) {
		return true, nil
	}
	if s.SetsOnly {
		return false, nil
	}
	manager, err := managerOf(ctx, c, set)
	return manager == "", err
}

// UsableSets are the cluster sets namespace binds that a hub manager manages
// (marked their namespaces), and the default set: those its Placements may be
// scheduled on, whichever sets they are. A reader who may not read namespaces
// (a tenant's render) gets every bound set.
func UsableSets(ctx context.Context, c client.Reader, namespace string) ([]string, error) {
	if namespace == placementv1alpha1.ClusterPlacementNamespace {
		return managedSets(ctx, c)
	}
	bound, err := boundSets(ctx, c, namespace)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, set := range bound {
		if set == placementv1alpha1.DefaultClusterSet {
			out = append(out, set)
			continue
		}
		manager, err := managerOf(ctx, c, set)
		if apierrors.IsForbidden(err) {
			return bound, nil
		}
		if err != nil {
			return nil, err
		}
		if manager != "" {
			out = append(out, set)
		}
	}
	return out, nil
}

// managedSets are the cluster sets some hub manager marked, and the default
// set.
func managedSets(ctx context.Context, c client.Reader) ([]string, error) {
	list := &corev1.NamespaceList{}
	if err := c.List(ctx, list, client.HasLabels{placementv1alpha1.HubManagerLabel}); err != nil {
		return nil, fmt.Errorf("listing the cluster sets' namespaces: %w", err)
	}
	out := []string{placementv1alpha1.DefaultClusterSet}
	for i := range list.Items {
		out = append(out, list.Items[i].Name)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// managerOf returns the hub manager that marked cluster set's namespace, ""
// when none did or there is no such namespace.
func managerOf(ctx context.Context, c client.Reader, set string) (string, error) {
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: set}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("reading the namespace of cluster set %s: %w", set, err)
	}
	return ns.Labels[placementv1alpha1.HubManagerLabel], nil
}

// MarkClusterSets marks the namespaces of sets as manager's, creating those
// that do not exist. It fails, changing nothing, when another manager marked one
// of them: two managers must not take the same cluster set. c should read from
// the API server (it runs before the manager's cache starts). The replicas of
// one manager start together: a write that loses to another's is tried again
// from a fresh read.
func MarkClusterSets(ctx context.Context, c client.Client, manager string, sets []string) error {
	return retry.OnError(retry.DefaultRetry, func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
	}, func() error { return markClusterSets(ctx, c, manager, sets) })
}

func markClusterSets(ctx context.Context, c client.Client, manager string, sets []string) error {
	namespaces := make([]*corev1.Namespace, 0, len(sets))
	for _, set := range sets {
		ns := &corev1.Namespace{}
		err := c.Get(ctx, client.ObjectKey{Name: set}, ns)
		switch {
		case apierrors.IsNotFound(err):
			ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: set}}
		case err != nil:
			return fmt.Errorf("reading the namespace of cluster set %s: %w", set, err)
		}
		if other := ns.Labels[placementv1alpha1.HubManagerLabel]; other != "" && other != manager {
			return fmt.Errorf("cluster set %s is managed by hub manager %q (label %s on namespace %s); "+
				"remove it from this manager's cluster sets, or remove the label if %q is gone for good",
				set, other, placementv1alpha1.HubManagerLabel, set, other)
		}
		namespaces = append(namespaces, ns)
	}
	for _, ns := range namespaces {
		if ns.Labels[placementv1alpha1.HubManagerLabel] == manager {
			continue
		}
		if ns.ResourceVersion == "" {
			ns.Labels = map[string]string{placementv1alpha1.HubManagerLabel: manager}
			if err := c.Create(ctx, ns); err != nil {
				return fmt.Errorf("creating the namespace of cluster set %s: %w", ns.Name, err)
			}
			continue
		}
		base := ns.DeepCopy()
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[placementv1alpha1.HubManagerLabel] = manager
		// The resourceVersion makes the patch fail if another manager marked it since.
		if err := c.Patch(ctx, ns, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("marking the namespace of cluster set %s: %w", ns.Name, err)
		}
	}
	return nil
}

// LabelWorks labels with manager's name the Works that carry no manager's
// label (written before Works were labelled) in the namespaces of the clusters
// of sets: each manager caches only the Works labelled with its name, so it
// labels its own before its cache starts. c should read from the API server.
func LabelWorks(ctx context.Context, c client.Client, manager string, sets []string) error {
	mine := map[string]bool{}
	for _, set := range sets {
		profiles := &cpv1alpha1.ClusterProfileList{}
		if err := c.List(ctx, profiles, client.InNamespace(set)); err != nil {
			return fmt.Errorf("listing the ClusterProfiles of cluster set %s: %w", set, err)
		}
		for i := range profiles.Items {
			mine[names.ClusterNamespace(profiles.Items[i].Name)] = true
		}
	}
	unlabelled, err := labels.Parse("!" + placementv1alpha1.HubManagerLabel + "," + placementv1alpha1.PlacementNameLabel)
	if err != nil {
		return err
	}
	works := &metav1.PartialObjectMetadataList{}
	works.SetGroupVersionKind(workv1alpha1.SchemeGroupVersion.WithKind("WorkList"))
	// From the API server's watch cache (resourceVersion 0): this runs at
	// every start, and once the Works are labelled it finds none; a quorum read
	// would read every Work from etcd each time. A Work the cache is behind on
	// is adopted when the work generator writes it.
	if err := c.List(ctx, works, client.MatchingLabelsSelector{Selector: unlabelled}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}}); err != nil {
		return fmt.Errorf("listing the Works without a hub manager's label: %w", err)
	}
	body := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, placementv1alpha1.HubManagerLabel, manager)
	for i := range works.Items {
		w := &works.Items[i]
		if !mine[w.Namespace] {
			continue
		}
		if err := c.Patch(ctx, w, client.RawPatch(types.MergePatchType, body)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("labelling Work %s/%s with its hub manager: %w", w.Namespace, w.Name, err)
		}
	}
	return nil
}
