package workgenerator

import (
	"context"
	"maps"
	"slices"
	"sync"

	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/scheduling"
)

// clusterProfiles returns the ClusterProfiles of the clusters in the sets, by name.
func clusterProfiles(ctx context.Context, c client.Reader, clusters []string, sets []string) (map[string]*cpv1alpha1.ClusterProfile, error) {
	out := map[string]*cpv1alpha1.ClusterProfile{}
	for _, name := range clusters {
		profiles, err := lookup.ClusterProfilesNamed(ctx, c, name)
		if err != nil {
			return nil, err
		}
		for i := range profiles {
			if p := &profiles[i]; lookup.Managed(p) && slices.Contains(sets, p.Namespace) {
				out[name] = p
				break
			}
		}
	}
	return out, nil
}

// clusterIndex remembers, per cluster, Placements that a change of the cluster
// concerns: those whose overrides fail on it (a change may fix them, even where
// the cluster has no Work of theirs), and those whose copy there is held by its
// claims (a drain with --include-stateful lets it go).
type clusterIndex struct {
	mu          sync.Mutex
	byCluster   map[string]map[client.ObjectKey]bool
	byPlacement map[client.ObjectKey][]string
}

// set records the clusters the index holds for the Placement now.
func (f *clusterIndex) set(key client.ObjectKey, clusters []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byCluster == nil {
		f.byCluster, f.byPlacement = map[string]map[client.ObjectKey]bool{}, map[client.ObjectKey][]string{}
	}
	for _, c := range f.byPlacement[key] {
		delete(f.byCluster[c], key)
		if len(f.byCluster[c]) == 0 {
			delete(f.byCluster, c)
		}
	}
	delete(f.byPlacement, key)
	if len(clusters) == 0 {
		return
	}
	f.byPlacement[key] = clusters
	for _, c := range clusters {
		if f.byCluster[c] == nil {
			f.byCluster[c] = map[client.ObjectKey]bool{}
		}
		f.byCluster[c][key] = true
	}
}

func (f *clusterIndex) placements(cluster string) []client.ObjectKey {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Collect(maps.Keys(f.byCluster[cluster]))
}

// placementsOverriding maps a change of a ClusterProfile to the Placements with
// overrides, or that divide replicas (by labels or free capacity), that have a
// Work on the cluster, or whose overrides fail on it.
func (r *Reconciler) placementsOverriding(workPlacement handler.MapFunc) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		keys := map[client.ObjectKey]bool{}
		for _, k := range r.failing.placements(obj.GetName()) {
			keys[k] = true
		}
		works := &workv1alpha1.WorkList{}
		if err := r.Client.List(ctx, works, client.InNamespace(names.ClusterNamespace(obj.GetName())), client.UnsafeDisableDeepCopy); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing the Works of a changed cluster", "cluster", obj.GetName())
			return nil
		}
		for i := range works.Items {
			for _, req := range workPlacement(ctx, &works.Items[i]) {
				p := &placementv1alpha1.Placement{}
				if err := r.Client.Get(ctx, req.NamespacedName, p); err == nil && (len(p.Spec.Overrides) > 0 || p.Spec.Scheduling.Replicas != nil) {
					keys[req.NamespacedName] = true
				}
			}
		}
		reqs := make([]reconcile.Request, 0, len(keys))
		for k := range keys {
			reqs = append(reqs, reconcile.Request{NamespacedName: k})
		}
		return reqs
	}
}

// placementsHeld maps a change of a ClusterProfile's taints (a drain with
// --include-stateful) to the Placements whose copy there is held by its claims.
func (r *Reconciler) placementsHeld(_ context.Context, obj client.Object) []reconcile.Request {
	keys := r.held.placements(obj.GetName())
	reqs := make([]reconcile.Request, 0, len(keys))
	for _, k := range keys {
		reqs = append(reqs, reconcile.Request{NamespacedName: k})
	}
	return reqs
}

// taintsChanged tells whether a ClusterProfile's taints changed.
func taintsChanged(old, now *cpv1alpha1.ClusterProfile) bool {
	return old.Annotations[placementv1alpha1.TaintsAnnotation] != now.Annotations[placementv1alpha1.TaintsAnnotation]
}

// viewChanged tells whether a ClusterProfile changed in what overrides can see:
// labels, properties, version and condition statuses (not heartbeats).
func viewChanged(old, now *cpv1alpha1.ClusterProfile) bool {
	va, vb := scheduling.ClusterOf(old), scheduling.ClusterOf(now)
	return !maps.Equal(va.Labels, vb.Labels) || !maps.Equal(va.Properties, vb.Properties) ||
		va.Version != vb.Version || !maps.Equal(va.Conditions, vb.Conditions)
}
