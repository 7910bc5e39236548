package capacity

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name string, ready bool, alloc corev1.ResourceList) corev1.Node {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{
		Allocatable: alloc, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}}}
}

func list(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func pod(nodeName string, phase corev1.PodPhase, requests ...corev1.ResourceList) *corev1.Pod {
	p := &corev1.Pod{Spec: corev1.PodSpec{NodeName: nodeName}, Status: corev1.PodStatus{Phase: phase}}
	for _, r := range requests {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Resources: corev1.ResourceRequirements{Requests: r}})
	}
	return p
}

func TestExtendedResources(t *testing.T) {
	g := NewWithT(t)
	cordoned := node("cordoned", true, list("cpu", "64", "nvidia.com/gpu", "8"))
	cordoned.Spec.Unschedulable = true
	tally := NewTally([]corev1.Node{
		node("a", true, list("cpu", "8", "memory", "32Gi", "pods", "110", "nvidia.com/gpu", "4", "example.com/fpga", "1", "hugepages-2Mi", "1Gi")),
		node("b", true, list("cpu", "8", "memory", "32Gi", "nvidia.com/gpu", "2", "amd.com/gpu", "1")),
		node("down", false, list("cpu", "8", "nvidia.com/gpu", "8")),
		cordoned,
	})
	tally.AddPod(pod("a", corev1.PodRunning, list("cpu", "1", "nvidia.com/gpu", "1"), list("cpu", "500m")))
	tally.AddPod(pod("b", corev1.PodPending, list("nvidia.com/gpu", "2")))
	tally.AddPod(pod("a", corev1.PodSucceeded, list("nvidia.com/gpu", "3")))
	tally.AddPod(pod("down", corev1.PodRunning, list("nvidia.com/gpu", "3")))
	tally.AddPod(pod("", corev1.PodPending, list("nvidia.com/gpu", "3")))
	// An init container asking more than the containers counts as it.
	initPod := pod("a", corev1.PodRunning, list("cpu", "100m"))
	initPod.Spec.InitContainers = []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: list("cpu", "2", "example.com/fpga", "1")}}}
	tally.AddPod(initPod)

	g.Expect(tally.Properties()).To(Equal(map[string]string{
		"nodes.lodestar.dev":              "2",
		"cpu.allocatable.lodestar.dev":    "16",
		"cpu.free.lodestar.dev":           "12500m",
		"memory.allocatable.lodestar.dev": "64Gi",
		"memory.free.lodestar.dev":        "64Gi",

		"nvidia.com/gpu.allocatable.lodestar.dev":   "6",
		"nvidia.com/gpu.free.lodestar.dev":          "3",
		"nvidia.com/gpu.largestfree.lodestar.dev":   "3",
		"amd.com/gpu.allocatable.lodestar.dev":      "1",
		"amd.com/gpu.free.lodestar.dev":             "1",
		"amd.com/gpu.largestfree.lodestar.dev":      "1",
		"example.com/fpga.allocatable.lodestar.dev": "1",
		"example.com/fpga.free.lodestar.dev":        "0",
		"example.com/fpga.largestfree.lodestar.dev": "0",
	}), "ready, schedulable nodes only; finished and unbound pods take nothing; hugepages and pods are not extended resources")
}

// More pods bound than a node advertises read 0 free, not a negative amount;
// a node advertising hundreds of resources is reported for MaxExtended.
func TestExtremes(t *testing.T) {
	g := NewWithT(t)
	many := list("cpu", "1")
	for i := range 200 {
		many[corev1.ResourceName("example.com/r"+string(rune('a'+i%26))+string(rune('a'+i/26)))] = resource.MustParse("1")
	}
	tally := NewTally([]corev1.Node{node("a", true, many)})
	tally.AddPod(pod("a", corev1.PodRunning, list("cpu", "4")))
	props := tally.Properties()
	g.Expect(props).To(HaveKeyWithValue("cpu.free.lodestar.dev", "0"))
	g.Expect(props).To(HaveLen(5 + 3*MaxExtended))
}

func TestIsExtended(t *testing.T) {
	g := NewWithT(t)
	for name, want := range map[corev1.ResourceName]bool{
		"nvidia.com/gpu": true, "amd.com/gpu": true, "example.com/fpga": true,
		"cpu": false, "memory": false, "pods": false, "hugepages-2Mi": false, "ephemeral-storage": false,
		"kubernetes.io/batch-cpu": false, "node.kubernetes.io/x": false, "requests.nvidia.com/gpu": false,
	} {
		g.Expect(IsExtended(name)).To(Equal(want), string(name))
	}
}
