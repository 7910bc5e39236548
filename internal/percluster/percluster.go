// Package percluster computes what one cluster's Works carry at a revision:
// the revision's manifests, the cluster's share of its divided workloads
// (surge first), then its overrides, as pure code over plain values. What is
// worth keeping across reconciles is passed in: the compiled overrides and
// their values per cluster view (Compiled) and the divisions made
// (division.Memo). The work generator orchestrates: it reads the Works and
// ClusterProfiles, calls Renderer.For per cluster, and writes the result.
package percluster

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/celbound"
	"github.com/lodestar-dev/lodestar/internal/claims"
	"github.com/lodestar-dev/lodestar/internal/clusterworks"
	"github.com/lodestar-dev/lodestar/internal/division"
	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/metrics"
	"github.com/lodestar-dev/lodestar/internal/overrides"
	"github.com/lodestar-dev/lodestar/internal/render"
	"github.com/lodestar-dev/lodestar/internal/scheduling"
	"github.com/lodestar-dev/lodestar/internal/sealed"
)

// Content is what a cluster's Works carry: Manifests and the revision (Hash)
// they are of.
type Content struct {
	Manifests []runtime.RawExtension
	Hash      string
	// Overrides render the manifests per cluster; none once rendered.
	Overrides []placementv1alpha1.Override
	// Division divides the workloads' replicas per cluster; Shares are a
	// cluster's, once divided (placementv1alpha1.SharesAnnotation).
	Division *placementv1alpha1.ReplicaDivision
	Shares   string
}

// Renderer renders revisions for the clusters of one reconcile: each revision
// once per set of rules that apply with the same values, however many clusters
// share them.
type Renderer struct {
	key      types.NamespacedName
	compiled *Compiled
	views    map[string]scheduling.Cluster
	// revisions are the revisions' contents read so far, by hash.
	revisions map[string]Content
	memo      map[string]rendered
	// divider divides the revisions' replicas (set by the gate); divided keeps
	// the divided manifests written.
	divider *Divider
	divided map[string]runtime.RawExtension
	// overridden are the replicas overrides set of divided workloads, by
	// cluster and workload.
	overridden map[string]map[string]int64
	// data reads the values of a revision's sealed Secrets (Unseal).
	data func(rev *placementv1alpha1.PlacementRevision) (map[string][]byte, error)
}

type rendered struct {
	c   Content
	err error
	// overridden are the divided workloads the overrides set the replicas of.
	overridden map[string]int64
}

// NewRenderer renders a Placement's revisions (key) for the clusters of views
// (by name), with the compiled overrides kept across reconciles.
func NewRenderer(key types.NamespacedName, compiled *Compiled, views map[string]scheduling.Cluster) *Renderer {
	return &Renderer{key: key, compiled: compiled, views: views, revisions: map[string]Content{}, memo: map[string]rendered{},
		divided: map[string]runtime.RawExtension{}, overridden: map[string]map[string]int64{}}
}

// View is what the Renderer knows of a cluster (its name only when nothing).
func (rd *Renderer) View(cluster string) scheduling.Cluster {
	if v, ok := rd.views[cluster]; ok {
		return v
	}
	return scheduling.Cluster{Name: cluster}
}

// kinds reads the replicas of custom kinds, as the divider does.
func (rd *Renderer) kinds() division.Kinds {
	if rd.divider == nil {
		return nil
	}
	return rd.divider.kinds
}

// Divide makes the Renderer divide the revisions' replicas with d.
func (rd *Renderer) Divide(d *Divider) { rd.divider = d }

// Surging tells whether a division waits for the increases elsewhere before
// it lowers a share (surge first).
func (rd *Renderer) Surging() bool { return rd.divider != nil && !rd.divider.settled }

// Overridden are the replicas overrides set of divided workloads, by cluster
// and workload.
func (rd *Renderer) Overridden() map[string]map[string]int64 { return rd.overridden }

// Unseal makes the Renderer put the values of the Secrets a revision holds
// back (sealed.Unseal), as data reads them from the revision's data Secret:
// what the Works carry. Without it they stay out (what counts pods needs
// none).
func (rd *Renderer) Unseal(data func(rev *placementv1alpha1.PlacementRevision) (map[string][]byte, error)) {
	rd.data = data
}

// Revision is what a PlacementRevision carries, read once per reconcile.
func (rd *Renderer) Revision(rev *placementv1alpha1.PlacementRevision) (Content, error) {
	if c, ok := rd.revisions[rev.Spec.Hash]; ok {
		return c, nil
	}
	manifests, err := render.RevisionManifests(&rev.Spec)
	if err != nil {
		return Content{}, err
	}
	if rd.data != nil && sealed.Sealed(manifests) {
		data, err := rd.data(rev)
		if err != nil {
			return Content{}, fmt.Errorf("reading the Secret values of revision %d: %w", rev.Spec.Revision, err)
		}
		if manifests, err = sealed.Unseal(manifests, data); err != nil {
			return Content{}, fmt.Errorf("revision %d: %w", rev.Spec.Revision, err)
		}
	}
	c := Content{Manifests: manifests, Hash: rev.Spec.Hash, Overrides: rev.Spec.Overrides, Division: rev.Spec.Division}
	rd.revisions[rev.Spec.Hash] = c
	return c, nil
}

// For is what a cluster's Works hold at revision c: its share of the
// divided workloads, then its overrides (c itself with neither). An override
// that fails on the cluster is an *overrides.Error.
func (rd *Renderer) For(c Content, cluster string) (Content, error) {
	if c.Division != nil && rd.divider != nil {
		var err error
		if c, err = rd.divider.divide(c, cluster, rd.divided); err != nil {
			return Content{}, err
		}
	}
	if len(c.Overrides) == 0 {
		return Content{Manifests: c.Manifests, Hash: c.Hash, Shares: c.Shares}, nil
	}
	bound, err := rd.compiled.bind(rd.key, c, rd.View(cluster))
	if err != nil {
		return Content{}, err
	}
	if bound.Key() == "" {
		return Content{Manifests: c.Manifests, Hash: c.Hash, Shares: c.Shares}, nil
	}
	key := c.Hash + "/" + bound.Key() + "/" + c.Shares
	if m, ok := rd.memo[key]; ok {
		if len(m.overridden) > 0 {
			rd.overridden[cluster] = m.overridden
		}
		return m.c, m.err
	}
	if err := rd.compiled.failed(rd.key, c, bound.Key()); err != nil {
		return Content{}, err
	}
	res, err := render.Override(bound, c.Manifests)
	out := Content{Manifests: res.Manifests, Hash: c.Hash, Shares: c.Shares}
	var changed map[string]int64
	if shares, ok := division.ParseShares(c.Shares); ok && err == nil {
		if changed = overridden(res.Manifests, &shares, rd.kinds()); len(changed) > 0 {
			out.Shares = shares.Encode()
			rd.overridden[cluster] = changed
		}
	}
	rd.memo[key] = rendered{c: out, err: err, overridden: changed}
	rd.compiled.fail(rd.key, c, bound.Key(), err)
	return out, err
}

// Compiled keeps the compiled overrides of each Placement's revisions, so
// that a revision's rules compile once, and what they evaluate to on each cluster
// view, so that tenant-supplied expressions run once per revision and view (not
// on every reconcile).
type Compiled struct {
	mu   sync.Mutex
	sets map[types.NamespacedName]map[string]*compiledSet
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
func (cs *Compiled) get(key types.NamespacedName, c Content) (*compiledSet, error) {
	if cset, ok := cs.sets[key][c.Hash]; ok {
		return cset, nil
	}
	set, err := overrides.Compile(c.Overrides)
	if err != nil {
		return nil, &overrides.Error{Rule: "(compile)", Action: "revision " + c.Hash, Err: err}
	}
	if cs.sets == nil {
		cs.sets = map[types.NamespacedName]map[string]*compiledSet{}
	}
	if cs.sets[key] == nil {
		cs.sets[key] = map[string]*compiledSet{}
	}
	cset := &compiledSet{set: set, bound: map[string]boundOrError{}, failures: map[string]error{}}
	cs.sets[key][c.Hash] = cset
	return cset, nil
}

// bind returns revision c's rules bound to the cluster view, evaluating them
// once per view. The tenant's expressions run outside the lock, so that one
// Placement's evaluation does not hold up the others' reconciles.
func (cs *Compiled) bind(key types.NamespacedName, c Content, view scheduling.Cluster) (*overrides.Bound, error) {
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
func (cs *Compiled) failed(key types.NamespacedName, c Content, boundKey string) error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cset, ok := cs.sets[key][c.Hash]; ok {
		return cset.failures[boundKey]
	}
	return nil
}

// fail records that rendering revision c with the bound rules of boundKey gave
// err, when it is an override's failure (bounded in number like the views).
func (cs *Compiled) fail(key types.NamespacedName, c Content, boundKey string, err error) {
	var oe *overrides.Error
	if !errors.As(err, &oe) {
		return
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cset, ok := cs.sets[key][c.Hash]; ok && len(cset.failures) < 1024 {
		cset.failures[boundKey] = err
	}
}

// Keep forgets the compiled overrides of the Placement's revisions other than
// those of hashes (pruned since).
func (cs *Compiled) Keep(key types.NamespacedName, hashes []string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	maps.DeleteFunc(cs.sets[key], func(h string, _ *compiledSet) bool { return !slices.Contains(hashes, h) })
}

// Forget drops what is kept of a Placement.
func (cs *Compiled) Forget(key types.NamespacedName) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	delete(cs.sets, key)
}

// OverrideFailure says why an override fails on a cluster, or "" for another error.
func OverrideFailure(err error) string {
	var e *overrides.Error
	if errors.As(err, &e) {
		return e.Error()
	}
	return ""
}

// OverrideFailures summarises the clusters overrides fail on, for the
// WorkSynchronized condition.
func OverrideFailures(failed map[string]string, selected int) string {
	names := slices.Sorted(maps.Keys(failed))
	parts := make([]string, 0, 3)
	for _, n := range names[:min(3, len(names))] {
		parts = append(parts, n+": "+failed[n])
	}
	return fmt.Sprintf("overrides fail on %d of %s, whose Works keep their last good content: %s",
		len(failed), message.Count(selected, "cluster"), message.List(parts, 3, ", "))
}

// Divider divides the replicas of a Placement's revisions over its chosen
// clusters (spec.scheduling.replicas, as each revision has it), once per
// revision in a reconcile, surge first: a cluster's share is lowered only once
// every chosen cluster carries at least its share of the target revision and
// reports its objects Available (but for those that only give replicas back).
type Divider struct {
	seed       string
	kinds      division.Kinds
	memo       *division.Memo
	clusters   []Chosen
	candidates []division.Candidate
	// carried is what each cluster's Works carry now, and holding which of
	// their StatefulSets' claims hold their share, by cluster and workload key.
	carried map[string]map[string]int64
	holding map[string]map[string]string
	// settled is known once Settle has run; the assignments made before it
	// (the target's) are surged then, the others as they are made.
	settled, known bool
	byHash         map[string]assigned
}

// Chosen is what a division knows of one chosen cluster.
type Chosen struct {
	division.Candidate
	// Carried is what its Works carry now, by workload key (what was last
	// written to it, where the cache does not show it yet).
	Carried map[string]int64
	// Holding says, by workload key, which StatefulSets' bound ReadWriteOnce
	// claims hold their share there (spec.strategy.stateful: Hold): their
	// share is not lowered.
	Holding map[string]string
	// Unseen is set while the last shares written to it are not in the cache:
	// not settled.
	Unseen bool
	// HasWorks and Available: it has Works, and they report their objects
	// Available.
	HasWorks, Available bool
}

// NewDivider divides over the chosen clusters, with the divisions made before
// (memo) and the Placement's seed (its UID); kinds reads the replicas of
// custom kinds.
func NewDivider(seed string, memo *division.Memo, chosen []Chosen, kinds division.Kinds) *Divider {
	d := &Divider{seed: seed, kinds: kinds, memo: memo, clusters: chosen, carried: map[string]map[string]int64{}, holding: map[string]map[string]string{},
		byHash: map[string]assigned{}}
	for _, c := range chosen {
		d.candidates = append(d.candidates, c.Candidate)
		d.carried[c.Name], d.holding[c.Name] = c.Carried, c.Holding
	}
	return d
}

// assigned is a revision's divisible workloads and their division.
type assigned struct {
	workloads  []division.Workload
	assignment *division.Assignment
}

// Settle decides, from the target revision's division, whether shares may be
// lowered now, and lowers them (surge first) in the divisions made so far.
func (d *Divider) Settle(target Content) {
	// A target that divides nothing lowers nothing by surge first.
	d.settled = target.Division == nil || !slices.ContainsFunc(d.clusters, func(c Chosen) bool { return c.Unseen })
	if target.Division != nil {
		a := d.assign(target).assignment
		for _, c := range d.clusters {
			// A cluster without Works carries nothing: settled only when its
			// target is nothing too. A cluster that only gives replicas back
			// need not be Available first: its surplus may be what keeps it
			// from being (pods with no room there after a drain and an
			// uncordon), and waiting for it would wait for ever.
			if !a.Reached(c.Name, d.carried[c.Name]) || c.HasWorks && !c.Available && !a.Lowering(c.Name, d.carried[c.Name]) {
				d.settled = false
				break
			}
		}
	}
	d.known = true
	for _, a := range d.byHash {
		d.surge(a.assignment)
	}
}

// Division is revision c's division over the chosen clusters, surge first
// once Settle has run.
func (d *Divider) Division(c Content) *division.Assignment { return d.assign(c).assignment }

// assign is the division of revision c, made once per reconcile; surge first
// once settle has run.
func (d *Divider) assign(c Content) assigned {
	if a, ok := d.byHash[c.Hash]; ok {
		return a
	}
	workloads := division.Workloads(c.Manifests, d.kinds)
	a := assigned{workloads: workloads, assignment: division.Assign(c.Division, workloads, d.candidates, d.seed, d.memo)}
	if d.known {
		d.surge(a.assignment)
	}
	d.byHash[c.Hash] = a
	return a
}

func (d *Divider) surge(a *division.Assignment) {
	a.Surge(d.carried, d.settled, func(cluster, key string) string { return d.holding[cluster][key] })
}

// divide writes a cluster's shares of revision c into its manifests
// (division.Apply).
func (d *Divider) divide(c Content, cluster string, memo map[string]runtime.RawExtension) (Content, error) {
	a := d.assign(c)
	shares := a.assignment.Of(cluster)
	manifests, err := division.Apply(c.Manifests, a.workloads, shares, memo, c.Hash)
	return Content{Manifests: manifests, Hash: c.Hash, Overrides: c.Overrides, Division: c.Division, Shares: shares.Encode()}, err
}

// overridden notes on shares the divided workloads whose replicas an override
// changed on the cluster, and returns them with the replicas it set.
func overridden(manifests []runtime.RawExtension, shares *division.Shares, kinds division.Kinds) map[string]int64 {
	var out map[string]int64
	for _, m := range manifests {
		w, ok := division.WorkloadOf(m.Raw, kinds)
		if !ok {
			continue
		}
		s, ok := shares.Workloads[w.Key]
		if !ok || s.Replicas == w.Total {
			continue
		}
		s.Reason = fmt.Sprintf("an override sets %d (the division's share is %d)", w.Total, s.Replicas)
		s.Overridden = ptr.To(w.Total)
		shares.Workloads[w.Key] = s
		if out == nil {
			out = map[string]int64{}
		}
		out[w.Key] = w.Total
	}
	return out
}

// DivisionProblems is the Progressing reason and message of the workloads
// the target revision's division could not divide anew, if any.
func DivisionProblems(a *division.Assignment) (string, string) {
	if a == nil || len(a.Problems) == 0 {
		return "", ""
	}
	reason := a.Problems[0].Reason
	msgs := make([]string, 0, len(a.Problems))
	for _, p := range a.Problems {
		msgs = append(msgs, p.Message)
	}
	return reason, message.List(msgs, 3, "; ") + "; the shares already placed stay as they are"
}

// SurgeMessage says which clusters keep a share above their target until the
// increases elsewhere are Available.
func SurgeMessage(a *division.Assignment) string {
	if a == nil {
		return ""
	}
	var keeping []string
	for _, name := range slices.Sorted(maps.Keys(a.Shares)) {
		for _, key := range a.Keys() {
			if s := a.Shares[name][key]; s.Replicas > s.Target {
				keeping = append(keeping, fmt.Sprintf("%s keeps %d of %s (target %d)", name, s.Replicas, key, s.Target))
			}
		}
	}
	if len(keeping) == 0 {
		return ""
	}
	return "surge first: " + message.List(keeping, 3, ", ") + " until the increases elsewhere are Available"
}

// OverriddenMessage says which divided workloads' replicas overrides set, and
// what the clusters' sum is then against the division's total.
func OverriddenMessage(a *division.Assignment, byCluster map[string]map[string]int64) string {
	var parts []string
	for _, key := range a.Keys() {
		var sum, total int64
		var on []string
		for name, shares := range a.Shares {
			s := shares[key]
			total += s.Target
			if v, ok := byCluster[name][key]; ok {
				sum += v
				on = append(on, fmt.Sprintf("%d on %s", v, name))
				continue
			}
			sum += s.Replicas
		}
		if len(on) == 0 {
			continue
		}
		slices.Sort(on)
		parts = append(parts, fmt.Sprintf("overrides set the replicas of %s (%s): the clusters' sum %d differs from the divided total %d", key, strings.Join(on, ", "), sum, total))
	}
	return message.List(parts, 3, "; ")
}

// Carried is what a cluster's Works carry now.
func Carried(parts []*workv1alpha1.Work) Content {
	hash, _ := clusterworks.Revision(parts)
	c := Content{Hash: hash}
	if len(parts) > 0 {
		c.Shares = parts[0].Annotations[placementv1alpha1.SharesAnnotation]
	}
	for _, w := range clusterworks.Current(parts) {
		for _, m := range w.Spec.Workload.Manifests {
			c.Manifests = append(c.Manifests, m.RawExtension)
		}
	}
	return c
}

// ChosenOf is what a division knows of a chosen cluster: its view, what its
// Works (parts) carry, or the shares last written to it while the cache does
// not show them (unseen), and, with hold (spec.strategy.stateful: Hold), the
// StatefulSets whose bound ReadWriteOnce claims hold their share there.
func ChosenOf(view scheduling.Cluster, parts []*workv1alpha1.Work, written string, unseen, hold bool) Chosen {
	name := view.Name
	c := Chosen{Candidate: division.Candidate{Name: name, Labels: view.Labels, Free: division.FreeCapacity(view.Properties)},
		HasWorks: len(parts) > 0, Available: clusterworks.Availability(parts) == metav1.ConditionTrue, Unseen: unseen}
	c.Prev, c.Carried = division.Carried(parts)
	if unseen {
		if prev, ok := division.ParseShares(written); ok {
			c.Prev, c.Carried = &prev, prev.Carries()
		}
	}
	for _, w := range claims.Holding(parts) {
		if hold && w.Kind == "StatefulSet" {
			if c.Holding == nil {
				c.Holding = map[string]string{}
			}
			c.Holding[division.Key(w.Kind, w.Name)] = claims.Describe(name, w)
		}
	}
	return c
}

// Divides tells whether a cluster's Works (by cluster) carry shares of a
// division: the target revision may not divide any more, while the others
// still do.
func Divides(works map[string][]*workv1alpha1.Work) bool {
	for _, parts := range works {
		if len(parts) > 0 && parts[0].Annotations[placementv1alpha1.SharesAnnotation] != "" {
			return true
		}
	}
	return false
}
