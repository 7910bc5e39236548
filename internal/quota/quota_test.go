package quota

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/interpretation"
)

func manifests(t *testing.T, docs ...string) []runtime.RawExtension {
	t.Helper()
	out := make([]runtime.RawExtension, len(docs))
	for i, d := range docs {
		b, err := yaml.YAMLToJSON([]byte(d))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = runtime.RawExtension{Raw: b}
	}
	return out
}

func expectUsage(g Gomega, got Usage, want map[string]string) {
	g.Expect(got).To(HaveLen(len(want)), "%v", got)
	for name, w := range want {
		q := got[name]
		g.Expect(q.Cmp(resource.MustParse(w))).To(BeZero(), "%s: %s, want %s", name, q.String(), w)
	}
}

func TestOfWorkloads(t *testing.T) {
	g := NewWithT(t)
	u, err := Of(manifests(t,
		`{apiVersion: apps/v1, kind: Deployment, metadata: {name: web}, spec: {replicas: 3, template: {spec: {
		  initContainers: [{name: i, image: i, resources: {requests: {cpu: "2"}}}],
		  containers: [{name: a, image: a, resources: {requests: {cpu: 500m, memory: 1Gi}, limits: {memory: 2Gi, nvidia.com/gpu: "1"}}},
		               {name: b, image: b, resources: {requests: {cpu: 250m}}}]}}}}`,
		`{apiVersion: batch/v1, kind: Job, metadata: {name: j}, spec: {parallelism: 2, template: {spec: {containers: [{name: c, image: c, resources: {requests: {cpu: "1"}}}]}}}}`,
		`{apiVersion: apps/v1, kind: DaemonSet, metadata: {name: d}, spec: {template: {spec: {containers: [{name: c, image: c, resources: {requests: {cpu: 100m}}}]}}}}`,
		`{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, image: c, resources: {requests: {memory: 1Gi}}}]}}`,
		`{apiVersion: batch/v1, kind: CronJob, metadata: {name: cj}, spec: {schedule: "* * * * *", jobTemplate: {spec: {template: {spec: {containers: [{name: c, image: c}]}}}}}}`,
		`{apiVersion: v1, kind: ConfigMap, metadata: {name: c}, data: {a: b}}`,
		`{apiVersion: apps/v1, kind: StatefulSet, metadata: {name: s}, spec: {replicas: 0, template: {spec: {containers: [{name: c, image: c, resources: {requests: {cpu: "8"}}}]}}}}`,
	), nil, ClusterOf(map[string]string{placementv1alpha1.PropertyNodeCount: "4"}))
	g.Expect(err).NotTo(HaveOccurred())
	// web: 3 pods × (init 2 > 750m: cpu 2, memory 1Gi, limits memory 2Gi, gpu 1);
	// job: 2 × 1; daemonset one on each of 4 nodes × 100m; pod 1Gi; cronjob 1 pod; scaled-to-zero set nothing.
	expectUsage(g, u, map[string]string{
		"pods": "11", "requests.cpu": "8400m", "requests.memory": "4Gi", "limits.memory": "6Gi", "limits.nvidia.com/gpu": "3",
	})
}

// A tenant's extreme values count exactly, without overflow or panic.
func TestOfExtremes(t *testing.T) {
	g := NewWithT(t)
	u, err := Of(manifests(t,
		`{apiVersion: apps/v1, kind: Deployment, metadata: {name: huge}, spec: {replicas: 2147483647, template: {spec: {containers: [{name: c, image: c, resources: {requests: {cpu: "1e18"}}}]}}}}`,
	), nil, NoCluster)
	g.Expect(err).NotTo(HaveOccurred())
	expectUsage(g, u, map[string]string{"pods": "2147483647", "requests.cpu": "2147483647e18"})
	vs := Exceeds(map[string]resource.Quantity{"requests.cpu": resource.MustParse("100")}, Usage{}, u)
	g.Expect(vs).To(HaveLen(1))
	g.Expect(Describe(vs)).To(ContainSubstring("requests.cpu"))

	_, err = Of(manifests(t, `{apiVersion: apps/v1, kind: Deployment, metadata: {name: bad}, spec: {replicas: 1, template: {spec: {containers: 7}}}}`), nil, NoCluster)
	g.Expect(err).To(MatchError(ContainSubstring("Deployment bad")))
	u, err = Of(manifests(t, `{apiVersion: apps/v1, kind: Deployment, metadata: {name: neg}, spec: {replicas: -5, template: {spec: {containers: [{name: c, image: c, resources: {requests: {cpu: "1"}}}]}}}}`), nil, NoCluster)
	g.Expect(err).NotTo(HaveOccurred())
	expectUsage(g, u, map[string]string{"pods": "0", "requests.cpu": "0"})
}

func TestOfAnInterpretedKind(t *testing.T) {
	g := NewWithT(t)
	ri := placementv1alpha1.ResourceInterpretation{}
	ri.Name = "widgets"
	ri.Spec.Target = placementv1alpha1.InterpretedKind{Group: "example.com", Kind: "Widget"}
	ri.Spec.Replicas = &placementv1alpha1.ReplicasInterpretation{Path: "/spec/size", Requests: "{'cpu': '250m', 'nvidia.com/gpu': 1}"}
	set := (&interpretation.Cache{}).Set([]placementv1alpha1.ResourceInterpretation{ri})
	u, err := Of(manifests(t, `{apiVersion: example.com/v1, kind: Widget, metadata: {name: w}, spec: {size: 4}}`), set, NoCluster)
	g.Expect(err).NotTo(HaveOccurred())
	expectUsage(g, u, map[string]string{"pods": "4", "requests.cpu": "1", "requests.nvidia.com/gpu": "4"})
}

// What cannot be counted is counted as such: a custom kind no interpretation
// gives replicas, a DaemonSet on a cluster that reports no node count. A
// bound of pods, requests or limits refuses it unless told to ignore it;
// Kubernetes' own kinds that run no pods count nothing.
func TestWhatCannotBeCountedIsRefused(t *testing.T) {
	g := NewWithT(t)
	u, err := Of(manifests(t,
		`{apiVersion: example.com/v1, kind: Widget, metadata: {name: w}, spec: {size: 4}}`,
		`{apiVersion: kueue.x-k8s.io/v1beta1, kind: Workload, metadata: {name: w}}`,
		`{apiVersion: apps/v1, kind: DaemonSet, metadata: {name: d}, spec: {template: {spec: {containers: [{name: c, image: c}]}}}}`,
		`{apiVersion: networking.k8s.io/v1, kind: Ingress, metadata: {name: i}}`,
		`{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}`,
	), nil, ClusterOf(map[string]string{placementv1alpha1.PropertyNodeCount: "many"}))
	g.Expect(err).NotTo(HaveOccurred())
	expectUsage(g, u, map[string]string{Uncounted: "3"})
	q := resource.MustParse
	g.Expect(Refuses(map[string]resource.Quantity{"pods": q("10")}, placementv1alpha1.UncountedRefuse, u)).To(
		ContainSubstring("3 workloads it cannot count"))
	g.Expect(Refuses(map[string]resource.Quantity{"pods": q("10")}, "", u)).NotTo(BeEmpty(), "Refuse is the default")
	g.Expect(Refuses(map[string]resource.Quantity{"pods": q("10")}, placementv1alpha1.UncountedIgnore, u)).To(BeEmpty())
	g.Expect(Refuses(map[string]resource.Quantity{"clusters": q("2")}, placementv1alpha1.UncountedRefuse, u)).To(BeEmpty(), "clusters are counted whatever runs")
	g.Expect(Refuses(map[string]resource.Quantity{"pods": q("10")}, placementv1alpha1.UncountedRefuse, Usage{"pods": q("1")})).To(BeEmpty())
	g.Expect(Exceeds(map[string]resource.Quantity{"pods": q("10")}, Usage{}, u)).To(BeEmpty(), "not a resource of hard")
}

func TestExceeds(t *testing.T) {
	g := NewWithT(t)
	q := resource.MustParse
	hard := map[string]resource.Quantity{"requests.cpu": q("4"), "pods": q("10")}
	g.Expect(Exceeds(hard, Usage{"requests.cpu": q("3")}, Usage{"requests.cpu": q("1"), "pods": q("10")})).To(BeEmpty(), "exactly at hard fits")
	vs := Exceeds(hard, Usage{"requests.cpu": q("3")}, Usage{"requests.cpu": q("1500m")})
	g.Expect(vs).To(HaveLen(1))
	g.Expect(vs[0].String()).To(Equal("requests.cpu: 3 used by the other Placements it bounds and 1500m asked, more than the 4 allowed"))
	g.Expect(Max(Usage{"a": q("1"), "b": q("5")}, Usage{"a": q("2")})).To(HaveKeyWithValue("a", q("2")))
}
