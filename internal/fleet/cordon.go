package fleet

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/claims"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/scheduling"
)

// Cordon taints the cluster NoSchedule: no Placement chooses it anew, and what it
// runs stays. Cordoning a cordoned cluster changes nothing.
func Cordon(ctx context.Context, c client.Client, clusterSet, name string) error {
	return editTaints(ctx, c, clusterSet, name, func(taints []placementv1alpha1.Taint) []placementv1alpha1.Taint {
		if slices.ContainsFunc(taints, func(t placementv1alpha1.Taint) bool { return t.Key == placementv1alpha1.CordonTaintKey }) {
			return taints
		}
		return append(taints, placementv1alpha1.Taint{Key: placementv1alpha1.CordonTaintKey, Effect: placementv1alpha1.TaintNoSchedule})
	})
}

// DrainOptions are how a drain treats what would keep a copy on the cluster.
type DrainOptions struct {
	// IncludeStateful moves copies held by their claims too: the taint's
	// value is DrainStatefulValue.
	IncludeStateful bool
	// ForceAfter, when set, is how long after the drain it overrules tenants'
	// disruption budgets and drain tolerations (the taint's forceAt); 0 at
	// once.
	ForceAfter *time.Duration
}

// Drain taints the cluster NoExecute: Placements that do not tolerate it move
// away. The scheduler keeps the cluster chosen until the clusters chosen in its
// place report the Placement's objects available (make-before-break); a Placement
// that no other cluster can satisfy leaves it at once. A copy held there by its
// claims (spec.strategy.stateful: Hold) stays, unless IncludeStateful: then the
// taint's value is DrainStatefulValue and such copies move too, to new, empty
// claims. With ForceAfter, from then on tenants' budgets and tolerations keep
// nothing there. Draining a drained cluster keeps when it was drained, adds
// IncludeStateful, and brings the forcing forward, never back.
func Drain(ctx context.Context, c client.Client, clusterSet, name string, now time.Time, o DrainOptions) error {
	return editTaints(ctx, c, clusterSet, name, func(taints []placementv1alpha1.Taint) []placementv1alpha1.Taint {
		drain := placementv1alpha1.Taint{Key: placementv1alpha1.DrainTaintKey, Effect: placementv1alpha1.TaintNoExecute, TimeAdded: now.UTC().Format(time.RFC3339)}
		if o.ForceAfter != nil {
			drain.ForceAt = now.Add(max(*o.ForceAfter, 0)).UTC().Format(time.RFC3339)
		}
		if o.IncludeStateful {
			drain.Value = placementv1alpha1.DrainStatefulValue
		}
		i := slices.IndexFunc(taints, func(t placementv1alpha1.Taint) bool { return t.Key == placementv1alpha1.DrainTaintKey })
		if i < 0 {
			return append(taints, drain)
		}
		old := taints[i]
		drain.TimeAdded = cmp.Or(old.TimeAdded, drain.TimeAdded)
		drain.Value = cmp.Or(drain.Value, old.Value)
		if was, ok := old.ForcedAt(); ok {
			if at, forced := drain.ForcedAt(); !forced || was.Before(at) {
				drain.ForceAt = old.ForceAt
			}
		}
		taints[i] = drain
		return taints
	})
}

// Held is a Placement whose copy on a cluster its claims hold there.
type Held struct {
	Namespace, Placement string
	// Why names the workloads and claims.
	Why string
}

// HeldOn lists the Placements whose copies on the cluster are held by their
// claims (Bound, ReadWriteOnce) as their agent last reported them: what a drain
// leaves in place unless it includes stateful copies. Placements that move
// stateful copies anyway (spec.strategy.stateful: Move) are not listed.
func HeldOn(ctx context.Context, c client.Client, cluster string) ([]Held, error) {
	return onCluster(ctx, c, cluster, func(p *placementv1alpha1.Placement, works []*workv1alpha1.Work) string {
		holding := claims.Holding(works)
		if len(holding) == 0 || p.Spec.Strategy.Stateful == placementv1alpha1.StatefulMove {
			return ""
		}
		return claims.DescribeAll(cluster, holding, 3)
	})
}

// BudgetedOn lists the Placements with a copy on the cluster and a
// disruption budget: a drain moves them only as the budget lets it (the
// Placement's Progressing condition says what it keeps).
func BudgetedOn(ctx context.Context, c client.Client, cluster string) ([]Held, error) {
	return onCluster(ctx, c, cluster, func(p *placementv1alpha1.Placement, _ []*workv1alpha1.Work) string {
		b := p.Spec.Strategy.DisruptionBudget
		if b == nil {
			return ""
		}
		return fmt.Sprintf("spec.strategy.disruptionBudget.minAvailableClusters %s: its copy on %s stays until that many clusters are Available without it",
			b.MinAvailableClusters.String(), cluster)
	})
}

// onCluster lists, by namespace and name, the Placements with Works on the
// cluster for which why says something.
func onCluster(ctx context.Context, c client.Client, cluster string, why func(*placementv1alpha1.Placement, []*workv1alpha1.Work) string) ([]Held, error) {
	works := &workv1alpha1.WorkList{}
	if err := c.List(ctx, works, client.InNamespace(names.ClusterNamespace(cluster))); err != nil {
		return nil, fmt.Errorf("listing the Works of cluster %s: %w", cluster, err)
	}
	byPlacement := map[types.NamespacedName][]*workv1alpha1.Work{}
	for i := range works.Items {
		w := &works.Items[i]
		key := types.NamespacedName{Namespace: w.Labels[placementv1alpha1.PlacementNamespaceLabel], Name: w.Labels[placementv1alpha1.PlacementNameLabel]}
		if key.Name != "" {
			byPlacement[key] = append(byPlacement[key], w)
		}
	}
	if len(byPlacement) == 0 {
		return nil, nil
	}
	placements := &placementv1alpha1.PlacementList{}
	if err := c.List(ctx, placements); err != nil {
		return nil, fmt.Errorf("listing Placements: %w", err)
	}
	byKey := map[types.NamespacedName]*placementv1alpha1.Placement{}
	for i := range placements.Items {
		byKey[client.ObjectKeyFromObject(&placements.Items[i])] = &placements.Items[i]
	}
	var out []Held
	for _, key := range slices.SortedFunc(maps.Keys(byPlacement), func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) }) {
		p, ok := byKey[key]
		if !ok {
			continue
		}
		if w := why(p, byPlacement[key]); w != "" {
			out = append(out, Held{Namespace: key.Namespace, Placement: key.Name, Why: w})
		}
	}
	return out, nil
}

// ForcedAt is when the cluster's drain overrules tenants (zero when it is not
// drained, or not forced).
func ForcedAt(ctx context.Context, c client.Client, clusterSet, name string) (time.Time, error) {
	profile := &cpv1alpha1.ClusterProfile{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: cmp.Or(clusterSet, placementv1alpha1.DefaultClusterSet), Name: name}, profile); err != nil {
		return time.Time{}, fmt.Errorf("reading cluster %s: %w", name, err)
	}
	taints, err := scheduling.ParseTaints(profile.Annotations[placementv1alpha1.TaintsAnnotation])
	if err != nil {
		return time.Time{}, fmt.Errorf("cluster %s: %w", name, err)
	}
	for _, t := range taints {
		if at, ok := t.ForcedAt(); ok {
			return at, nil
		}
	}
	return time.Time{}, nil
}

// Uncordon removes the taints Cordon and Drain add; other taints stay.
func Uncordon(ctx context.Context, c client.Client, clusterSet, name string) error {
	return editTaints(ctx, c, clusterSet, name, func(taints []placementv1alpha1.Taint) []placementv1alpha1.Taint {
		return slices.DeleteFunc(taints, func(t placementv1alpha1.Taint) bool {
			return t.Key == placementv1alpha1.CordonTaintKey || t.Key == placementv1alpha1.DrainTaintKey
		})
	})
}

// editTaints rewrites the cluster's taints annotation, refusing to overwrite one it
// cannot read (the operator fixes it by hand). The write is optimistically locked
// and retried on a conflict: the agent and the hub write the ClusterProfile's
// status all the time.
func editTaints(ctx context.Context, c client.Client, clusterSet, name string, edit func([]placementv1alpha1.Taint) []placementv1alpha1.Taint) error {
	if clusterSet == "" {
		clusterSet = placementv1alpha1.DefaultClusterSet
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		profile := &cpv1alpha1.ClusterProfile{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: clusterSet, Name: name}, profile); err != nil {
			return fmt.Errorf("reading cluster %s in cluster set %s: %w", name, clusterSet, err)
		}
		taints, err := scheduling.ParseTaints(profile.Annotations[placementv1alpha1.TaintsAnnotation])
		if err != nil {
			return fmt.Errorf("cluster %s: %w; fix or remove the annotation first", name, err)
		}
		edited := edit(slices.Clone(taints))
		if slices.Equal(edited, taints) {
			return nil
		}
		base := profile.DeepCopy()
		if len(edited) == 0 {
			delete(profile.Annotations, placementv1alpha1.TaintsAnnotation)
		} else {
			b, err := json.Marshal(edited)
			if err != nil {
				return err
			}
			if profile.Annotations == nil {
				profile.Annotations = map[string]string{}
			}
			profile.Annotations[placementv1alpha1.TaintsAnnotation] = string(b)
		}
		// Not wrapped: RetryOnConflict must see the Conflict.
		return c.Patch(ctx, profile, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	})
}
