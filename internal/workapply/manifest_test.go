package workapply

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lodestar-dev/lodestar/internal/diff"
)

func deployment(replicas int64, image string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "demo"},
		"spec": map[string]any{"replicas": replicas, "template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "web", "image": image}},
		}}},
	}}
}

func TestWithIgnored(t *testing.T) {
	g := NewWithT(t)
	replicas, _ := diff.ParsePointer("/spec/replicas")
	labels, _ := diff.ParsePointer("/metadata/labels/team")
	manifest, live := deployment(2, "nginx:1"), deployment(5, "nginx:0")

	out := WithIgnored(manifest, live, []diff.Pointer{replicas, labels})
	g.Expect(out.Object["spec"].(map[string]any)["replicas"]).To(BeEquivalentTo(5), "the member's value")
	g.Expect(out.GetLabels()).To(BeEmpty(), "absent on the member: not set")
	g.Expect(manifest.Object["spec"].(map[string]any)["replicas"]).To(BeEquivalentTo(2), "the manifest itself is not changed")
	g.Expect(WithIgnored(manifest, nil, []diff.Pointer{replicas})).To(BeIdenticalTo(manifest), "on creation the manifest's value is used")

	live.SetResourceVersion("42")
	g.Expect(At(out, live).GetResourceVersion()).To(Equal("42"))
}

func TestManifestHash(t *testing.T) {
	g := NewWithT(t)
	a, b := deployment(2, "nginx:1"), deployment(2, "nginx:1")
	g.Expect(ManifestHash(a)).To(HaveLen(32))
	g.Expect(ManifestHash(a)).To(Equal(ManifestHash(b)), "the same content, the same hash")
	g.Expect(ManifestHash(a)).NotTo(Equal(ManifestHash(deployment(3, "nginx:1"))))
}

func TestRunsOnce(t *testing.T) {
	g := NewWithT(t)
	g.Expect(RunsOnce(schema.GroupKind{Group: "batch", Kind: "Job"})).To(BeTrue())
	g.Expect(RunsOnce(schema.GroupKind{Group: "apps", Kind: "Deployment"})).To(BeFalse())
}
