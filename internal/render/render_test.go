package render

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

func configMap(name string, data map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name":              name,
			"namespace":         "team-a",
			"uid":               "1234",
			"resourceVersion":   "42",
			"generation":        int64(3),
			"creationTimestamp": "2026-01-01T00:00:00Z",
			"managedFields":     []any{map[string]any{"manager": "kubectl"}},
			"ownerReferences":   []any{map[string]any{"name": "owner"}},
			"finalizers":        []any{"hub/finalizer"},
			"labels":            map[string]any{"app": "web"},
			"annotations": map[string]any{
				LastAppliedAnnotation: "{}",
				"keep":                "me",
			},
		},
		"data":   data,
		"status": map[string]any{"phase": "hub"},
	}}
}

func TestObjectStripsHubFields(t *testing.T) {
	g := NewWithT(t)
	in := configMap("web", map[string]any{"k": "v"})
	out := Object(in)

	g.Expect(out.Object).NotTo(HaveKey("status"))
	md := out.Object["metadata"].(map[string]any)
	g.Expect(md).To(Equal(map[string]any{
		"name":        "web",
		"namespace":   "team-a",
		"labels":      map[string]any{"app": "web"},
		"annotations": map[string]any{"keep": "me"},
	}))
	g.Expect(out.Object["data"]).To(Equal(map[string]any{"k": "v"}))
	// The input is left as it was.
	g.Expect(in.GetUID()).To(BeEquivalentTo("1234"))
	g.Expect(in.Object).To(HaveKey("status"))
}

func TestObjectDropsEmptyAnnotations(t *testing.T) {
	g := NewWithT(t)
	in := configMap("web", nil)
	in.SetAnnotations(map[string]string{LastAppliedAnnotation: "{}"})
	g.Expect(Object(in).GetAnnotations()).To(BeNil())
}

func TestManifestsOrderAndRevision(t *testing.T) {
	g := NewWithT(t)
	a, b := configMap("a", map[string]any{"k": "1"}), configMap("b", map[string]any{"k": "2"})

	raws1, rev1, err := Manifests([]*unstructured.Unstructured{b, a}, false)
	g.Expect(err).NotTo(HaveOccurred())
	raws2, rev2, err := Manifests([]*unstructured.Unstructured{a, b}, false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rev1).To(Equal(rev2), "order of input must not change the revision")
	g.Expect(raws1).To(HaveLen(2))
	g.Expect(raws1).To(Equal(raws2))

	var first map[string]any
	g.Expect(json.Unmarshal(raws1[0].Raw, &first)).To(Succeed())
	g.Expect(first["metadata"].(map[string]any)["name"]).To(Equal("a"))

	_, rev3, err := Manifests([]*unstructured.Unstructured{a, configMap("b", map[string]any{"k": "changed"})}, false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rev3).NotTo(Equal(rev1), "a change of content must change the revision")

	// The hub-only fields do not affect the revision.
	b2 := configMap("b", map[string]any{"k": "2"})
	b2.SetResourceVersion("99")
	_, rev4, err := Manifests([]*unstructured.Unstructured{a, b2}, false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rev4).To(Equal(rev1))

	// Reflecting status, each manifest names the hub generation it is from.
	b2.SetGeneration(7)
	raws5, rev5, err := Manifests([]*unstructured.Unstructured{a, b2}, true)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rev5).NotTo(Equal(rev1))
	var second map[string]any
	g.Expect(json.Unmarshal(raws5[1].Raw, &second)).To(Succeed())
	g.Expect(second["metadata"].(map[string]any)["annotations"]).To(HaveKeyWithValue(placementv1alpha1.HubGenerationAnnotation, "7"))
}

func TestObjectStripsServiceAllocations(t *testing.T) {
	svc := func(clusterIP string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]any{"name": "web", "namespace": "team-a"},
			"spec": map[string]any{
				"type":                "LoadBalancer",
				"clusterIP":           clusterIP,
				"clusterIPs":          []any{clusterIP},
				"healthCheckNodePort": int64(31000),
				"ports":               []any{map[string]any{"port": int64(80), "nodePort": int64(30080)}},
				"selector":            map[string]any{"app": "web"},
			},
		}}
	}
	g := NewWithT(t)
	out := Object(svc("10.0.0.12"))
	g.Expect(out.Object["spec"]).To(Equal(map[string]any{
		"type":     "LoadBalancer",
		"ports":    []any{map[string]any{"port": int64(80)}},
		"selector": map[string]any{"app": "web"},
	}))

	headless := Object(svc("None"))
	g.Expect(headless.Object["spec"]).To(HaveKeyWithValue("clusterIP", "None"))
	g.Expect(headless.Object["spec"]).To(HaveKeyWithValue("clusterIPs", []any{"None"}))
}

func TestObjectStripsGeneratedJobSelector(t *testing.T) {
	job := func(manual bool) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "batch/v1", "kind": "Job",
			"metadata": map[string]any{"name": "migrate", "namespace": "team-a"},
			"spec": map[string]any{
				"selector": map[string]any{"matchLabels": map[string]any{"batch.kubernetes.io/controller-uid": "hub-uid"}},
				"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{
					"controller-uid": "hub-uid", "batch.kubernetes.io/controller-uid": "hub-uid",
					"job-name": "migrate", "batch.kubernetes.io/job-name": "migrate", "app": "web",
				}}},
			},
		}}
		if manual {
			u.Object["spec"].(map[string]any)["manualSelector"] = true
		}
		return u
	}
	g := NewWithT(t)
	out := Object(job(false))
	g.Expect(out.Object["spec"]).NotTo(HaveKey("selector"))
	labels, _, _ := unstructured.NestedStringMap(out.Object, "spec", "template", "metadata", "labels")
	g.Expect(labels).To(Equal(map[string]string{"app": "web"}))

	manual := Object(job(true))
	g.Expect(manual.Object["spec"]).To(HaveKey("selector"), "a selector the user chose stays")
}

func TestHubOwned(t *testing.T) {
	g := NewWithT(t)
	obj := func(kind, name string, mutate func(*unstructured.Unstructured)) *unstructured.Unstructured {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion("v1")
		o.SetKind(kind)
		o.SetName(name)
		if mutate != nil {
			mutate(o)
		}
		return o
	}
	g.Expect(HubOwned(obj("ConfigMap", "kube-root-ca.crt", nil))).NotTo(BeEmpty())
	g.Expect(HubOwned(obj("ServiceAccount", "default", nil))).NotTo(BeEmpty())
	g.Expect(HubOwned(obj("Secret", "sa-token", func(o *unstructured.Unstructured) { o.Object["type"] = "kubernetes.io/service-account-token" }))).NotTo(BeEmpty())
	g.Expect(HubOwned(obj("ConfigMap", "web", func(o *unstructured.Unstructured) {
		o.SetOwnerReferences([]metav1.OwnerReference{{Kind: "Deployment", Name: "web", Controller: ptr.To(true)}})
	}))).To(ContainSubstring("controlled by Deployment web"))
	g.Expect(HubOwned(obj("ConfigMap", "web", func(o *unstructured.Unstructured) {
		o.SetOwnerReferences([]metav1.OwnerReference{{Kind: "Thing", Name: "web"}})
	}))).To(BeEmpty(), "an owner that does not control it")
	g.Expect(HubOwned(obj("Secret", "db", nil))).To(BeEmpty())
	g.Expect(HubOwned(obj("ServiceAccount", "web", nil))).To(BeEmpty())
	g.Expect(HubOnlyKind(schema.GroupKind{Kind: "Pod"})).NotTo(BeEmpty())
	g.Expect(HubOnlyKind(schema.GroupKind{Group: "apps", Kind: "Deployment"})).To(BeEmpty())
}

func blobMap(name string, blob int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": "shop"}, "data": map[string]any{"blob": strings.Repeat("x", blob)}}}
}

// Only an object larger than a Work is too large; objects larger together are
// split over several Works.
func TestTooLarge(t *testing.T) {
	g := NewWithT(t)
	_, _, err := Manifests([]*unstructured.Unstructured{blobMap("small", 1), blobMap("big", MaxManifestBytes), blobMap("bigger", MaxManifestBytes+10)}, false)
	var tooLarge *TooLargeError
	g.Expect(errors.As(err, &tooLarge)).To(BeTrue())
	g.Expect(tooLarge.Objects).To(HaveLen(2))
	g.Expect(tooLarge.Objects[0]).To(HavePrefix("ConfigMap shop/bigger"))
	g.Expect(err.Error()).To(ContainSubstring("768 KiB"))

	manifests, _, err := Manifests([]*unstructured.Unstructured{blobMap("a", 500<<10), blobMap("b", 500<<10)}, false)
	g.Expect(err).NotTo(HaveOccurred(), "1000 KiB in two objects of 500 KiB")
	g.Expect(manifests).To(HaveLen(2))
}

func TestSplit(t *testing.T) {
	g := NewWithT(t)
	raw := func(o *unstructured.Unstructured) runtime.RawExtension {
		b, err := o.MarshalJSON()
		g.Expect(err).NotTo(HaveOccurred())
		return runtime.RawExtension{Raw: b}
	}
	small := []runtime.RawExtension{raw(blobMap("a", 10)), raw(blobMap("b", 10))}
	g.Expect(Split(small)).To(Equal([][]runtime.RawExtension{small}), "what fits in one Work is one part, unchanged")

	crd := func(name string, blob int) runtime.RawExtension {
		return raw(&unstructured.Unstructured{Object: map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"blob": strings.Repeat("y", blob)}}})
	}
	ns := raw(&unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "shop"}}})
	in := []runtime.RawExtension{raw(blobMap("cr-like", 300<<10)), crd("one", 300<<10), crd("two", 300<<10), ns, crd("three", 300<<10)}
	parts := Split(in)
	g.Expect(parts).To(HaveLen(2))
	var order []int
	for _, p := range parts {
		g.Expect(size(p)).To(BeNumerically("<=", MaxManifestBytes))
		for _, m := range p {
			order = append(order, priority(m.Raw))
		}
	}
	g.Expect(order).To(Equal([]int{0, 1, 1, 1, 2}), "Namespaces, then CRDs, then the rest")
	g.Expect(manifestName(parts[0][0].Raw)).To(Equal("Namespace shop"))
}

func TestRevisionManifestsCompressed(t *testing.T) {
	g := NewWithT(t)
	small, _, err := Manifests([]*unstructured.Unstructured{blobMap("a", 10)}, false)
	g.Expect(err).NotTo(HaveOccurred())
	spec := &placementv1alpha1.PlacementRevisionSpec{}
	g.Expect(SetRevisionManifests(spec, small)).To(Succeed())
	g.Expect(spec.CompressedManifests).To(BeEmpty())
	g.Expect(RevisionManifests(spec)).To(Equal(small))

	big, _, err := Manifests([]*unstructured.Unstructured{blobMap("a", 400<<10), blobMap("b", 400<<10)}, false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(SetRevisionManifests(spec, big)).To(Succeed())
	g.Expect(spec.Manifests).To(BeEmpty())
	g.Expect(len(spec.CompressedManifests)).To(BeNumerically("<", 64<<10), "800 KiB of one letter compresses")
	got, err := RevisionManifests(spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(HaveLen(2))
	g.Expect(got[0].Raw).To(MatchJSON(big[0].Raw))
	g.Expect(got[1].Raw).To(MatchJSON(big[1].Raw))

	spec.CompressedManifests = []byte("not gzip")
	_, err = RevisionManifests(spec)
	g.Expect(err).To(MatchError(ContainSubstring("reading the compressed manifests")))
}

func TestStatefulSetClaim(t *testing.T) {
	sts := unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": map[string]any{"name": "db", "namespace": "shop"},
		"spec": map[string]any{"volumeClaimTemplates": []any{
			map[string]any{"metadata": map[string]any{"name": "data"}}, map[string]any{"metadata": map[string]any{"name": "logs"}},
		}},
	}}
	for claim, want := range map[string]string{
		"data-db-0": "db", "logs-db-12": "db", "data-db-": "", "data-db-x": "", "data-dbx-0": "", "uploads": "", "data-web-0": "",
	} {
		if got := StatefulSetClaim(claim, []unstructured.Unstructured{sts}); got != want {
			t.Errorf("StatefulSetClaim(%q) = %q, want %q", claim, got, want)
		}
	}
}
