package diff

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestPointer(t *testing.T) {
	g := NewWithT(t)
	for _, bad := range []string{"", "/", "spec/replicas", "/spec//replicas"} {
		_, err := ParsePointer(bad)
		g.Expect(err).To(HaveOccurred(), bad)
	}
	p, err := ParsePointer("/metadata/annotations/example.com~1rev~0x")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p).To(Equal(Pointer{"metadata", "annotations", "example.com/rev~x"}))

	obj := map[string]any{
		"spec": map[string]any{"replicas": int64(3), "containers": []any{map[string]any{"image": "a"}}},
	}
	replicas, _ := ParsePointer("/spec/replicas")
	v, ok := replicas.Get(obj)
	g.Expect(ok).To(BeTrue())
	g.Expect(v).To(BeEquivalentTo(3))
	g.Expect(replicas.String()).To(Equal("spec.replicas"))

	image, _ := ParsePointer("/spec/containers/0/image")
	g.Expect(image.String()).To(Equal("spec.containers[0].image"))
	image.Set(obj, "b")
	v, _ = image.Get(obj)
	g.Expect(v).To(Equal("b"))
	missing, _ := ParsePointer("/spec/containers/3/image")
	missing.Set(obj, "c") // Out of range: nothing happens.
	_, ok = missing.Get(obj)
	g.Expect(ok).To(BeFalse())

	label, _ := ParsePointer("/metadata/labels/app")
	label.Set(obj, "web")
	v, _ = label.Get(obj)
	g.Expect(v).To(Equal("web"))
	label.Remove(obj)
	_, ok = label.Get(obj)
	g.Expect(ok).To(BeFalse())
	replicas.Remove(obj)
	_, ok = replicas.Get(obj)
	g.Expect(ok).To(BeFalse())
}
