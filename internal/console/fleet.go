package console

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/fleet"
	"github.com/lodestar-dev/lodestar/internal/scheduling"
)

// Condition is a condition as the page shows it.
type Condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

func conditionsOf(in []metav1.Condition) []Condition {
	out := make([]Condition, 0, len(in))
	for _, c := range in {
		out = append(out, Condition{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message})
	}
	return out
}

// Cluster is one member cluster as the clusters view shows it.
type Cluster struct {
	Name       string            `json:"name"`
	ClusterSet string            `json:"clusterSet"`
	Labels     map[string]string `json:"labels,omitempty"`
	Properties map[string]string `json:"properties,omitempty"`
	Taints     []string          `json:"taints,omitempty"`
	Version    string            `json:"version,omitempty"`
	// Healthy and Reachable: ControlPlaneHealthy and AgentReachable.
	Healthy   string `json:"healthy"`
	Reachable string `json:"reachable"`
	// Heartbeat is the agent's last Lease renewal; empty when unknown (or
	// not readable by the user).
	Heartbeat string `json:"heartbeat,omitempty"`
	// Works in the cluster's hub namespace; -1 when the user may not list them.
	Works int `json:"works"`
	// NotReady is why the cluster is not healthy or reachable (the
	// conditions that are not True).
	NotReady   []Condition `json:"notReady,omitempty"`
	Conditions []Condition `json:"conditions,omitempty"`
}

// ClusterPage is one page of clusters.
type ClusterPage struct {
	Total int       `json:"total"`
	Items []Cluster `json:"items"`
	// Unhealthy counts every cluster (all pages) that is not healthy or not reachable.
	Unhealthy int `json:"unhealthy"`
}

// clusters lists the clusters (of the set, or all), filtered by q (name,
// label or property value), a page at a time. The agents' Leases and the
// Works are read when the user may; otherwise those columns are empty.
func (s *Server) clusters(r *http.Request) (any, error) {
	ctx := r.Context()
	var in []client.ListOption
	if s.opts.ClusterSet != "" {
		in = append(in, client.InNamespace(s.opts.ClusterSet))
	}
	profiles := &cpv1alpha1.ClusterProfileList{}
	if err := s.c.List(ctx, profiles, in...); err != nil {
		return nil, err
	}
	c := s.counts.get(ctx, s.readCounts)
	offset, limit := page(r)
	return clusterPage(profiles.Items, c.heartbeats, c.works, c.worksReadable, r.URL.Query().Get("q"), offset, limit), nil
}

// counts are the columns of the clusters view read beside the profiles: the
// agents' heartbeats and the Works per cluster (every Work's metadata: read
// once per countsTTL, not at every page view or watch event of a large fleet).
type counts struct {
	heartbeats    map[string]time.Time
	works         map[string]int
	worksReadable bool
}

// countsTTL is how long the clusters view's heartbeats and Work counts are
// reused.
const countsTTL = 10 * time.Second

// cached keeps the last counts read, and when.
type cached struct {
	mu   sync.Mutex
	at   time.Time
	last counts
}

func (c *cached) get(ctx context.Context, read func(context.Context) counts) counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || time.Since(c.at) > countsTTL {
		c.last, c.at = read(ctx), time.Now()
	}
	return c.last
}

// readCounts reads the agents' Leases and the Works' metadata, each when the
// user may.
func (s *Server) readCounts(ctx context.Context) counts {
	out := counts{heartbeats: map[string]time.Time{}, works: map[string]int{}}
	if h, err := fleet.Heartbeats(ctx, s.c); err == nil {
		out.heartbeats = h
	}
	if w, err := fleet.WorkCounts(ctx, s.c); err == nil {
		out.works, out.worksReadable = w, true
	}
	return out
}

// clusterPage is the page of the clusters that match q (all when empty),
// sorted by set and name, and how many of them all are not ready.
func clusterPage(profiles []cpv1alpha1.ClusterProfile, heartbeats map[string]time.Time, works map[string]int, worksReadable bool, q string, offset, limit int) ClusterPage {
	out := ClusterPage{Items: []Cluster{}}
	var all []Cluster
	for i := range profiles {
		c := clusterOf(&profiles[i], heartbeats, works, worksReadable)
		if q != "" && !matches(c, q) {
			continue
		}
		if len(c.NotReady) > 0 {
			out.Unhealthy++
		}
		all = append(all, c)
	}
	sort.Slice(all, func(i, j int) bool {
		return cmp.Or(cmp.Compare(all[i].ClusterSet, all[j].ClusterSet), cmp.Compare(all[i].Name, all[j].Name)) < 0
	})
	out.Total, out.Items = len(all), window(all, offset, limit)
	return out
}

func clusterOf(p *cpv1alpha1.ClusterProfile, heartbeats map[string]time.Time, works map[string]int, worksReadable bool) Cluster {
	c := Cluster{Name: p.Name, ClusterSet: p.Namespace, Labels: p.Labels, Properties: map[string]string{},
		Version: p.Status.Version.Kubernetes, Works: -1, Conditions: conditionsOf(p.Status.Conditions)}
	if worksReadable {
		c.Works = works[p.Name]
	}
	if t, ok := heartbeats[p.Name]; ok {
		c.Heartbeat = t.UTC().Format(time.RFC3339)
	}
	for _, prop := range p.Status.Properties {
		c.Properties[prop.Name] = prop.Value
	}
	taints, err := scheduling.ParseTaints(p.Annotations[placementv1alpha1.TaintsAnnotation])
	if err != nil {
		c.Taints = []string{"unreadable: " + err.Error()}
	}
	for _, t := range taints {
		c.Taints = append(c.Taints, t.Key+"="+t.Value+":"+string(t.Effect))
	}
	for _, want := range []string{placementv1alpha1.ControlPlaneHealthyCondition, placementv1alpha1.AgentReachableCondition} {
		i := slices.IndexFunc(c.Conditions, func(x Condition) bool { return x.Type == want })
		status := "Unknown"
		if i >= 0 {
			status = c.Conditions[i].Status
		}
		if want == placementv1alpha1.ControlPlaneHealthyCondition {
			c.Healthy = status
		} else {
			c.Reachable = status
		}
		if status != string(metav1.ConditionTrue) {
			if i >= 0 {
				c.NotReady = append(c.NotReady, c.Conditions[i])
			} else {
				c.NotReady = append(c.NotReady, Condition{Type: want, Status: "Unknown", Message: "not reported yet"})
			}
		}
	}
	return c
}

// matches is the clusters view's filter: the name, a label or property
// (key or value), the set.
func matches(c Cluster, q string) bool {
	if contains(c.Name, q) || contains(c.ClusterSet, q) {
		return true
	}
	for _, m := range []map[string]string{c.Labels, c.Properties} {
		for k, v := range m {
			if contains(k+"="+v, q) {
				return true
			}
		}
	}
	return false
}

// Namespaces are the namespaces with Placements the user may list, and the
// console's own; Forbidden when the user may not list Placements in every
// namespace (then only the console's namespace is offered).
type Namespaces struct {
	Items     []string `json:"items"`
	Forbidden bool     `json:"forbidden,omitempty"`
}

func (s *Server) namespaces(r *http.Request) (any, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(placementv1alpha1.GroupVersion.WithKind("PlacementList"))
	out := Namespaces{Items: []string{s.opts.Namespace}}
	if err := s.c.List(r.Context(), list); err != nil {
		if apierrors.IsForbidden(err) {
			out.Forbidden = true
			return out, nil
		}
		return nil, err
	}
	for _, p := range list.Items {
		if !slices.Contains(out.Items, p.Namespace) {
			out.Items = append(out.Items, p.Namespace)
		}
	}
	slices.Sort(out.Items[1:])
	return out, nil
}
