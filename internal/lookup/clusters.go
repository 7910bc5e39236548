package lookup

import (
	"context"
	"fmt"
	"github.com/lodestar-dev/lodestar/internal/scheduling"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"slices"
	"time"

	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// ClusterProfilesNamed lists the ClusterProfiles of a cluster name in every
// cluster set, read-only (the cache's own objects).
func ClusterProfilesNamed(ctx context.Context, c client.Reader, name string) ([]cpv1alpha1.ClusterProfile, error) {
	list := &cpv1alpha1.ClusterProfileList{}
	if err := c.List(ctx, list, client.MatchingFields{ClusterProfilesByName: name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing ClusterProfiles named %s: %w", name, err)
	}
	return list.Items, nil
}

// Managed tells whether Lodestar manages a ClusterProfile.
func Managed(p *cpv1alpha1.ClusterProfile) bool {
	return p.Spec.ClusterManager.Name == placementv1alpha1.ClusterManagerName
}

// ManagedProfile reads the ClusterProfile of key for a controller that acts only on
// Lodestar's ClusterProfiles in the cluster sets the hub manages (sets). It returns
// nil, and no error, when the profile is gone or not one to act on.
func ManagedProfile(ctx context.Context, c client.Reader, key client.ObjectKey, sets []string) (*cpv1alpha1.ClusterProfile, error) {
	profile := &cpv1alpha1.ClusterProfile{}
	if err := c.Get(ctx, key, profile); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if !Managed(profile) || !slices.Contains(sets, profile.Namespace) {
		return nil, nil
	}
	return profile, nil
}

// ManagedProfiles lets only the ClusterProfiles Lodestar manages through.
var ManagedProfiles = predicate.NewPredicateFuncs(func(o client.Object) bool {
	p, ok := o.(*cpv1alpha1.ClusterProfile)
	return ok && Managed(p)
})

// ClusterSets returns the cluster sets a namespace's Placements may use: those its
// ClusterSetBindings name that are among managed, the cluster sets the hub
// manages, sorted. A namespace without a binding may use none; the Placements
// that carry out ClusterPlacements use every managed set.
func ClusterSets(ctx context.Context, c client.Reader, namespace string, managed []string) ([]string, error) {
	if namespace == placementv1alpha1.ClusterPlacementNamespace {
		// ClusterPlacements are the platform admins': every managed set.
		return slices.Sorted(slices.Values(managed)), nil
	}
	bound, err := boundSets(ctx, c, namespace)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(bound, func(set string) bool { return !slices.Contains(managed, set) }), nil
}

// boundSets returns the cluster sets namespace's ClusterSetBindings (those not
// being deleted) name, sorted, each once.
func boundSets(ctx context.Context, c client.Reader, namespace string) ([]string, error) {
	list := &placementv1alpha1.ClusterSetBindingList{}
	if err := c.List(ctx, list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing ClusterSetBindings in %s: %w", namespace, err)
	}
	var sets []string
	for i := range list.Items {
		if b := &list.Items[i]; b.DeletionTimestamp.IsZero() {
			sets = append(sets, b.Spec.ClusterSet)
		}
	}
	slices.Sort(sets)
	return slices.Compact(sets), nil
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
			same, err := ClusterProfilesNamed(ctx, c, name)
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
	return Managed(p) && p.Labels[placementv1alpha1.WorkNamespaceLabel] == names.ClusterNamespace(p.Name)
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
			if !Managed(p) {
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

// ProfileState is what a Placement's controllers know of a cluster of its sets:
// whether the Placement may no longer use it at all (no ClusterProfile of its
// name that Lodestar manages lies in the sets: Revoked), whether its agent is
// reachable, whether it is drained with --include-stateful, and when its
// drain overrules tenants (zero: not forced).
type ProfileState struct {
	Revoked, Reachable, DrainStateful bool
	ForcedAt                          time.Time
}

// StateOf is the ProfileState of cluster in sets.
func StateOf(ctx context.Context, c client.Reader, cluster string, sets []string) (ProfileState, error) {
	profiles, err := ClusterProfilesNamed(ctx, c, cluster)
	if err != nil {
		return ProfileState{}, err
	}
	for i := range profiles {
		if p := &profiles[i]; Managed(p) && slices.Contains(sets, p.Namespace) && p.DeletionTimestamp.IsZero() {
			taints, _ := scheduling.ParseTaints(p.Annotations[placementv1alpha1.TaintsAnnotation])
			var forced time.Time
			for _, t := range taints {
				if at, ok := t.ForcedAt(); ok {
					forced = at
				}
			}
			return ProfileState{
				ForcedAt: forced,
				Reachable: !meta.IsStatusConditionFalse(p.Status.Conditions, placementv1alpha1.AgentReachableCondition) &&
					!meta.IsStatusConditionPresentAndEqual(p.Status.Conditions, placementv1alpha1.AgentReachableCondition, metav1.ConditionUnknown),
				DrainStateful: slices.ContainsFunc(taints, func(t placementv1alpha1.Taint) bool {
					return t.Key == placementv1alpha1.DrainTaintKey && t.Value == placementv1alpha1.DrainStatefulValue
				}),
			}, nil
		}
	}
	return ProfileState{Revoked: true}, nil
}

// Approvals returns what the RolloutApprovals of the Placement's target revision
// approve; approvals of other revisions do nothing.
func Approvals(ctx context.Context, c client.Reader, placement *placementv1alpha1.Placement, target string) (map[string]bool, map[string]bool, error) {
	list := &placementv1alpha1.RolloutApprovalList{}
	if err := c.List(ctx, list, client.InNamespace(placement.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, fmt.Errorf("listing RolloutApprovals: %w", err)
	}
	stages, clusters := map[string]bool{}, map[string]bool{}
	for _, a := range list.Items {
		if a.Spec.Placement != placement.Name || a.Spec.Revision != target || !a.DeletionTimestamp.IsZero() {
			continue
		}
		if a.Spec.Stage != "" {
			stages[a.Spec.Stage] = true
		}
		for _, cl := range a.Spec.Clusters {
			clusters[cl] = true
		}
	}
	return stages, clusters, nil
}

// ProfilesIn returns the ClusterProfiles Lodestar manages of clusters in the
// sets, by name.
func ProfilesIn(ctx context.Context, c client.Reader, clusters []string, sets []string) (map[string]*cpv1alpha1.ClusterProfile, error) {
	out := map[string]*cpv1alpha1.ClusterProfile{}
	for _, name := range clusters {
		profiles, err := ClusterProfilesNamed(ctx, c, name)
		if err != nil {
			return nil, err
		}
		for i := range profiles {
			if p := &profiles[i]; Managed(p) && slices.Contains(sets, p.Namespace) {
				out[name] = p
				break
			}
		}
	}
	return out, nil
}

// GrantSelector is an access grant's spec.clusterSelector: every cluster of
// the set when it is omitted.
func GrantSelector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return nil, fmt.Errorf("spec.clusterSelector: %w", err)
	}
	return sel, nil
}

// Granted are the clusters of an access grant: Lodestar's ClusterProfiles of
// set matching sel and not being deleted, by name, sorted; none when set is
// not one of sets (another hub manager's grant).
func Granted(ctx context.Context, c client.Reader, sets []string, set string, sel labels.Selector) ([]string, error) {
	if !slices.Contains(sets, set) {
		return nil, nil
	}
	list := &cpv1alpha1.ClusterProfileList{}
	if err := c.List(ctx, list, client.InNamespace(set), client.MatchingLabelsSelector{Selector: sel}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing ClusterProfiles: %w", err)
	}
	var out []string
	for i := range list.Items {
		if p := &list.Items[i]; Managed(p) && p.DeletionTimestamp.IsZero() {
			out = append(out, p.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}
