package diff

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestPaths(t *testing.T) {
	g := NewWithT(t)
	a := map[string]any{
		"metadata": map[string]any{"name": "x", "resourceVersion": "1", "labels": map[string]any{"a": "1"}},
		"spec":     map[string]any{"replicas": int64(2), "ports": []any{map[string]any{"port": int64(80)}}},
		"data":     map[string]any{"password": "secret"},
	}
	b := map[string]any{
		"metadata": map[string]any{"name": "x", "resourceVersion": "2", "labels": map[string]any{"a": "1", "b": "2"}},
		"spec":     map[string]any{"replicas": float64(3), "ports": []any{map[string]any{"port": int64(80)}}},
		"data":     map[string]any{"password": "other"},
	}
	g.Expect(Paths(a, b, 0)).To(Equal([]string{"data.password", "metadata.labels.b", "spec.replicas"}))
	g.Expect(Paths(a, a, 0)).To(BeEmpty())
	g.Expect(Paths(a, b, 2)).To(Equal([]string{"data.password", "metadata.labels.b", "..."}))

	c := map[string]any{"spec": map[string]any{"replicas": int64(2), "ports": []any{}}}
	d := map[string]any{"spec": map[string]any{"replicas": 2, "ports": []any{map[string]any{"port": int64(80)}}}}
	g.Expect(Paths(c, d, 0)).To(Equal([]string{"spec.ports"}))
}

func TestPathsWithin(t *testing.T) {
	g := NewWithT(t)
	want := map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
		"spec":     map[string]any{"replicas": int64(2), "ports": []any{map[string]any{"port": int64(80)}}},
	}
	a := map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"app": "web", "added": "by-server"}, "resourceVersion": "1"},
		"spec":     map[string]any{"replicas": int64(2), "ports": []any{map[string]any{"port": int64(80)}}, "selector": "x"},
	}
	b := map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"app": "db"}, "resourceVersion": "2"},
		"spec":     map[string]any{"replicas": int64(3), "ports": []any{map[string]any{"port": int64(80)}}, "selector": "y"},
	}
	g.Expect(PathsWithin(want, a, b, 0)).To(Equal([]string{"metadata.labels.app", "spec.replicas"}), "only what want sets")
	g.Expect(PathsWithin(want, a, a, 0)).To(BeEmpty())
	g.Expect(PathsWithin(want, map[string]any{}, b, 0)).To(Equal([]string{"metadata", "spec"}))
}
