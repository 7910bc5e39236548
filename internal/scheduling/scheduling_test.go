package scheduling

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/labels"
)

func TestSelect(t *testing.T) {
	clusters := []Cluster{
		{Name: "b", Namespace: "set-1", Labels: map[string]string{"env": "prod"}},
		{Name: "a", Namespace: "set-2", Labels: map[string]string{"env": "prod"}},
		{Name: "a", Namespace: "set-1", Labels: map[string]string{"env": "prod", "region": "eu"}},
		{Name: "c", Namespace: "set-1", Labels: map[string]string{"env": "dev"}},
	}
	tests := []struct {
		name     string
		selector labels.Selector
		want     []string
	}{
		{"everything", labels.Everything(), []string{"set-1/a", "set-1/b", "set-1/c", "set-2/a"}},
		{"nothing", labels.Nothing(), nil},
		{"by label", labels.SelectorFromSet(labels.Set{"env": "prod"}), []string{"set-1/a", "set-1/b", "set-2/a"}},
		{"by two labels", labels.SelectorFromSet(labels.Set{"env": "prod", "region": "eu"}), []string{"set-1/a"}},
		{"no match", labels.SelectorFromSet(labels.Set{"env": "qa"}), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var got []string
			for _, c := range Select(clusters, tt.selector) {
				got = append(got, c.Namespace+"/"+c.Name)
			}
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestSlices(t *testing.T) {
	mk := func(n int) []Cluster { return make([]Cluster, n) }
	tests := []struct {
		n, size int
		want    []int
	}{
		{0, 100, nil},
		{1, 100, []int{1}},
		{100, 100, []int{100}},
		{101, 100, []int{100, 1}},
		{250, 100, []int{100, 100, 50}},
	}
	for _, tt := range tests {
		g := NewWithT(t)
		var got []int
		for _, s := range Slices(mk(tt.n), tt.size) {
			got = append(got, len(s))
		}
		g.Expect(got).To(Equal(tt.want), "n=%d", tt.n)
	}
}
