// Package placementref maps objects that Lodestar labels with their Placement
// (PlacementDecisions, Works) back to that Placement, for watches.
package placementref

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/hub/lookup"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// FromLabels maps an object to the Placement its labels name: the name (or its
// hash, for names too long for a label) in nameLabel, and the namespace in nsLabel
// or, when nsLabel is empty, the object's own namespace.
func FromLabels(c client.Reader, nameLabel, nsLabel string) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		key, ok := obj.GetLabels()[nameLabel]
		if !ok || key == "" {
			return nil
		}
		ns := obj.GetNamespace()
		if nsLabel != "" {
			ns = obj.GetLabels()[nsLabel]
		}
		reqs := []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: key}}}
		if !strings.HasPrefix(key, names.HashedLabelPrefix) {
			return reqs
		}
		// Possibly a hashed name: find the Placement whose name hashes to it.
		list := &placementv1alpha1.PlacementList{}
		if err := c.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing Placements for a labelled object", "object", klog.KObj(obj))
			return reqs
		}
		for _, p := range list.Items {
			if p.Name != key && names.LabelValue(p.Name) == key {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
			}
		}
		return reqs
	}
}

// InNamespace maps an object (a ClusterSetBinding) to every Placement of its
// namespace, and a Namespace to every Placement in it.
func InNamespace(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		ns := obj.GetNamespace()
		if ns == "" {
			ns = obj.GetName() // a Namespace
		}
		list := &placementv1alpha1.PlacementList{}
		if err := c.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing Placements of a namespace", "object", klog.KObj(obj))
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return reqs
	}
}

// Decisions is what a Placement's PlacementDecisions say, once checked.
type Decisions struct {
	// Clusters are the clusters the accepted decisions name, each once.
	Clusters []string
	// Found is set when some PlacementDecision of the Placement is accepted;
	// without one nothing is known of where the Placement's objects belong.
	Found bool
	// Consistent is set when the accepted slices are one whole scheduling result
	// (see placementv1alpha1.DecisionRevisionAnnotation): only then may a cluster
	// they do not name lose its Work.
	Consistent bool
	// Rejected says, for each decision or slice not acted on, why.
	Rejected []string
	// Sets are the cluster sets the Placement's namespace may use.
	Sets []string
}

// Decided reads the Placement's PlacementDecisions and accepts only what may send
// Works somewhere: slices owned by the Placement and written for its scheduler
// (spec.schedulerName), and in them only clusters whose ClusterProfile exists, is
// Lodestar's, and lies in one of sets, the cluster sets the Placement's namespace
// may use. Whoever wrote the decisions (an external scheduler, a tenant who may
// create PlacementDecisions), nothing else reaches a Work.
func Decided(ctx context.Context, c client.Reader, placement *placementv1alpha1.Placement, sets []string) (Decisions, error) {
	list := &cpv1alpha1.PlacementDecisionList{}
	if err := c.List(ctx, list, client.InNamespace(placement.Namespace), client.UnsafeDisableDeepCopy,
		client.MatchingLabels{cpv1alpha1.PlacementKeyLabel: names.LabelValue(placement.Name)}); err != nil {
		return Decisions{}, fmt.Errorf("listing PlacementDecisions: %w", err)
	}
	out := Decisions{Sets: sets}
	scheduler := placement.Spec.SchedulerName
	if scheduler == "" {
		scheduler = placementv1alpha1.DefaultSchedulerName
	}
	// The fleet's profiles are read one at a time for a few clusters, and with one
	// List for many (a List copies every ClusterProfile of the hub).
	refs := 0
	for i := range list.Items {
		refs += len(list.Items[i].Decisions)
	}
	var fleet profiles = lookups{ctx: ctx, c: c}
	if refs > BulkReads {
		listed, err := listProfiles(ctx, c, sets)
		if err != nil {
			return Decisions{}, err
		}
		fleet = listed
	}
	allowed := func(ref cpv1alpha1.ClusterProfileReference) (string, error) {
		if !slices.Contains(sets, ref.Namespace) {
			if ref.Namespace == "" {
				return "names no cluster set (clusterProfileRef.namespace is empty)", nil
			}
			return fmt.Sprintf("cluster set %s is not one the namespace may use", ref.Namespace), nil
		}
		managed, err := fleet.managed(ref.Namespace, ref.Name)
		if err != nil {
			return "", err
		}
		if !managed {
			return fmt.Sprintf("no ClusterProfile %s/%s that Lodestar manages", ref.Namespace, ref.Name), nil
		}
		// A cluster's Works go to the hub namespace of its name: a name that
		// another cluster set's profile claims (the hub marks the profiles of the
		// sets it manages with their Work namespace) could send one set's Works to
		// the other's cluster.
		claims, err := fleet.claims(ref.Name)
		if err != nil {
			return "", err
		}
		for _, set := range claims {
			if set != ref.Namespace {
				return fmt.Sprintf("cluster name %s is used in cluster sets %s and %s; its Works would be ambiguous", ref.Name, ref.Namespace, set), nil
			}
		}
		return "", nil
	}

	seen := map[string]bool{}
	revisions := map[string]bool{}
	declared := map[string]bool{}
	accepted := 0
	for i := range list.Items {
		pd := &list.Items[i]
		switch {
		case !ownedBy(pd, placement):
			out.Rejected = append(out.Rejected, fmt.Sprintf("PlacementDecision %s is not owned by the Placement", pd.Name))
			continue
		case pd.SchedulerName != scheduler:
			out.Rejected = append(out.Rejected, fmt.Sprintf("PlacementDecision %s was written for scheduler %q, not %q", pd.Name, pd.SchedulerName, scheduler))
			continue
		}
		accepted++
		revisions[pd.Annotations[placementv1alpha1.DecisionRevisionAnnotation]] = true
		declared[pd.Annotations[placementv1alpha1.DecisionSlicesAnnotation]] = true
		for _, d := range pd.Decisions {
			ref := d.ClusterProfileRef
			why, err := allowed(ref)
			if err != nil {
				return Decisions{}, err
			}
			if why != "" {
				out.Rejected = append(out.Rejected, fmt.Sprintf("PlacementDecision %s names cluster %s: %s", pd.Name, ref.Name, why))
				continue
			}
			if !seen[ref.Name] {
				seen[ref.Name] = true
				out.Clusters = append(out.Clusters, ref.Name)
			}
		}
	}
	out.Found = accepted > 0
	out.Consistent = consistent(accepted, revisions, declared)
	return out, nil
}

// BulkReads is the number of decided clusters above which Decided reads the
// fleet's ClusterProfiles with one List rather than one by one.
const BulkReads = 64

// profiles is what Decided needs to know of the fleet's ClusterProfiles.
type profiles interface {
	// managed tells whether Lodestar manages a ClusterProfile set/name.
	managed(set, name string) (bool, error)
	// claims are the cluster sets whose Lodestar profile of that cluster name is
	// marked with the cluster's Work namespace.
	claims(name string) ([]string, error)
}

// lookups reads profiles one at a time from the cache.
type lookups struct {
	ctx context.Context
	c   client.Reader
}

func (l lookups) managed(set, name string) (bool, error) {
	p := &cpv1alpha1.ClusterProfile{}
	if err := l.c.Get(l.ctx, client.ObjectKey{Namespace: set, Name: name}, p, client.UnsafeDisableDeepCopy); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading ClusterProfile %s/%s: %w", set, name, err)
	}
	return lookup.Managed(p), nil
}

func (l lookups) claims(name string) ([]string, error) {
	same, err := lookup.ClusterProfilesNamed(l.ctx, l.c, name)
	if err != nil {
		return nil, err
	}
	var out []string
	for i := range same {
		if claims(&same[i]) {
			out = append(out, same[i].Namespace)
		}
	}
	return out, nil
}

// claims tells whether p is a Lodestar profile marked with its cluster's Work
// namespace.
func claims(p *cpv1alpha1.ClusterProfile) bool {
	return lookup.Managed(p) && p.Labels[placementv1alpha1.WorkNamespaceLabel] == names.ClusterNamespace(p.Name)
}

// listed is the fleet's profiles as one List of the cache found them.
type listed struct {
	// bySet are Lodestar's profiles of the cluster sets asked for, by set.
	bySet map[string]map[string]bool
	// claimed are the claims by cluster name.
	claimed map[string][]string
}

func listProfiles(ctx context.Context, c client.Reader, sets []string) (*listed, error) {
	list := &cpv1alpha1.ClusterProfileList{}
	if err := c.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing ClusterProfiles: %w", err)
	}
	out := &listed{bySet: map[string]map[string]bool{}, claimed: map[string][]string{}}
	for i := range list.Items {
		p := &list.Items[i]
		if !lookup.Managed(p) {
			continue
		}
		if slices.Contains(sets, p.Namespace) {
			if out.bySet[p.Namespace] == nil {
				out.bySet[p.Namespace] = map[string]bool{}
			}
			out.bySet[p.Namespace][p.Name] = true
		}
		if claims(p) {
			out.claimed[p.Name] = append(out.claimed[p.Name], p.Namespace)
		}
	}
	return out, nil
}

func (l *listed) managed(set, name string) (bool, error) { return l.bySet[set][name], nil }

func (l *listed) claims(name string) ([]string, error) { return l.claimed[name], nil }

// ClusterLabels returns the labels of the named clusters' ClusterProfiles: of
// the Lodestar profile that claims each name (marked with the cluster's Work
// namespace), else of a Lodestar profile of that name, the first by cluster
// set; a cluster without one is left out. As Decided, it reads a few clusters'
// profiles one by one and many with one List (BulkReads). The labels are the
// cache's: not to be changed.
func ClusterLabels(ctx context.Context, c client.Reader, clusters []string) (map[string]map[string]string, error) {
	chosen := make(map[string]*cpv1alpha1.ClusterProfile, len(clusters))
	consider := func(p *cpv1alpha1.ClusterProfile) {
		if !lookup.Managed(p) {
			return
		}
		prev, ok := chosen[p.Name]
		if ok && (claims(prev) && !claims(p) || claims(prev) == claims(p) && prev.Namespace < p.Namespace) {
			return
		}
		chosen[p.Name] = p
	}
	if len(clusters) <= BulkReads {
		for _, name := range clusters {
			same, err := lookup.ClusterProfilesNamed(ctx, c, name)
			if err != nil {
				return nil, err
			}
			for i := range same {
				consider(&same[i])
			}
		}
	} else {
		list := &cpv1alpha1.ClusterProfileList{}
		if err := c.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing ClusterProfiles: %w", err)
		}
		wanted := make(map[string]bool, len(clusters))
		for _, name := range clusters {
			wanted[name] = true
		}
		for i := range list.Items {
			if wanted[list.Items[i].Name] {
				consider(&list.Items[i])
			}
		}
	}
	out := make(map[string]map[string]string, len(chosen))
	for name, p := range chosen {
		out[name] = p.Labels
	}
	return out, nil
}

// DecidedIn is Decided for the cluster sets the Placement's namespace may use
// (lookup.ClusterSets: those of managed its ClusterSetBindings name).
func DecidedIn(ctx context.Context, c client.Reader, placement *placementv1alpha1.Placement, managed []string) (Decisions, error) {
	sets, err := lookup.ClusterSets(ctx, c, placement.Namespace, managed)
	if err != nil {
		return Decisions{}, err
	}
	return Decided(ctx, c, placement, sets)
}

// consistent tells whether accepted slices, carrying these revision and slice
// count annotations, are one whole scheduling result: one slice, or every slice
// of one revision, as many as that revision declares.
func consistent(accepted int, revisions, declared map[string]bool) bool {
	if accepted <= 1 {
		return true
	}
	if len(revisions) != 1 || len(declared) != 1 {
		return false
	}
	for rev := range revisions {
		if rev == "" {
			return false
		}
	}
	for n := range declared {
		return n == strconv.Itoa(accepted)
	}
	return false
}

// ownedBy tells whether obj names the Placement among its owners.
func ownedBy(obj metav1.Object, placement *placementv1alpha1.Placement) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == placement.UID && ref.Kind == "Placement" && ref.Name == placement.Name {
			return true
		}
	}
	return false
}

// WorkLabels are the labels that tie a Work to its Placement.
func WorkLabels(placement *placementv1alpha1.Placement) map[string]string {
	return map[string]string{
		placementv1alpha1.PlacementNamespaceLabel: placement.Namespace,
		placementv1alpha1.PlacementNameLabel:      names.LabelValue(placement.Name),
	}
}
