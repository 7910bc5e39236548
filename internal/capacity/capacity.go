// Package capacity is what a member's nodes can still take, as its agent
// reports it in the ClusterProfile's properties: CPU and memory allocatable
// and free over the ready, schedulable nodes, and for each extended resource
// the nodes advertise (nvidia.com/gpu, amd.com/gpu, any <domain>/<name>) the
// allocatable, the free and the largest free on one node. Free is allocatable
// less the requests of the pods on those nodes that have not finished.
package capacity

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// MaxExtended bounds the extended resources reported (the first by name): a
// ClusterProfile's properties stay small whatever a node advertises.
const MaxExtended = 32

// IsExtended tells whether a resource is an extended one: <domain>/<name>
// outside kubernetes.io, not a quota's requests.* name.
func IsExtended(name corev1.ResourceName) bool {
	n := string(name)
	return strings.Contains(n, "/") && !strings.HasPrefix(n, "kubernetes.io/") && !strings.Contains(n, ".kubernetes.io/") &&
		!strings.HasPrefix(n, "requests.") && !strings.HasPrefix(n, "limits.")
}

// Tally adds up the nodes' capacity and the pods' requests.
type Tally struct {
	// free is each usable node's free amount, by resource.
	free  map[string]corev1.ResourceList
	alloc corev1.ResourceList
}

// NewTally starts from the allocatable amounts of the ready, schedulable nodes.
func NewTally(nodes []corev1.Node) *Tally {
	t := &Tally{free: map[string]corev1.ResourceList{}, alloc: corev1.ResourceList{}}
	for i := range nodes {
		n := &nodes[i]
		if n.Spec.Unschedulable || !ready(n) {
			continue
		}
		free := corev1.ResourceList{}
		for name, q := range n.Status.Allocatable {
			if name != corev1.ResourceCPU && name != corev1.ResourceMemory && !IsExtended(name) {
				continue
			}
			free[name] = q.DeepCopy()
			sum := t.alloc[name]
			sum.Add(q)
			t.alloc[name] = sum
		}
		t.free[n.Name] = free
	}
	return t
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// AddPod takes a pod's requests off its node's free amounts (nothing for a
// pod that finished or runs on a node not counted): its containers' requests,
// or its largest init container's when larger, as kube-scheduler counts them.
func (t *Tally) AddPod(p *corev1.Pod) {
	free, ok := t.free[p.Spec.NodeName]
	if !ok || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return
	}
	for name, q := range Requests(&p.Spec) {
		if f, ok := free[name]; ok {
			f.Sub(q)
			free[name] = f
		}
	}
}

// Requests is what a pod spec requests: the sum of its containers' requests,
// or for each resource its largest init container's when larger.
func Requests(spec *corev1.PodSpec) corev1.ResourceList {
	return perPod(spec, func(r corev1.ResourceRequirements) corev1.ResourceList { return r.Requests })
}

// Limits is what a pod spec limits, counted as Requests counts requests.
func Limits(spec *corev1.PodSpec) corev1.ResourceList {
	return perPod(spec, func(r corev1.ResourceRequirements) corev1.ResourceList { return r.Limits })
}

// perPod is one pod's amounts of pick, as kube-scheduler counts requests.
func perPod(spec *corev1.PodSpec, pick func(corev1.ResourceRequirements) corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, c := range spec.Containers {
		for name, q := range pick(c.Resources) {
			sum := out[name]
			sum.Add(q)
			out[name] = sum
		}
	}
	for _, c := range spec.InitContainers {
		for name, q := range pick(c.Resources) {
			if cur, ok := out[name]; !ok || q.Cmp(cur) > 0 {
				out[name] = q.DeepCopy()
			}
		}
	}
	return out
}

// Properties are the ClusterProfile properties of the tally: node count, CPU
// and memory allocatable and free (reported even when zero), and for each
// extended resource (at most MaxExtended) its allocatable, free and largest
// free on one node. A negative free amount (pods bound past what a node
// advertises) reads 0.
func (t *Tally) Properties() map[string]string {
	total, largest := corev1.ResourceList{}, corev1.ResourceList{}
	for _, free := range t.free {
		for name, q := range free {
			if q.Sign() < 0 {
				q = resource.Quantity{}
			}
			sum := total[name]
			sum.Add(q)
			total[name] = sum
			if cur, ok := largest[name]; !ok || q.Cmp(cur) > 0 {
				largest[name] = q.DeepCopy()
			}
		}
	}
	str := func(l corev1.ResourceList, name corev1.ResourceName) string {
		q := l[name]
		return q.String()
	}
	out := map[string]string{
		placementv1alpha1.PropertyNodeCount:         fmt.Sprint(len(t.free)),
		placementv1alpha1.PropertyCPUAllocatable:    str(t.alloc, corev1.ResourceCPU),
		placementv1alpha1.PropertyCPUFree:           str(total, corev1.ResourceCPU),
		placementv1alpha1.PropertyMemoryAllocatable: str(t.alloc, corev1.ResourceMemory),
		placementv1alpha1.PropertyMemoryFree:        str(total, corev1.ResourceMemory),
	}
	for _, name := range extended(t.alloc) {
		out[string(name)+placementv1alpha1.ResourceAllocatableSuffix] = str(t.alloc, name)
		out[string(name)+placementv1alpha1.ResourceFreeSuffix] = str(total, name)
		out[string(name)+placementv1alpha1.ResourceLargestFreeSuffix] = str(largest, name)
	}
	return out
}

// extended are the extended resources of l, sorted, at most MaxExtended.
func extended(l corev1.ResourceList) []corev1.ResourceName {
	var names []corev1.ResourceName
	for name := range l {
		if IsExtended(name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	if len(names) > MaxExtended {
		names = names[:MaxExtended]
	}
	return names
}
