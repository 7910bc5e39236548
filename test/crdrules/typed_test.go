package crdrules

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/lodestar-dev/lodestar/config"
)

// minimal are the smallest objects of Lodestar's kinds a user writes: every
// optional struct left out, which the Go types cannot say (a struct field
// always goes out, as {}).
var minimal = []string{`
apiVersion: placement.lodestar.dev/v1alpha1
kind: Placement
metadata: {name: minimal}
spec:
  resourceSelectors: [{version: v1, kind: ConfigMap}]
`, `
apiVersion: placement.lodestar.dev/v1alpha1
kind: ClusterPlacement
metadata: {name: minimal}
spec:
  resourceSelectors: [{group: rbac.authorization.k8s.io, version: v1, kind: ClusterRole}]
`, `
apiVersion: placement.lodestar.dev/v1alpha1
kind: Placement
metadata: {name: minimal-rolling}
spec:
  resourceSelectors: [{version: v1, kind: ConfigMap}]
  strategy: {type: Rolling, rolling: {}}
  reporting: {reflection: Aggregate}
  scheduling: {numberOfClusters: 2, replicas: {}, failover: {}, topologySpread: {topologyKey: region}}
  applyStrategy: {}
  services: {}
`, `
apiVersion: placement.lodestar.dev/v1alpha1
kind: Placement
metadata: {name: minimal-staged}
spec:
  resourceSelectors: [{version: v1, kind: ConfigMap}]
  strategy: {type: Staged, stages: [{name: canary, clusterSelector: {}}]}
`, `
apiVersion: placement.lodestar.dev/v1alpha1
kind: ClusterSetBinding
metadata: {name: default}
spec: {clusterSet: default}
`}

// Every object of Lodestar's kinds that stands for user input (the examples of
// docs/examples, the samples of config/samples, and the minimal objects above)
// is stored the same whether it is created from its YAML, as kubectl sends it,
// or from the Go struct the YAML decodes to, as the tests build it. So the
// CRDs' defaults land on both alike, and a test written with Go structs shows
// what a user's YAML does. The ClusterPlacement that never got a status was
// the counterexample: its carrier, made from the Go struct, was defaulted
// where the ClusterPlacement was not.
func TestTypedObjectsAreStoredAsYAML(t *testing.T) {
	docs := slices.Clone(minimal)
	for _, pattern := range []string{"../../docs/examples/*/*.yaml", "../../config/samples/*.yaml"} {
		files, err := filepath.Glob(pattern)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		for _, f := range files {
			b, err := os.ReadFile(f)
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
			docs = append(docs, strings.Split(string(b), "\n---\n")...)
		}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "typed-" + rand.String(5)}}
	NewWithT(t).Expect(apiServer.Client.Create(t.Context(), ns)).To(Succeed())
	compared := map[string]int{}
	for i, doc := range docs {
		u := &unstructured.Unstructured{}
		NewWithT(t).Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed(), doc)
		if !slices.Contains(groups, u.GroupVersionKind().Group) {
			continue
		}
		compared[u.GetKind()]++
		t.Run(u.GetKind()+"/"+u.GetName(), func(t *testing.T) {
			g := NewWithT(t)
			typed, err := apiServer.Client.Scheme().New(u.GroupVersionKind())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, typed)).To(Succeed())
			fromTyped := typed.(client.Object)
			name := u.GetName()
			if u.GetKind() == "ClusterSetBinding" {
				// Its name is its set's; two cannot share a namespace.
				for _, obj := range []client.Object{u, fromTyped} {
					other := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d-%s", ns.Name, i, rand.String(3))}}
					g.Expect(apiServer.Client.Create(t.Context(), other)).To(Succeed())
					obj.SetNamespace(other.Name)
				}
			} else {
				u.SetName(fmt.Sprintf("%s-%d-yaml", name, i))
				fromTyped.SetName(fmt.Sprintf("%s-%d-typed", name, i))
				if namespaced, _ := apiServer.Client.IsObjectNamespaced(u); namespaced {
					u.SetNamespace(ns.Name)
					fromTyped.SetNamespace(ns.Name)
				}
			}
			g.Expect(apiServer.Client.Create(t.Context(), u)).To(Succeed())
			g.Expect(apiServer.Client.Create(t.Context(), fromTyped)).To(Succeed())
			t.Cleanup(func() {
				_ = apiServer.Client.Delete(context.Background(), u)
				_ = apiServer.Client.Delete(context.Background(), fromTyped)
			})
			stored := func(obj client.Object) map[string]any {
				out := &unstructured.Unstructured{}
				out.SetGroupVersionKind(u.GroupVersionKind())
				g.Expect(apiServer.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), out)).To(Succeed())
				delete(out.Object, "metadata")
				delete(out.Object, "status")
				return out.Object
			}
			fromYAML, fromGo := stored(u), stored(fromTyped)
			g.Expect(equality.Semantic.DeepEqual(fromYAML, fromGo)).To(BeTrue(),
				"stored from YAML:\n%s\nstored from the Go struct:\n%s", dump(fromYAML), dump(fromGo))
		})
	}
	// The kinds a user writes are all here.
	NewWithT(t).Expect(compared).To(HaveKey("Placement"))
	NewWithT(t).Expect(compared).To(HaveKey("ClusterPlacement"))
	NewWithT(t).Expect(compared).To(HaveKey("ClusterSetBinding"))
	NewWithT(t).Expect(compared).To(HaveKey("MemberAccessGrant"))
}

// dump is obj as YAML, for a failure message.
func dump(obj map[string]any) string {
	b, _ := yaml.Marshal(obj)
	return string(b)
}

// A ClusterPlacement is carried out by a Placement of the same spec: both CRDs
// say the same of that spec (its fields, defaults and rules), so the carrier
// made from a ClusterPlacement's spec is stored as the ClusterPlacement is.
func TestClusterPlacementSpecIsThePlacements(t *testing.T) {
	g := NewWithT(t)
	crds, err := config.CRDs("placement.lodestar.dev")
	g.Expect(err).NotTo(HaveOccurred())
	specs := map[string]any{}
	for _, crd := range crds {
		spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
		spec.Description = ""
		specs[crd.Spec.Names.Kind] = spec
	}
	g.Expect(specs).To(HaveKey("Placement"))
	g.Expect(specs["ClusterPlacement"]).To(Equal(specs["Placement"]))
}
