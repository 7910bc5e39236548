package workgenerator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/celbound"
	"github.com/lodestar-dev/lodestar/internal/division"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/metrics"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/overrides"
	"github.com/lodestar-dev/lodestar/internal/render"
	"github.com/lodestar-dev/lodestar/internal/scheduling"
)

// content is what a cluster's Works carry: manifests and the revision (hash)
// they are of.
type content struct {
	manifests []runtime.RawExtension
	hash      string
	// overrides render the manifests per cluster; none once rendered.
	overrides []placementv1alpha1.Override
	// division divides the workloads' replicas per cluster; shares are a
	// cluster's, once divided (placementv1alpha1.SharesAnnotation).
	division *placementv1alpha1.ReplicaDivision
	shares   string
}

// renderer renders revisions for the clusters of one reconcile: each revision
// once per set of rules that apply with the same values, however many clusters
// share them.
type renderer struct {
	key      client.ObjectKey
	compiled *compiledSets
	views    map[string]scheduling.Cluster
	// revisions are the revisions' contents read so far, by hash.
	revisions map[string]content
	memo      map[string]rendered
	// divider divides the revisions' replicas (set by the gate); divided keeps
	// the divided manifests written.
	divider *divider
	divided map[string]runtime.RawExtension
	// overridden are the replicas overrides set of divided workloads, by
	// cluster and workload.
	overridden map[string]map[string]int64
}

type rendered struct {
	c   content
	err error
	// overridden are the divided workloads the overrides set the replicas of.
	overridden map[string]int64
}

// newRenderer renders the Placement's revisions for the clusters of profiles (by
// name).
func (r *Reconciler) newRenderer(placement *placementv1alpha1.Placement, profiles map[string]*cpv1alpha1.ClusterProfile) *renderer {
	rd := &renderer{key: client.ObjectKeyFromObject(placement), compiled: &r.compiled,
		views: map[string]scheduling.Cluster{}, revisions: map[string]content{}, memo: map[string]rendered{},
		divided: map[string]runtime.RawExtension{}, overridden: map[string]map[string]int64{}}
	for name, p := range profiles {
		rd.views[name] = scheduling.ClusterOf(p)
	}
	return rd
}

// revision is what a PlacementRevision carries, read once per reconcile.
func (rd *renderer) revision(rev *placementv1alpha1.PlacementRevision) (content, error) {
	if c, ok := rd.revisions[rev.Spec.Hash]; ok {
		return c, nil
	}
	manifests, err := render.RevisionManifests(&rev.Spec)
	if err != nil {
		return content{}, err
	}
	c := content{manifests: manifests, hash: rev.Spec.Hash, overrides: rev.Spec.Overrides, division: rev.Spec.Division}
	rd.revisions[rev.Spec.Hash] = c
	return c, nil
}

// content is what a cluster's Works hold at revision c: its share of the
// divided workloads, then its overrides (c itself with neither). An override
// that fails on the cluster is an *overrides.Error.
func (rd *renderer) content(c content, cluster string) (content, error) {
	if c.division != nil && rd.divider != nil {
		var err error
		if c, err = rd.divider.divide(c, cluster, rd.divided); err != nil {
			return content{}, err
		}
	}
	if len(c.overrides) == 0 {
		return content{manifests: c.manifests, hash: c.hash, shares: c.shares}, nil
	}
	view, ok := rd.views[cluster]
	if !ok {
		view = scheduling.Cluster{Name: cluster}
	}
	bound, err := rd.compiled.bind(rd.key, c, view)
	if err != nil {
		return content{}, err
	}
	if bound.Key() == "" {
		return content{manifests: c.manifests, hash: c.hash, shares: c.shares}, nil
	}
	key := c.hash + "/" + bound.Key() + "/" + c.shares
	if m, ok := rd.memo[key]; ok {
		if len(m.overridden) > 0 {
			rd.overridden[cluster] = m.overridden
		}
		return m.c, m.err
	}
	if err := rd.compiled.failed(rd.key, c, bound.Key()); err != nil {
		return content{}, err
	}
	res, err := render.Override(bound, c.manifests)
	out := content{manifests: res.Manifests, hash: c.hash, shares: c.shares}
	var changed map[string]int64
	if shares, ok := division.ParseShares(c.shares); ok && err == nil {
		if changed = overridden(res.Manifests, &shares); len(changed) > 0 {
			out.shares = shares.Encode()
			rd.overridden[cluster] = changed
		}
	}
	rd.memo[key] = rendered{c: out, err: err, overridden: changed}
	rd.compiled.fail(rd.key, c, bound.Key(), err)
	return out, err
}

// compiledSets keeps the compiled overrides of each Placement's revisions, so
// that a revision's rules compile once, and what they evaluate to on each cluster
// view, so that tenant-supplied expressions run once per revision and view (not
// on every reconcile).
type compiledSets struct {
	mu   sync.Mutex
	sets map[client.ObjectKey]map[string]*compiledSet
}

type compiledSet struct {
	set *overrides.Set
	// bound are the rules bound to each cluster view, and their errors.
	bound map[string]boundOrError
	bytes int
	// failures are the rendering errors of bound rules, by their key: a rule
	// that fails (an object grown past the limit, say) fails alike on every
	// reconcile, and is not run again.
	failures map[string]error
}

type boundOrError struct {
	b   *overrides.Bound
	err error
}

// maxBoundBytes bounds what one revision keeps of its rules' values; past it, a
// view's values are evaluated again on each reconcile.
const maxBoundBytes = 4 << 20

// get returns the compiled overrides of revision c, compiling them once; the
// caller holds cs.mu.
func (cs *compiledSets) get(key client.ObjectKey, c content) (*compiledSet, error) {
	if cset, ok := cs.sets[key][c.hash]; ok {
		return cset, nil
	}
	set, err := overrides.Compile(c.overrides)
	if err != nil {
		return nil, &overrides.Error{Rule: "(compile)", Action: "revision " + c.hash, Err: err}
	}
	if cs.sets == nil {
		cs.sets = map[client.ObjectKey]map[string]*compiledSet{}
	}
	if cs.sets[key] == nil {
		cs.sets[key] = map[string]*compiledSet{}
	}
	cset := &compiledSet{set: set, bound: map[string]boundOrError{}, failures: map[string]error{}}
	cs.sets[key][c.hash] = cset
	return cset, nil
}

// bind returns revision c's rules bound to the cluster view, evaluating them
// once per view. The tenant's expressions run outside the lock, so that one
// Placement's evaluation does not hold up the others' reconciles.
func (cs *compiledSets) bind(key client.ObjectKey, c content, view scheduling.Cluster) (*overrides.Bound, error) {
	vk := scheduling.ViewKey(view)
	cs.mu.Lock()
	cset, err := cs.get(key, c)
	var kept boundOrError
	var found bool
	if err == nil {
		kept, found = cset.bound[vk]
	}
	cs.mu.Unlock()
	switch {
	case err != nil:
		return nil, err
	case found:
		return kept.b, kept.err
	}
	b, err := cset.set.Bind(view)
	metrics.OverrideEvaluations.Inc()
	if errors.Is(err, celbound.ErrDeadline) {
		return nil, err
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if size := len(vk) + b.Size(); cset.bytes+size <= maxBoundBytes {
		cset.bound[vk] = boundOrError{b: b, err: err}
		cset.bytes += size
	}
	return b, err
}

// failed is the error rendering revision c with the bound rules of boundKey
// gave before, or nil.
func (cs *compiledSets) failed(key client.ObjectKey, c content, boundKey string) error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cset, ok := cs.sets[key][c.hash]; ok {
		return cset.failures[boundKey]
	}
	return nil
}

// fail records that rendering revision c with the bound rules of boundKey gave
// err, when it is an override's failure (bounded in number like the views).
func (cs *compiledSets) fail(key client.ObjectKey, c content, boundKey string, err error) {
	var oe *overrides.Error
	if !errors.As(err, &oe) {
		return
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cset, ok := cs.sets[key][c.hash]; ok && len(cset.failures) < 1024 {
		cset.failures[boundKey] = err
	}
}

// keep forgets the compiled overrides of the Placement's revisions other than
// those of hashes (pruned since).
func (cs *compiledSets) keep(key client.ObjectKey, hashes []string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	maps.DeleteFunc(cs.sets[key], func(h string, _ *compiledSet) bool { return !slices.Contains(hashes, h) })
}

// forget drops what is kept of a Placement.
func (cs *compiledSets) forget(key client.ObjectKey) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	delete(cs.sets, key)
}

// overrideFailure says why an override fails on a cluster, or "" for another error.
func overrideFailure(err error) string {
	var e *overrides.Error
	if errors.As(err, &e) {
		return e.Error()
	}
	return ""
}

// overrideFailures summarises the clusters overrides fail on, for the
// WorkSynchronized condition.
func overrideFailures(failed map[string]string, selected int) string {
	names := slices.Sorted(maps.Keys(failed))
	parts := make([]string, 0, 3)
	for _, n := range names[:min(3, len(names))] {
		parts = append(parts, n+": "+failed[n])
	}
	return fmt.Sprintf("overrides fail on %d of %d clusters, whose Works keep their last good content: %s",
		len(failed), selected, message.List(parts, 3, ", "))
}

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
