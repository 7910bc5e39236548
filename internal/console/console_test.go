package console

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

func TestListenRefusesNonLoopback(t *testing.T) {
	s := &Server{token: "x"}
	for _, addr := range []string{"0.0.0.0:0", ":0", "10.0.0.1:0", "example.com:80"} {
		if _, _, err := s.Listen(addr); err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("Listen(%q) = %v, want a refusal naming loopback", addr, err)
		}
	}
	l, u, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	if !strings.HasPrefix(u, "http://127.0.0.1:") || !strings.HasSuffix(u, "/?token=x") {
		t.Errorf("URL %q", u)
	}
}

// The session: the token in the URL gives a cookie; the API wants the cookie,
// and a write the CSRF header; another Host is refused.
func TestSession(t *testing.T) {
	s := newFake(t)
	l, pageURL, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(s.Handler())
	_ = srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	defer srv.Close()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	get := func(path string, header http.Header) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		for k, v := range header {
			req.Header[k] = v
		}
		res, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		return res
	}
	if res := get("/", nil); res.StatusCode != http.StatusForbidden {
		t.Errorf("the page without the token: %d, want 403", res.StatusCode)
	}
	if res := get("/?token=wrong", nil); res.StatusCode != http.StatusForbidden {
		t.Errorf("the page with another token: %d, want 403", res.StatusCode)
	}
	u, _ := url.Parse(pageURL)
	res := get("/?"+u.RawQuery, nil)
	if res.StatusCode != http.StatusSeeOther || len(res.Cookies()) != 1 {
		t.Fatalf("the page with the token: %d, cookies %v; want a redirect that sets the session cookie", res.StatusCode, res.Cookies())
	}
	c := res.Cookies()[0]
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
		t.Errorf("the session cookie is not HttpOnly and SameSite=Strict: %+v", c)
	}
	session := http.Header{"Cookie": {c.Name + "=" + c.Value}}
	if res := get("/", session); res.StatusCode != http.StatusOK || !strings.Contains(res.Header.Get("Content-Security-Policy"), "default-src 'self'") {
		t.Errorf("the page with the cookie: %d, CSP %q", res.StatusCode, res.Header.Get("Content-Security-Policy"))
	}
	if res := get("/api/about", nil); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("the API without the cookie: %d, want 401", res.StatusCode)
	}
	if res := get("/api/about", session); res.StatusCode != http.StatusOK {
		t.Errorf("the API with the cookie: %d, want 200", res.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/about", nil)
	req.Host = "rebound.example:" + strings.Split(srv.Listener.Addr().String(), ":")[1]
	req.Header["Cookie"] = session["Cookie"]
	if res, err := noRedirect.Do(req); err != nil || res.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("a request for another host name: %v %v, want 421", res.StatusCode, err)
	}
	post, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/rollout", strings.NewReader(`{"namespace":"shop","name":"web","action":"pause"}`))
	post.Header["Cookie"] = session["Cookie"]
	if res, err := noRedirect.Do(post); err != nil || res.StatusCode != http.StatusForbidden {
		t.Errorf("a write without %s: %v %v, want 403", csrfHeader, res.StatusCode, err)
	}
	bad, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/rollout", strings.NewReader(`{"namespace":"shop","name":"web","action":"explode"}`))
	bad.Header["Cookie"] = session["Cookie"]
	bad.Header.Set(csrfHeader, "1")
	if res, err := noRedirect.Do(bad); err != nil || res.StatusCode != http.StatusBadRequest {
		t.Errorf("an unknown action: %v %v, want 400", res.StatusCode, err)
	}
}

// A fleet of 5 000 clusters is read a page at a time; the filter and the
// count of clusters not ready cover every page.
func TestClustersPaged(t *testing.T) {
	const n = 5000
	var profiles []cpv1alpha1.ClusterProfile
	for i := n - 1; i >= 0; i-- { // in no order: the page sorts
		p := cpv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Namespace: "lodestar-fleet", Name: fmt.Sprintf("edge-%04d", i),
			Labels: map[string]string{"region": []string{"eu", "us"}[i%2]}}}
		if i%10 != 0 {
			p.Status.Conditions = []metav1.Condition{
				{Type: placementv1alpha1.ControlPlaneHealthyCondition, Status: metav1.ConditionTrue},
				{Type: placementv1alpha1.AgentReachableCondition, Status: metav1.ConditionTrue},
			}
		}
		profiles = append(profiles, p)
	}
	heartbeat := time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)
	read := func(q string, offset, limit int) ClusterPage {
		return clusterPage(profiles, map[string]time.Time{"edge-0001": heartbeat}, map[string]int{"edge-0001": 3}, true, q, offset, limit)
	}
	p := read("", 4950, 100)
	if p.Total != n || len(p.Items) != 50 || p.Items[0].Name != "edge-4950" || p.Unhealthy != n/10 {
		t.Errorf("last page: total %d, %d items from %s, %d not ready", p.Total, len(p.Items), p.Items[0].Name, p.Unhealthy)
	}
	if p := read("region=eu", 0, 100); p.Total != n/2 || p.Unhealthy != n/10 {
		t.Errorf("filter region=eu: %d (%d not ready), want %d (%d)", p.Total, p.Unhealthy, n/2, n/10)
	}
	if p := read("", 9999, 100); p.Total != n || len(p.Items) != 0 {
		t.Errorf("past the end: %d items", len(p.Items))
	}
	first := read("edge-0000", 0, 100).Items[0]
	if len(first.NotReady) != 2 || first.Healthy != "Unknown" || first.Works != 0 || first.Heartbeat != "" {
		t.Errorf("a cluster that reported nothing: %+v", first)
	}
	second := read("edge-0001", 0, 100).Items[0]
	if len(second.NotReady) != 0 || second.Works != 3 || second.Heartbeat != "2026-11-29T01:00:00Z" {
		t.Errorf("a ready cluster: %+v", second)
	}
	if c := clusterPage(profiles[:1], nil, nil, false, "", 0, 1).Items[0]; c.Works != -1 {
		t.Errorf("Works the user may not list: %d, want -1", c.Works)
	}
}

func TestPage(t *testing.T) {
	for query, want := range map[string][2]int{"": {0, defaultPage}, "offset=-5&limit=7": {0, 7},
		"offset=10&limit=100000": {10, defaultPage}, "limit=500": {0, maxPage}} {
		o, l := page(httptest.NewRequest(http.MethodGet, "/api/clusters?"+query, nil))
		if [2]int{o, l} != want {
			t.Errorf("page(%q) = %d, %d; want %v", query, o, l, want)
		}
	}
}

// newFake is a console of no hub: enough for what does not read it.
func newFake(t *testing.T) *Server {
	t.Helper()
	return &Server{opts: Options{Config: &rest.Config{Host: "https://hub.example"}, Namespace: "shop"}, token: "t0ken", events: newBroadcaster()}
}

func TestBroadcasterCoalesces(t *testing.T) {
	b := newBroadcaster()
	ch := b.subscribe()
	for range 1000 {
		b.publish(topicClusters)
	}
	b.publish(topicPlacements)
	b.flush()
	got := map[string]int{}
	for len(ch) > 0 {
		got[<-ch]++
	}
	if got[topicClusters] != 1 || got[topicPlacements] != 1 {
		t.Errorf("1 000 cluster changes and one Placement change sent %v, want one of each", got)
	}
	b.unsubscribe(ch)
	b.publish(topicClusters)
	b.flush()
	if len(ch) != 0 {
		t.Error("an unsubscribed page still gets topics")
	}
}
