// Package quota is what a namespace's Placements use over the fleet, as a
// FleetQuota counts it: for each workload a Work carries, its pods times what
// one pod requests and limits (cpu, memory, any extended resource), its pods,
// and the clusters used; and whether a revision's ask fits a quota's hard
// amounts beside what the namespace's other Placements use.
package quota

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/capacity"
	"github.com/lodestar-dev/lodestar/internal/dependencies"
	"github.com/lodestar-dev/lodestar/internal/division"
)

// Usage is an amount by quota resource name (requests.cpu, limits.memory,
// pods, clusters...).
type Usage map[string]resource.Quantity

// Add adds u2 to u.
func (u Usage) Add(u2 Usage) {
	for name, q := range u2 {
		sum := u[name]
		sum.Add(q)
		u[name] = sum
	}
}

// Max is, by resource, the larger of a and b.
func Max(a, b Usage) Usage {
	out := Usage{}
	for _, u := range []Usage{a, b} {
		for name, q := range u {
			if cur, ok := out[name]; !ok || q.Cmp(cur) > 0 {
				out[name] = q.DeepCopy()
			}
		}
	}
	return out
}

// Only is u restricted to the resources hard names.
func (u Usage) Only(hard map[string]resource.Quantity) Usage {
	out := Usage{}
	for name := range hard {
		out[name] = u[name].DeepCopy()
	}
	return out
}

// podsPaths is where the built-in kinds that run pods say how many: replicas
// (default 1), a Job's or a CronJob's job's parallelism; a Pod, and a
// DaemonSet runs one on each of the cluster's nodes (Of).
var podsPaths = map[schema.GroupKind][]string{
	{Kind: "ReplicationController"}:      {"spec", "replicas"},
	{Group: "apps", Kind: "Deployment"}:  {"spec", "replicas"},
	{Group: "apps", Kind: "StatefulSet"}: {"spec", "replicas"},
	{Group: "apps", Kind: "ReplicaSet"}:  {"spec", "replicas"},
	{Group: "batch", Kind: "Job"}:        {"spec", "parallelism"},
	{Group: "batch", Kind: "CronJob"}:    {"spec", "jobTemplate", "spec", "parallelism"},
}

// Uncounted is the Usage key of the workloads a quota cannot count: a custom
// kind no interpretation gives replicas, a DaemonSet on a cluster that
// reports no node count. It is no resource a quota's hard may name: a bound
// refuses them, or ignores them, by its uncounted policy.
const Uncounted = "lodestar.dev/uncounted"

// Cluster is what counting needs to know of the cluster the manifests go to.
type Cluster struct {
	// Nodes is its node count (a DaemonSet runs a pod on each); negative
	// when it reports none.
	Nodes int64
}

// NoCluster is for manifests counted once over the fleet, whatever the
// cluster (divided workloads).
var NoCluster = Cluster{Nodes: -1}

// ClusterOf reads what counting needs from a cluster's properties.
func ClusterOf(properties map[string]string) Cluster {
	n, err := strconv.ParseInt(properties[placementv1alpha1.PropertyNodeCount], 10, 64)
	if err != nil || n < 0 {
		return NoCluster
	}
	return Cluster{Nodes: n}
}

// Of is what one cluster's manifests use: each workload's pods times what one
// pod requests and limits; kinds interprets custom kinds (their replicas and
// requests per replica). A DaemonSet runs a pod on each of the cluster's
// nodes. Manifests that run nothing use nothing; the workloads that cannot be
// counted are counted under Uncounted. The error names a workload that cannot
// be read.
func Of(manifests []runtime.RawExtension, kinds division.Kinds, c Cluster) (Usage, error) {
	u := Usage{}
	for _, m := range manifests {
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(m.Raw); err != nil {
			continue
		}
		wu, err := workload(obj, kinds, c)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		u.Add(wu)
	}
	return u, nil
}

// workload is what one workload uses.
func workload(obj *unstructured.Unstructured, kinds division.Kinds, c Cluster) (Usage, error) {
	gk := obj.GroupVersionKind().GroupKind()
	specPath, ok := dependencies.PodSpecPath(gk)
	if !ok {
		var r division.Replicas
		if kinds != nil {
			r = kinds.Replicas(gk)
		}
		if r == nil {
			if custom(gk.Group) {
				return uncounted(), nil
			}
			return nil, nil
		}
		n, requests, err := r.Replicas(obj.Object)
		if err != nil {
			return nil, err
		}
		u := Usage{placementv1alpha1.QuotaPods: *resource.NewQuantity(n, resource.DecimalSI)}
		for name, q := range requests {
			u["requests."+name] = times(q, n)
		}
		return u, nil
	}
	pods := int64(1)
	if gk == daemonSets {
		if c.Nodes < 0 {
			return uncounted(), nil
		}
		pods = c.Nodes
	}
	if path, ok := podsPaths[gk]; ok {
		if v, found, err := unstructured.NestedInt64(obj.Object, path...); err == nil && found {
			pods = max(v, 0)
		}
	}
	raw, found, err := unstructured.NestedMap(obj.Object, specPath...)
	if err != nil {
		return nil, fmt.Errorf("reading the pod template: %w", err)
	}
	if !found {
		return Usage{placementv1alpha1.QuotaPods: *resource.NewQuantity(pods, resource.DecimalSI)}, nil
	}
	spec := &corev1.PodSpec{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, spec); err != nil {
		return nil, fmt.Errorf("reading the pod template: %w", err)
	}
	u := Usage{placementv1alpha1.QuotaPods: *resource.NewQuantity(pods, resource.DecimalSI)}
	for name, q := range capacity.Requests(spec) {
		u["requests."+string(name)] = times(q, pods)
	}
	for name, q := range capacity.Limits(spec) {
		u["limits."+string(name)] = times(q, pods)
	}
	return u, nil
}

// daemonSets run a pod on each node.
var daemonSets = schema.GroupKind{Group: "apps", Kind: "DaemonSet"}

// uncounted is one workload that cannot be counted.
func uncounted() Usage {
	return Usage{Uncounted: *resource.NewQuantity(1, resource.DecimalSI)}
}

// custom tells whether a group is a custom resource's (a CRD's group has a
// dot; Kubernetes' own are dotless or end in .k8s.io, the SIGs' x-k8s.io
// groups are CRDs).
func custom(group string) bool {
	return strings.Contains(group, ".") && !strings.HasSuffix(group, ".k8s.io")
}

// times is q times n, exactly, however large.
func times(q resource.Quantity, n int64) resource.Quantity {
	d := q.AsDec()
	d.Mul(d, resource.NewQuantity(n, resource.DecimalSI).AsDec())
	return *resource.NewDecimalQuantity(*d, q.Format)
}

// Violation is a resource a revision's ask takes past a quota.
type Violation struct {
	Resource          string
	Used, Asked, Hard resource.Quantity
}

func (v Violation) String() string {
	return fmt.Sprintf("%s: %s used by the other Placements it bounds and %s asked, more than the %s allowed",
		v.Resource, v.Used.String(), v.Asked.String(), v.Hard.String())
}

// Exceeds lists, by resource name, what others (the other Placements'
// use) and ask together take past hard.
func Exceeds(hard map[string]resource.Quantity, others, ask Usage) []Violation {
	var out []Violation
	for _, name := range slices.Sorted(maps.Keys(hard)) {
		used, asked := others[name], ask[name]
		total := used.DeepCopy()
		total.Add(asked)
		if total.Cmp(hard[name]) > 0 {
			out = append(out, Violation{Resource: name, Used: used, Asked: asked, Hard: hard[name]})
		}
	}
	return out
}

// Refuses says why a bound refuses what an ask cannot count ("" when it does
// not): under the Refuse policy, while hard names pods, requests or limits.
func Refuses(hard map[string]resource.Quantity, policy placementv1alpha1.UncountedPolicy, ask Usage) string {
	n := ask[Uncounted]
	if policy == placementv1alpha1.UncountedIgnore || n.Sign() <= 0 {
		return ""
	}
	if !slices.ContainsFunc(slices.Collect(maps.Keys(hard)), func(k string) bool { return k != placementv1alpha1.QuotaClusters }) {
		return ""
	}
	return fmt.Sprintf("%s workloads it cannot count (a custom kind no ResourceInterpretation gives replicas, or a DaemonSet on a cluster that reports no node count), "+
		"which it refuses (spec.uncounted: Refuse): give the kind a ResourceInterpretation with replicas, or set spec.uncounted: Ignore", n.String())
}

// Describe lists violations in one line.
func Describe(vs []Violation) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.String()
	}
	return strings.Join(parts, "; ")
}

// ClustersDigest names a set of clusters (in any order) in an annotation:
// what an admission counted.
func ClustersDigest(clusters []string) string {
	sorted := slices.Sorted(slices.Values(clusters))
	sum := sha256.Sum256([]byte(strings.Join(sorted, ",")))
	return hex.EncodeToString(sum[:12])
}
