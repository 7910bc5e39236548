package v1alpha1

import (
	"net/http"
	"testing"
)

func TestParseRequest(t *testing.T) {
	for _, tc := range []struct {
		path string
		want Request
		ok   bool
	}{
		{PlacementPath("shop", "web", Log, "member-1") + "/api/v1/namespaces/shop/pods/web-1/log",
			Request{Namespace: "shop", Resource: Placements, Name: "web", Subresource: Log, Cluster: "member-1", MemberPath: "/api/v1/namespaces/shop/pods/web-1/log"}, true},
		{TunnelPath("edge-7"), Request{Namespace: "lodestar-cluster-edge-7", Resource: Tunnels, Name: "edge-7", Subresource: TunnelSubresource}, true},
		{"/apis/debug.lodestar.dev/v1alpha1", Request{}, false},
		{"/apis/debug.lodestar.dev/v1alpha1/namespaces/shop/placements", Request{}, false},
		{"/api/v1/namespaces/shop/pods", Request{}, false},
	} {
		got, ok := ParseRequest(tc.path)
		if ok != tc.ok || got != tc.want {
			t.Errorf("ParseRequest(%q) = %+v, %v; want %+v, %v", tc.path, got, ok, tc.want, tc.ok)
		}
	}
}

// Each subresource reaches only its own kind of request on the member.
func TestParseMemberPath(t *testing.T) {
	for _, tc := range []struct {
		sub, method, path string
		want              Target
		ok                bool
	}{
		{Pods, http.MethodGet, "/api/v1/namespaces/shop/pods", Target{Namespace: "shop"}, true},
		{Events, http.MethodGet, "/api/v1/namespaces/shop/events", Target{Namespace: "shop"}, true},
		{Log, http.MethodGet, "/api/v1/namespaces/shop/pods/web-1/log", Target{Namespace: "shop", Pod: "web-1"}, true},
		{Exec, http.MethodPost, "/api/v1/namespaces/shop/pods/web-1/exec", Target{Namespace: "shop", Pod: "web-1"}, true},
		{Exec, http.MethodGet, "/api/v1/namespaces/shop/pods/web-1/exec", Target{Namespace: "shop", Pod: "web-1"}, true},
		{PortForward, http.MethodPost, "/api/v1/namespaces/shop/pods/web-1/portforward", Target{Namespace: "shop", Pod: "web-1"}, true},
		// What a subresource does not allow.
		{Log, http.MethodPost, "/api/v1/namespaces/shop/pods/web-1/log", Target{}, false},
		{Log, http.MethodGet, "/api/v1/namespaces/shop/pods/web-1/exec", Target{}, false},
		{Pods, http.MethodGet, "/api/v1/namespaces/shop/secrets", Target{}, false},
		{Pods, http.MethodDelete, "/api/v1/namespaces/shop/pods", Target{}, false},
		{Pods, http.MethodGet, "/api/v1/pods", Target{}, false},
		{Pods, http.MethodGet, "/apis/apps/v1/namespaces/shop/deployments", Target{}, false},
		{Events, http.MethodGet, "/api/v1/namespaces/shop/events/x", Target{}, false},
		{Exec, http.MethodPost, "/api/v1/namespaces/shop/pods/web-1/attach", Target{}, false},
		{"proxy", http.MethodGet, "/api/v1/namespaces/shop/pods", Target{}, false},
	} {
		got, err := ParseMemberPath(tc.sub, tc.method, tc.path)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseMemberPath(%s, %s, %q) = %+v, %v; want %+v, ok %v", tc.sub, tc.method, tc.path, got, err, tc.want, tc.ok)
		}
	}
}

// The member sees a prefixed identity, never a hub one.
func TestMemberIdentity(t *testing.T) {
	if got := MemberUser("system:admin"); got != "lodestar:hub:system:admin" {
		t.Errorf("MemberUser = %q", got)
	}
	if got := TenantGroup("shop"); got != "lodestar:tenants:shop" {
		t.Errorf("TenantGroup = %q", got)
	}
}
