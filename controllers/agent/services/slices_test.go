package services

import (
	"testing"

	. "github.com/onsi/gomega"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	servicesv1alpha1 "github.com/lodestar-dev/lodestar/api/services/v1alpha1"
)

// Only the EndpointSlice controller's slices are exported, their ready or
// serving-terminating endpoints, in name order: a slice someone else wrote
// (any address) and Lodestar's own imports are not.
func TestSlicesExportsOnlyTheControllers(t *testing.T) {
	g := NewWithT(t)
	slice := func(name, managedBy string, eps ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
		return discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{discoveryv1.LabelManagedBy: managedBy}},
			AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps}
	}
	ep := func(addr string, ready, serving, terminating bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &terminating}}
	}
	got := Slices([]discoveryv1.EndpointSlice{
		slice("web-b", EndpointSliceController, ep("10.0.0.2", true, true, false), ep("10.0.0.3", false, true, true), ep("10.0.0.4", false, false, false)),
		slice("web-a", EndpointSliceController, ep("10.0.0.1", true, true, false)),
		slice("web-forged", "someone-else", ep("192.0.2.10", true, true, false)),
		slice("web-unlabelled", "", ep("192.0.2.11", true, true, false)),
		slice("web-imported", servicesv1alpha1.ManagedBy, ep("10.1.0.1", true, true, false)),
		{ObjectMeta: metav1.ObjectMeta{Name: "web-c", Labels: map[string]string{discoveryv1.LabelManagedBy: EndpointSliceController}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.5"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}},
	})
	var addrs []string
	for _, s := range got {
		for _, e := range s.Endpoints {
			addrs = append(addrs, e.Addresses...)
		}
	}
	g.Expect(addrs).To(Equal([]string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.5"}))
}
