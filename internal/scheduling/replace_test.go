package scheduling

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

func TestKeepUntilReplaced(t *testing.T) {
	now := time.Now()
	draining := []placementv1alpha1.Taint{{Key: "lodestar.dev/drain", Effect: placementv1alpha1.TaintNoExecute, TimeAdded: now.Format(time.RFC3339)}}
	healthy := map[string]string{placementv1alpha1.ControlPlaneHealthyCondition: "True"}
	clusters := []Cluster{{Name: "a", Taints: draining, Conditions: healthy}, {Name: "b", Conditions: healthy}, {Name: "c", Conditions: healthy}}
	one := Policy{Selector: labels.Everything(), N: ptr.To(1)}
	names := func(cs []Cluster) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Name)
		}
		return out
	}
	tests := []struct {
		name      string
		current   []string
		policy    Policy
		clusters  []Cluster
		available map[string]bool
		wantKept  bool
		want      []string
	}{
		{name: "replacement not yet available: the drained cluster stays", policy: one, clusters: clusters,
			wantKept: true, want: []string{"a", "b"}},
		{name: "the replacement, once in the decisions, still holds it until available", policy: one, clusters: clusters,
			current: []string{"a", "b"}, wantKept: true, want: []string{"a", "b"}},
		{name: "replacement available: the drained cluster goes", policy: one, clusters: clusters,
			available: map[string]bool{"b": true}, want: []string{"b"}},
		{name: "no replacement possible: it goes at once", policy: one, clusters: clusters[:1],
			want: nil},
		{name: "every other cluster already chosen and available: nothing to wait for", policy: Policy{Selector: labels.Everything()}, clusters: clusters,
			available: map[string]bool{"b": true, "c": true}, want: []string{"b", "c"}},
		{name: "a kept cluster not available holds the eviction", policy: Policy{Selector: labels.Everything()}, clusters: clusters,
			available: map[string]bool{"b": true}, wantKept: true, want: []string{"a", "b", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			current := map[string]bool{"a": true}
			if tt.policy.N == nil {
				current = map[string]bool{"a": true, "b": true, "c": true}
			}
			for _, c := range tt.current {
				current[c] = true
			}
			res := Schedule(tt.clusters, current, tt.policy, now)
			g.Expect(Evicted(res, current, false)).To(Equal([]string{"a"}))
			g.Expect(KeepUntilReplaced(&res, tt.clusters, current, tt.available, false)).To(Equal(tt.wantKept))
			g.Expect(names(res.Selected)).To(Equal(tt.want))
			if tt.wantKept {
				g.Expect(res.Excluded).To(HaveKeyWithValue(ReasonKeptUntilReplaced, []string{"a"}))
				g.Expect(res.Excluded).NotTo(HaveKey(ReasonTainted))
			}
		})
	}
}
