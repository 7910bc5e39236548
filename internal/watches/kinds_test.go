package watches

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
)

// listedKinds is a discovery client that lists the namespaced kinds it holds.
type listedKinds struct {
	discovery.DiscoveryInterface
	kinds []string
}

func (d *listedKinds) ServerPreferredNamespacedResources() ([]*metav1.APIResourceList, error) {
	list := &metav1.APIResourceList{GroupVersion: "example.com/v1"}
	for _, k := range d.kinds {
		list.APIResources = append(list.APIResources, metav1.APIResource{Name: strings.ToLower(k) + "s", Kind: k, Namespaced: true, Verbs: metav1.Verbs{"list", "watch"}})
	}
	return []*metav1.APIResourceList{list}, nil
}

// The served kinds are cached, except while the API server may not yet list a
// kind whose CRD just changed.
func TestServedKindsRediscoveredWhileACRDSettles(t *testing.T) {
	g := NewWithT(t)
	d := &listedKinds{kinds: []string{"Apple"}}
	s := &ServedKinds{Discovery: d}
	names := func() []string {
		kinds, err := s.Get(t.Context())
		g.Expect(err).NotTo(HaveOccurred())
		var out []string
		for _, k := range kinds {
			out = append(out, k.Kind)
		}
		return out
	}
	g.Expect(names()).To(Equal([]string{"Apple"}))
	d.kinds = append(d.kinds, "Banana")
	g.Expect(names()).To(Equal([]string{"Apple"}), "cached")

	// A CRD changed: discovered again, and again while discovery may lag.
	s.Invalidate()
	g.Expect(names()).To(Equal([]string{"Apple", "Banana"}))
	d.kinds = append(d.kinds, "Cherry")
	g.Expect(names()).To(Equal([]string{"Apple", "Banana", "Cherry"}), "rediscovered within KindsSettle of the change")

	// Once the change is KindsSettle older than the last discovery, cached again.
	s.mu.Lock()
	s.changed = s.changed.Add(-KindsSettle)
	s.mu.Unlock()
	d.kinds = append(d.kinds, "Date")
	g.Expect(names()).To(Equal([]string{"Apple", "Banana", "Cherry"}), "cached")
}
