package fleet

import (
	"context"
	"fmt"
	"sort"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/scheduling"
)

// ClusterInfo is what an operator sees of one member cluster: its ClusterProfile
// and what the hub knows beside it.
type ClusterInfo struct {
	// Profile is the cluster's ClusterProfile.
	Profile *cpv1alpha1.ClusterProfile
	// Healthy and Reachable are the statuses of ControlPlaneHealthy and
	// AgentReachable ("" when not reported).
	Healthy, Reachable string
	// Heartbeat is when the agent last renewed its Lease; zero when it never did.
	Heartbeat time.Time
	// Taints are the cluster's taints; TaintsErr says why they cannot be read.
	Taints    []placementv1alpha1.Taint
	TaintsErr error
	// Works is how many Works the cluster's hub namespace holds.
	Works int
}

// Property returns one of the cluster's status.properties.
func (c ClusterInfo) Property(name string) string {
	for _, p := range c.Profile.Status.Properties {
		if p.Name == name {
			return p.Value
		}
	}
	return ""
}

// ClustersOptions say which clusters to list.
type ClustersOptions struct {
	// ClusterSet is the cluster set's namespace; empty lists every set.
	ClusterSet string
	// Selector filters by the ClusterProfiles' labels; nil selects all.
	Selector labels.Selector
	// Name, when set, lists only that cluster.
	Name string
}

// Clusters lists the member clusters with their heartbeat and Work count, by set
// and name. It reads the ClusterProfiles, the agents' Leases (one list, by name)
// and the metadata of the Works.
func Clusters(ctx context.Context, c client.Reader, opts ClustersOptions) ([]ClusterInfo, error) {
	list := &cpv1alpha1.ClusterProfileList{}
	listOpts := []client.ListOption{}
	if opts.ClusterSet != "" {
		listOpts = append(listOpts, client.InNamespace(opts.ClusterSet))
	}
	if opts.Selector != nil {
		listOpts = append(listOpts, client.MatchingLabelsSelector{Selector: opts.Selector})
	}
	if err := c.List(ctx, list, listOpts...); err != nil {
		return nil, fmt.Errorf("listing ClusterProfiles: %w", err)
	}
	if len(list.Items) == 0 && opts.ClusterSet != "" {
		if err := clusterSetExists(ctx, c, opts.ClusterSet); err != nil {
			return nil, err
		}
	}
	heartbeats, err := Heartbeats(ctx, c)
	if err != nil {
		return nil, err
	}
	count, err := WorkCounts(ctx, c)
	if err != nil {
		return nil, err
	}

	var out []ClusterInfo
	for i := range list.Items {
		p := &list.Items[i]
		if opts.Name != "" && p.Name != opts.Name {
			continue
		}
		info := ClusterInfo{Profile: p, Heartbeat: heartbeats[p.Name], Works: count[p.Name]}
		if cond := meta.FindStatusCondition(p.Status.Conditions, placementv1alpha1.ControlPlaneHealthyCondition); cond != nil {
			info.Healthy = string(cond.Status)
		}
		if cond := meta.FindStatusCondition(p.Status.Conditions, placementv1alpha1.AgentReachableCondition); cond != nil {
			info.Reachable = string(cond.Status)
		}
		info.Taints, info.TaintsErr = scheduling.ParseTaints(p.Annotations[placementv1alpha1.TaintsAnnotation])
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Profile, out[j].Profile
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return out, nil
}

// Heartbeats are the agents' last Lease renewals, by cluster.
func Heartbeats(ctx context.Context, c client.Reader) (map[string]time.Time, error) {
	leases := &coordinationv1.LeaseList{}
	if err := c.List(ctx, leases, client.MatchingFields{"metadata.name": placementv1alpha1.AgentLeaseName}); err != nil {
		return nil, fmt.Errorf("listing the agents' Leases: %w", err)
	}
	heartbeats := map[string]time.Time{}
	for _, l := range leases.Items {
		if cluster, ok := names.ClusterFromNamespace(l.Namespace); ok && l.Spec.RenewTime != nil {
			heartbeats[cluster] = l.Spec.RenewTime.Time
		}
	}
	return heartbeats, nil
}

// WorkCounts are how many Works each cluster's hub namespace holds (their
// metadata only is read).
func WorkCounts(ctx context.Context, c client.Reader) (map[string]int, error) {
	works := &metav1.PartialObjectMetadataList{}
	works.SetGroupVersionKind(workv1alpha1.SchemeGroupVersion.WithKind("WorkList"))
	if err := c.List(ctx, works); err != nil {
		return nil, fmt.Errorf("listing Works: %w", err)
	}
	count := map[string]int{}
	for _, w := range works.Items {
		if cluster, ok := names.ClusterFromNamespace(w.Namespace); ok {
			count[cluster]++
		}
	}
	return count, nil
}

// ChosenBy lists the Placements (namespace/name) whose PlacementDecisions name
// the cluster of the set, sorted.
func ChosenBy(ctx context.Context, c client.Reader, clusterSet, cluster string) ([]string, error) {
	list := &cpv1alpha1.PlacementDecisionList{}
	if err := c.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing PlacementDecisions: %w", err)
	}
	seen := map[string]bool{}
	for _, pd := range list.Items {
		owner := metav1.GetControllerOf(&pd)
		if owner == nil || owner.Kind != "Placement" {
			continue
		}
		for _, d := range pd.Decisions {
			ns := d.ClusterProfileRef.Namespace
			if ns == "" {
				ns = pd.Namespace
			}
			if d.ClusterProfileRef.Name == cluster && ns == clusterSet {
				seen[pd.Namespace+"/"+owner.Name] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out, nil
}

// clusterSetExists fails when set names no cluster set of the hub: no
// namespace of that name, or one no hub manager manages. A set without
// clusters is one; a user who may not read namespaces is not told more.
func clusterSetExists(ctx context.Context, c client.Reader, set string) error {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := c.Get(ctx, client.ObjectKey{Name: set}, ns); apierrors.IsNotFound(err) {
		return fmt.Errorf("cluster set %q does not exist: the hub has no namespace %s (kubectl lodestar get clusters -A lists every set)", set, set)
	} else if err != nil || ns.Labels[placementv1alpha1.HubManagerLabel] != "" {
		return nil //nolint:nilerr // one the user may not read is not judged
	}
	// An unmarked namespace with profiles (that a label selector left out).
	some := &cpv1alpha1.ClusterProfileList{}
	if err := c.List(ctx, some, client.InNamespace(set), client.Limit(1)); err != nil || len(some.Items) > 0 {
		return nil //nolint:nilerr // one the user may not read is not judged
	}
	return fmt.Errorf("namespace %s is not a cluster set: no hub manager manages it and it has no cluster (kubectl lodestar get clusters -A lists every set)", set)
}
