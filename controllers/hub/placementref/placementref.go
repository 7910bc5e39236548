// Package placementref maps objects that Lodestar labels with their Placement
// (PlacementDecisions, Works) back to that Placement, for watches.
package placementref

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

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
	var named []string
	for i := range list.Items {
		for _, d := range list.Items[i].Decisions {
			named = append(named, d.ClusterProfileRef.Name)
		}
	}
	fleet, err := profilesNamed(ctx, c, named)
	if err != nil {
		return Decisions{}, err
	}
	allowed := func(ref cpv1alpha1.ClusterProfileReference) string {
		if !slices.Contains(sets, ref.Namespace) {
			if ref.Namespace == "" {
				return "names no cluster set (clusterProfileRef.namespace is empty)"
			}
			return fmt.Sprintf("cluster set %s is not one the namespace may use", ref.Namespace)
		}
		same := fleet[ref.Name]
		if !slices.ContainsFunc(same, func(p *cpv1alpha1.ClusterProfile) bool { return p.Namespace == ref.Namespace && lookup.Managed(p) }) {
			return fmt.Sprintf("no ClusterProfile %s/%s that Lodestar manages", ref.Namespace, ref.Name)
		}
		// A cluster's Works go to the hub namespace of its name: a name that
		// another cluster set's profile claims (the hub marks the profiles of the
		// sets it manages with their Work namespace) could send one set's Works to
		// the other's cluster.
		for _, p := range same {
			if claims(p) && p.Namespace != ref.Namespace {
				return fmt.Sprintf("cluster name %s is used in cluster sets %s and %s; its Works would be ambiguous", ref.Name, ref.Namespace, p.Namespace)
			}
		}
		return ""
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
			if why := allowed(ref); why != "" {
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

// BulkReads is the number of cluster names above which their ClusterProfiles
// are read with one List of all rather than name by name.
const BulkReads = 64

// profilesNamed returns the ClusterProfiles of the given cluster names, in every
// cluster set, by name: read name by name through the cache's name index for a
// few names, and with one List for many (a List copies every ClusterProfile of
// the hub). They are the cache's: not to be changed.
func profilesNamed(ctx context.Context, c client.Reader, names []string) (map[string][]*cpv1alpha1.ClusterProfile, error) {
	out := make(map[string][]*cpv1alpha1.ClusterProfile, len(names))
	if len(names) <= BulkReads {
		for _, name := range names {
			if _, done := out[name]; done {
				continue
			}
			same, err := lookup.ClusterProfilesNamed(ctx, c, name)
			if err != nil {
				return nil, err
			}
			out[name] = []*cpv1alpha1.ClusterProfile{}
			for i := range same {
				out[name] = append(out[name], &same[i])
			}
		}
		return out, nil
	}
	list := &cpv1alpha1.ClusterProfileList{}
	if err := c.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing ClusterProfiles: %w", err)
	}
	wanted := make(map[string]bool, len(names))
	for _, name := range names {
		wanted[name] = true
	}
	for i := range list.Items {
		if p := &list.Items[i]; wanted[p.Name] {
			out[p.Name] = append(out[p.Name], p)
		}
	}
	return out, nil
}

// claims tells whether p is a Lodestar profile marked with its cluster's Work
// namespace.
func claims(p *cpv1alpha1.ClusterProfile) bool {
	return lookup.Managed(p) && p.Labels[placementv1alpha1.WorkNamespaceLabel] == names.ClusterNamespace(p.Name)
}

// ClusterLabels returns the labels of the named clusters' ClusterProfiles: of
// the Lodestar profile that claims each name (marked with the cluster's Work
// namespace), else of a Lodestar profile of that name, the first by cluster
// set; a cluster without one is left out (profilesNamed reads them). The
// labels are the cache's: not to be changed.
func ClusterLabels(ctx context.Context, c client.Reader, clusters []string) (map[string]map[string]string, error) {
	fleet, err := profilesNamed(ctx, c, clusters)
	if err != nil {
		return nil, err
	}
	chosen := make(map[string]*cpv1alpha1.ClusterProfile, len(clusters))
	for name, same := range fleet {
		for _, p := range same {
			if !lookup.Managed(p) {
				continue
			}
			prev, ok := chosen[name]
			if ok && (claims(prev) && !claims(p) || claims(prev) == claims(p) && prev.Namespace < p.Namespace) {
				continue
			}
			chosen[name] = p
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
