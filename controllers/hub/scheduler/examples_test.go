package scheduler_test

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// Every example of docs/scheduling.md is accepted by the API server and scheduled
// (or, for another scheduler's, left alone), and the ones that name clusters pick
// the clusters the doc says.
func TestDocExamples(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "docs", "examples", "scheduling", "*.yaml"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(files).To(HaveLen(8))
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "scheduling.md"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	want := map[string][]string{
		"by-labels":     {"member-1"},
		"by-properties": {"member-1"},
		"by-names":      {"member-1", "member-2"},
		"pick-three":    {"member-1", "member-2", "member-3"},
		"capacity":      {"member-1", "member-3"},
		"tolerations":   {"member-1", "member-2", "member-3", "gpu"},
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			g := NewWithT(t)
			f := newFleet(t)
			healthy := map[string]metav1.ConditionStatus{"ControlPlaneHealthy": metav1.ConditionTrue}
			f.add(t, "member-1", profile{labels: map[string]string{"env": "production", "region": "eu-west", "topology.kubernetes.io/zone": "z1"}, conditions: healthy,
				properties: map[string]string{"nodes.lodestar.dev": "5", "memory.allocatable.lodestar.dev": "128Gi", "cpu.free.lodestar.dev": "16", "memory.free.lodestar.dev": "64Gi"}})
			f.add(t, "member-2", profile{labels: map[string]string{"env": "staging", "region": "us-east", "topology.kubernetes.io/zone": "z2"}, conditions: healthy,
				properties: map[string]string{"nodes.lodestar.dev": "2", "memory.allocatable.lodestar.dev": "16Gi", "cpu.free.lodestar.dev": "2", "memory.free.lodestar.dev": "4Gi"}})
			f.add(t, "member-3", profile{labels: map[string]string{"env": "production", "region": "us-east", "topology.kubernetes.io/zone": "z3"}, conditions: healthy,
				properties: map[string]string{"cpu.free.lodestar.dev": "8", "memory.free.lodestar.dev": "32Gi"}})
			f.add(t, "gpu", profile{labels: map[string]string{"env": "production", "topology.kubernetes.io/zone": "z1"},
				taints: []placementv1alpha1.Taint{{Key: "gpu", Value: "true", Effect: placementv1alpha1.TaintNoSchedule}}})
			f.setVersion(t, "member-1", "v1.36.3")

			b, err := os.ReadFile(file)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(doc)).To(ContainSubstring(string(b)), "docs/scheduling.md shows the example as it is")
			p := &placementv1alpha1.Placement{}
			g.Expect(yaml.UnmarshalStrict(b, p)).To(Succeed())
			p.Namespace = f.tenant
			g.Expect(hubCP.Client.Create(t.Context(), p)).To(Succeed())

			if p.Spec.Scheduling.SchedulerName != placementv1alpha1.DefaultSchedulerName {
				g.Consistently(func(g Gomega) {
					got := &placementv1alpha1.Placement{}
					g.Expect(hubCP.Client.Get(t.Context(), client.ObjectKeyFromObject(p), got)).To(Succeed())
					g.Expect(meta.FindStatusCondition(got.Status.Conditions, placementv1alpha1.ScheduledCondition)).To(BeNil())
				}).Should(Succeed())
				return
			}
			g.Eventually(func(g Gomega) {
				scheduled(g, t, p)
				if clusters, ok := want[p.Name]; ok {
					g.Expect(decided(g, t, p)).To(ConsistOf(clusters))
				}
			}).Should(Succeed())
		})
	}
}
