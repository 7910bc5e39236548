package integration

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/division"
)

// gpuNode adds a Ready node advertising gpus nvidia.com/gpu (and pods, no CPU
// or memory, so that the other tests' capacity does not move) to cluster:
// run by kwok on the member that has it, else Ready by hand (that member runs
// no node controller), and removed when the test ends.
func gpuNode(t *testing.T, cluster, name string, gpus int64, kwok bool) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	alloc := corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI), corev1.ResourcePods: resource.MustParse("110")}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"type": "gpu"}},
		Status: corev1.NodeStatus{Allocatable: alloc, Capacity: alloc}}
	if kwok {
		node.Annotations = map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}
	}
	c := members[cluster].Client
	g.Expect(c.Create(ctx, node)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), node) })
	if !kwok {
		node.Status = corev1.NodeStatus{Allocatable: alloc, Capacity: alloc,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now()}}}
		g.Eventually(func() error { return c.Status().Update(ctx, node) }).Should(Succeed())
	}
}

// Agents report the GPUs of their nodes, free and the most free on one node;
// a Placement asking for 4 on one node goes only where a node has them, and
// one dividing by capacity divides by the GPUs free: the docs' examples.
func TestAcceleratorsInCapacity(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	gpuNode(t, member1, "gpu-a", 4, true)
	for i := range 3 {
		gpuNode(t, member2, fmt.Sprintf("gpu-b%d", i), 2, false)
	}
	properties := func(g Gomega, cluster string) map[string]string {
		out := map[string]string{}
		for _, p := range getProfile(g, placementv1alpha1.DefaultClusterSet, cluster).Status.Properties {
			out[p.Name] = p.Value
		}
		return out
	}
	g.Eventually(func(g Gomega) {
		g.Expect(properties(g, member1)).To(And(HaveKeyWithValue("nvidia.com/gpu.free.lodestar.dev", "4"),
			HaveKeyWithValue("nvidia.com/gpu.largestfree.lodestar.dev", "4"), HaveKeyWithValue("nvidia.com/gpu.allocatable.lodestar.dev", "4")))
		g.Expect(properties(g, member2)).To(And(HaveKeyWithValue("nvidia.com/gpu.free.lodestar.dev", "6"),
			HaveKeyWithValue("nvidia.com/gpu.largestfree.lodestar.dev", "2")))
	}).Should(Succeed())

	files, doc := examples(t, "accelerators", 2)
	ns := newNamespace(t)
	placementsGoAtEnd(t, ns)
	for _, file := range files {
		for _, obj := range exampleObjects(t, file, doc, ns) {
			g.Expect(hubCP.Client.Create(ctx, obj)).To(Succeed(), "%s %s", obj.GetKind(), obj.GetName())
		}
	}

	// 4 GPUs on one node: member-1 has them, member-2 has 6 over three nodes.
	g.Eventually(func(g Gomega) {
		p := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "trainer"}, p)).To(Succeed())
		g.Expect(p.Status.Scheduling).NotTo(BeNil())
		g.Expect(p.Status.Scheduling.Clusters).To(ContainElement(And(HaveField("Name", member2),
			HaveField("Reason", placementv1alpha1.ExclusionInsufficientCapacity),
			HaveField("Verdicts", ContainElement(HaveField("Detail", "nvidia.com/gpu on one node free 2 < 4 asked"))))))
		g.Expect(members[member1].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "trainer-settings"}, &corev1.ConfigMap{})).To(Succeed())
	}).Should(Succeed())
	g.Expect(members[member2].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "trainer-settings"}, &corev1.ConfigMap{})).NotTo(Succeed())

	// 5 pods of one GPU, divided by the GPUs free: 4 and 6.
	want, err := division.Divide(5, []division.Cluster{{Name: member1, Weight: 4}, {Name: member2, Weight: 6}}, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		for cluster, share := range want {
			d := &appsv1.Deployment{}
			g.Expect(members[cluster].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "inference"}, d)).To(Succeed())
			g.Expect(d.Spec.Replicas).To(HaveValue(BeEquivalentTo(share)), "the share of %s", cluster)
		}
		p := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "inference"}, p)).To(Succeed())
		g.Expect(p.Status.Clusters).To(ContainElement(And(HaveField("Name", member2),
			HaveField("Shares", ConsistOf(HaveField("Reason", HavePrefix("room for 6 more pods")))))))
	}).Should(Succeed())
}
