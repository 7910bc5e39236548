package lookup

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
)

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

// PlacementDecisions lists the PlacementDecisions labelled with the Placement's
// name (whoever wrote them: see ownedBy).
func PlacementDecisions(ctx context.Context, c client.Reader, placement *placementv1alpha1.Placement, opts ...client.ListOption) (*cpv1alpha1.PlacementDecisionList, error) {
	list := &cpv1alpha1.PlacementDecisionList{}
	opts = append(opts, client.InNamespace(placement.Namespace), client.MatchingLabels{cpv1alpha1.PlacementKeyLabel: names.LabelValue(placement.Name)})
	if err := c.List(ctx, list, opts...); err != nil {
		return nil, fmt.Errorf("listing PlacementDecisions: %w", err)
	}
	return list, nil
}

// Decided reads the Placement's PlacementDecisions and accepts only what may send
// Works somewhere: slices owned by the Placement and written for its scheduler
// (spec.scheduling.schedulerName), and in them only clusters whose ClusterProfile exists, is
// Lodestar's, and lies in one of sets, the cluster sets the Placement's namespace
// may use. Whoever wrote the decisions (an external scheduler, a tenant who may
// create PlacementDecisions), nothing else reaches a Work.
func Decided(ctx context.Context, c client.Reader, placement *placementv1alpha1.Placement, sets []string) (Decisions, error) {
	list, err := PlacementDecisions(ctx, c, placement, client.UnsafeDisableDeepCopy)
	if err != nil {
		return Decisions{}, err
	}
	out := Decisions{Sets: sets}
	scheduler := placement.Spec.Scheduling.SchedulerName
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
		if !slices.ContainsFunc(same, func(p *cpv1alpha1.ClusterProfile) bool { return p.Namespace == ref.Namespace && Managed(p) }) {
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

// DecidedIn is Decided for the cluster sets the Placement's namespace may use
// (ClusterSets: those of managed its ClusterSetBindings name).
func DecidedIn(ctx context.Context, c client.Reader, placement *placementv1alpha1.Placement, managed []string) (Decisions, error) {
	sets, err := ClusterSets(ctx, c, placement.Namespace, managed)
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
