package tunnel_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"

	"github.com/lodestar-dev/lodestar/internal/testenv"
	"github.com/lodestar-dev/lodestar/internal/tunnel"
)

// replicas are hub replicas behind one address that hands connections to
// each in turn, as a Service does: each replica's registry takes the tunnels
// that reach it.
type replicas struct {
	registries []*tunnel.Registry
	servers    []*httptest.Server
	next       atomic.Int64
	lb         net.Listener
}

func startReplicas(t *testing.T, n int) *replicas {
	t.Helper()
	r := &replicas{}
	for i := range n {
		reg := tunnel.NewRegistry(fmt.Sprintf("hub-%d", i), n)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if err := reg.Accept(w, req, "member-1"); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
			}
		}))
		t.Cleanup(srv.Close)
		t.Cleanup(reg.Close)
		r.registries, r.servers = append(r.registries, reg), append(r.servers, srv)
	}
	lb, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.lb = lb
	t.Cleanup(func() { _ = lb.Close() })
	go func() {
		for {
			in, err := lb.Accept()
			if err != nil {
				return
			}
			target := r.servers[int(r.next.Add(1))%n].Listener.Addr().String()
			out, err := net.Dial("tcp", target)
			if err != nil {
				_ = in.Close()
				continue
			}
			go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
			go func() { _, _ = io.Copy(in, out); _ = in.Close() }()
		}
	}()
	return r
}

// The package's Gomega defaults, sized for a busy CI machine (testenv).
func init() {
	testenv.SetGomegaDefaults()
}

func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	NewWithT(t).Eventually(f).Should(BeTrue(), what)
}

// An agent behind a load balancer holds a tunnel to each of two replicas, and
// whichever replica a request reaches carries it to the agent; a replica that
// closes its tunnels gets one again.
func TestAgentHoldsATunnelToEveryReplica(t *testing.T) {
	r := startReplicas(t, 2)
	var served sync.Map
	agent := &tunnel.Agent{
		Hub: &rest.Config{Host: "http://" + r.lb.Addr().String()}, Path: "/tunnel", Log: logr.Discard(),
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			served.Store(req.URL.Path, true)
			_, _ = io.WriteString(w, "from the agent "+req.URL.Path)
		}),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agent.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	eventually(t, "the agent holds a tunnel to both replicas", func() bool {
		return r.registries[0].Connected("member-1") && r.registries[1].Connected("member-1")
	})
	for i, reg := range r.registries {
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return reg.Dial(ctx, "member-1") }}}
		for j := range 50 {
			path := fmt.Sprintf("/replica-%d/%d", i, j)
			resp, err := client.Get("http://member-1.tunnel" + path)
			if err != nil {
				t.Fatalf("replica %d, request %d: %v", i, j, err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if string(body) != "from the agent "+path {
				t.Fatalf("replica %d answered %q", i, body)
			}
		}
	}
	if _, err := r.registries[0].Dial(context.Background(), "member-2"); err == nil {
		t.Error("a cluster without a tunnel is dialled")
	}

	r.registries[1].Close()
	eventually(t, "the agent dials the replica that closed its tunnel again", func() bool {
		return r.registries[1].Connected("member-1") && agent.Connected() == 2
	})
}

// A tunnel request that does not upgrade to the tunnel protocol is refused.
func TestAcceptRefusesOtherProtocols(t *testing.T) {
	reg := tunnel.NewRegistry("hub-0", 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if err := reg.Accept(w, req, "member-1"); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || reg.Connected("member-1") {
		t.Errorf("answered %s, connected %v", resp.Status, reg.Connected("member-1"))
	}
}
