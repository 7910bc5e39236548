package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/agentidentity"
	"github.com/lodestar-dev/lodestar/internal/fleet"
)

// renderFixture makes a namespace with a Deployment and a ConfigMap, a Placement
// of both with overrides, and two clusters: edge-eu (region eu, tier edge) and
// plain (no labels).
func renderFixture(t *testing.T) string {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	ns := "render-" + rand.String(5)
	g.Expect(hubCP.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	g.Expect(fleet.BindClusterSet(ctx, hubCP.Client, ns, placementv1alpha1.DefaultClusterSet)).To(Succeed())
	labels := map[string]string{"app": "web"}
	g.Expect(hubCP.Client.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}}}},
	})).To(Succeed())
	g.Expect(hubCP.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-config", Namespace: ns},
		Data: map[string]string{"greeting": "hello"}})).To(Succeed())
	g.Expect(hubCP.Client.Create(ctx, &placementv1alpha1.Placement{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{
				{Group: "apps", Version: "v1", Kind: "Deployment", Name: "web"},
				{Version: "v1", Kind: "ConfigMap", Name: "web-config"},
			},
			Scheduling: placementv1alpha1.Scheduling{ClusterSelector: &metav1.LabelSelector{}},
			Overrides: []placementv1alpha1.Override{
				{Name: "replicas", Targets: []placementv1alpha1.OverrideTarget{{Group: "apps", Kind: "Deployment"}},
					JSONPatch: []placementv1alpha1.JSONPatchOperation{{Op: "replace", Path: "/spec/replicas",
						ValueExpression: "'region' in cluster.labels && cluster.labels['region'] == 'eu' ? 2 : 1"}}},
				{Name: "mirror", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "edge"}},
					Image: &placementv1alpha1.ImageOverride{Registry: "mirror.example"}},
			},
		},
	})).To(Succeed())
	for name, l := range map[string]map[string]string{"edge-eu": {"region": "eu", "tier": "edge"}, "plain": nil} {
		if _, err := fleet.Join(ctx, hubCP.Config, hubCP.Client, fleet.JoinOptions{Name: name, Labels: l, ClusterID: rand.String(8), TokenTTL: agentidentity.DefaultTokenTTL}); err != nil {
			g.Expect(err).To(MatchError(ContainSubstring("already")), "joining %s", name)
		}
	}
	return ns
}

func TestRenderPrintsWhatAClusterGets(t *testing.T) {
	g := NewWithT(t)
	ns := renderFixture(t)

	out, stderr, err := kubectlLodestar(t, "render", "web", "-n", ns, "--cluster", "edge-eu", "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	var list struct {
		Items []map[string]any `json:"items"`
	}
	g.Expect(json.Unmarshal([]byte(out), &list)).To(Succeed())
	g.Expect(list.Items).To(HaveLen(2))
	deploy := map[string]any{}
	for _, it := range list.Items {
		if it["kind"] == "Deployment" {
			deploy = it
		}
	}
	spec := deploy["spec"].(map[string]any)
	g.Expect(spec["replicas"]).To(BeEquivalentTo(2), "a number, not a string")
	container := spec["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	g.Expect(container["image"]).To(Equal("mirror.example/nginx:1.27"))
	g.Expect(deploy["metadata"]).NotTo(HaveKey("uid"), "rendered as the Work carries it")
	g.Expect(stderr).To(ContainSubstring("# rule replicas: changed spec.replicas on Deployment " + ns + "/web"))
	g.Expect(stderr).To(ContainSubstring("# rule mirror: changed spec.template.spec.containers[0].image on Deployment " + ns + "/web"))

	out, _, err = kubectlLodestar(t, "render", "web", "-n", ns, "--cluster", "plain")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("replicas: 1\n"))
	g.Expect(out).To(ContainSubstring("image: nginx:1.27\n"))
	g.Expect(out).To(ContainSubstring("kind: ConfigMap\n"))

	out, _, err = kubectlLodestar(t, "render", "web", "-n", ns, "--cluster", "edge-eu", "-o", "diff")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("--- Deployment " + ns + "/web (hub)\n+++ Deployment " + ns + "/web (cluster edge-eu)\n"))
	g.Expect(out).To(ContainSubstring("\n-  replicas: 1\n+  replicas: 2\n"))
	g.Expect(out).To(ContainSubstring("\n-      - image: nginx:1.27\n+      - image: mirror.example/nginx:1.27\n"))
	g.Expect(out).NotTo(ContainSubstring("ConfigMap"), "no override changes the ConfigMap")
}

// A file previews a change before it is applied: its Placement and objects stand
// in for the hub's.
func TestRenderAFileBeforeItIsApplied(t *testing.T) {
	g := NewWithT(t)
	ns := renderFixture(t)
	file := filepath.Join(t.TempDir(), "change.yaml")
	g.Expect(os.WriteFile(file, []byte(`apiVersion: placement.lodestar.dev/v1alpha1
kind: Placement
metadata:
  name: web
spec:
  resourceSelectors:
    - version: v1
      kind: ConfigMap
      name: web-config
  scheduling:
    clusterSelector: {}
  overrides:
    - name: greet-by-region
      mergePatch:
        patchExpression: "{'data': {'greeting': 'hello ' + cluster.labels['region']}}"
    - name: drop-on-edge
      clusterSelector:
        matchLabels: {tier: edge}
      targets: [{kind: ConfigMap, name: other}]
      delete: true
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
data:
  greeting: hi
  extra: from the file
`), 0o600)).To(Succeed())
	out, stderr, err := kubectlLodestar(t, "render", "web", "-n", ns, "--cluster", "edge-eu", "-f", file)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("extra: from the file\n"))
	g.Expect(out).To(ContainSubstring("greeting: hello eu\n"))
	g.Expect(out).NotTo(ContainSubstring("kind: Deployment"), "the file's Placement selects only the ConfigMap")
	g.Expect(stderr).To(ContainSubstring("# rule greet-by-region: changed data.greeting on ConfigMap " + ns + "/web-config"))

	// The same file fails on a cluster without the label, naming the rule.
	_, _, err = kubectlLodestar(t, "render", "web", "-n", ns, "--cluster", "plain", "-f", file)
	g.Expect(err).To(MatchError(ContainSubstring("rule greet-by-region, mergePatch patchExpression: no such key: region")))
}

func TestRenderRefuses(t *testing.T) {
	g := NewWithT(t)
	ns := renderFixture(t)
	_, _, err := kubectlLodestar(t, "render", "web", "-n", ns)
	g.Expect(err).To(MatchError(ContainSubstring("render needs --cluster")))
	_, _, err = kubectlLodestar(t, "render", "web", "-n", ns, "--cluster", "nowhere")
	g.Expect(err).To(MatchError(ContainSubstring("cluster nowhere has no ClusterProfile in the cluster sets namespace " + ns + " may use (lodestar-fleet)")))
	_, _, err = kubectlLodestar(t, "render", "web", "-n", ns, "--cluster", "plain", "-o", "table")
	g.Expect(err).To(MatchError(ContainSubstring(`--output "table"`)))

	// Once the Placement is scheduled, a cluster it does not choose has no Work
	// to preview.
	p := &placementv1alpha1.Placement{}
	g.Expect(hubCP.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web"}, p)).To(Succeed())
	g.Expect(hubCP.Client.Create(t.Context(), &cpv1alpha1.PlacementDecision{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: ns, Labels: map[string]string{cpv1alpha1.PlacementKeyLabel: "web"}},
		Decisions: []cpv1alpha1.ClusterDecision{{ClusterProfileRef: cpv1alpha1.ClusterProfileReference{
			Namespace: placementv1alpha1.DefaultClusterSet, Name: "edge-eu"}, Reason: "chosen"}},
	})).To(Succeed())
	_, _, err = kubectlLodestar(t, "render", "web", "-n", ns, "--cluster", "plain")
	g.Expect(err).To(MatchError(ContainSubstring("placement " + ns + "/web does not choose cluster plain (it chooses 1: edge-eu)")))
	_, _, err = kubectlLodestar(t, "render", "web", "-n", ns, "--cluster", "edge-eu")
	g.Expect(err).NotTo(HaveOccurred())

	// A rule the API server cannot check, refused by the same compilation the
	// work generator runs.
	file := filepath.Join(t.TempDir(), "bad.yaml")
	bad, err := json.Marshal(map[string]any{"apiVersion": "placement.lodestar.dev/v1alpha1", "kind": "Placement", "metadata": map[string]any{"name": "web"},
		"spec": placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{{Version: "v1", Kind: "ConfigMap"}},
			Overrides: []placementv1alpha1.Override{{Name: "both", JSONPatch: []placementv1alpha1.JSONPatchOperation{
				{Op: "add", Path: "/data/x", Value: &placementv1alpha1.JSON{Raw: []byte(`"a"`)}, ValueExpression: "'b'"}}}},
		}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(file, bad, 0o600)).To(Succeed())
	_, _, err = kubectlLodestar(t, "render", "web", "-n", ns, "--cluster", "plain", "-f", file)
	g.Expect(err).To(MatchError(ContainSubstring("spec.overrides[0] (both): jsonPatch[0]: add takes exactly one of value and valueExpression")))
}

// A Deployment requesting cpu 1e16 under method Capacity is rendered, its
// replicas not divided and the reason given: on earlier mains the division
// divided by zero and render panicked.
func TestRenderAbsurdRequests(t *testing.T) {
	g := NewWithT(t)
	ns := renderFixture(t)
	file := filepath.Join(t.TempDir(), "greedy.yaml")
	g.Expect(os.WriteFile(file, []byte(`apiVersion: placement.lodestar.dev/v1alpha1
kind: Placement
metadata:
  name: web
spec:
  resourceSelectors:
    - group: apps
      version: v1
      kind: Deployment
      name: greedy
  scheduling:
    clusterSelector: {}
    replicas:
      method: Capacity
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: greedy
spec:
  replicas: 3
  selector:
    matchLabels: {app: greedy}
  template:
    metadata:
      labels: {app: greedy}
    spec:
      containers:
        - name: app
          image: nginx:1.27
          resources:
            requests: {cpu: "1e16"}
`), 0o600)).To(Succeed())
	_, stderr, err := kubectlLodestar(t, "render", "web", "-n", ns, "--cluster", "edge-eu", "-f", file)
	g.Expect(err).NotTo(HaveOccurred(), stderr)
	g.Expect(stderr).To(ContainSubstring("more than a division takes"))
}
