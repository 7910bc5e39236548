package tunnel_test

import (
	"context"
	"errors"
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
	"github.com/hashicorp/yamux"
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
			if err := reg.Accept(w, req, "member-1", tunnel.Identity{}); err != nil {
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
		if err := reg.Accept(w, req, "member-1", tunnel.Identity{}); err != nil {
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

// openTunnel dials reg's server as an agent would and returns the agent's end
// of the tunnel.
func openTunnel(t *testing.T, url string) *yamux.Session {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", tunnel.Protocol)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("answered %s", resp.Status)
	}
	sess, err := yamux.Server(resp.Body.(io.ReadWriteCloser), yamux.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sess.Close() })
	return sess
}

// One tunnel per cluster and replica: a second replaces the first (closed);
// a tunnel whose identity Check refuses is closed within Recheck; a stream
// the agent opens is closed by the hub at once, whatever it writes.
func TestOneCheckedTunnelPerCluster(t *testing.T) {
	reg := tunnel.NewRegistry("hub-0", 1)
	var revoked atomic.Value // the ServiceAccount UID revoked
	revoked.Store("")
	reg.Recheck = 20 * time.Millisecond
	reg.Check = func(_ context.Context, cluster string, id tunnel.Identity) error {
		if id.ServiceAccountUID == revoked.Load().(string) {
			return errors.New("revoked")
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = reg.Run(ctx) }()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		id := tunnel.Identity{ServiceAccountUID: fmt.Sprintf("uid-%d", n.Add(1))}
		if err := reg.Accept(w, req, "member-1", id); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	defer reg.Close()

	first := openTunnel(t, srv.URL)
	eventually(t, "the first tunnel is held", func() bool { return reg.Connected("member-1") })
	second := openTunnel(t, srv.URL)
	eventually(t, "the second replaces the first", func() bool { return first.IsClosed() })
	if second.IsClosed() || !reg.Connected("member-1") {
		t.Fatal("the newest tunnel is held")
	}

	// A stream the agent opens: closed by the hub, not buffered.
	stream, err := second.Open()
	if err != nil {
		t.Fatal(err)
	}
	_, _ = stream.Write(make([]byte, 64<<10))
	_ = stream.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadAll(stream); err != nil {
		t.Fatalf("the hub closes a stream the agent opens: %v", err)
	}

	// Revoking an earlier identity (uid-1) keeps the held tunnel (uid-2);
	// revoking its own closes it at the next recheck.
	revoked.Store("uid-1")
	reg.CheckAll(ctx)
	if second.IsClosed() {
		t.Fatal("a tunnel whose identity stands is kept")
	}
	revoked.Store("uid-2")
	eventually(t, "a refused identity's tunnel is closed at the next recheck", func() bool { return second.IsClosed() && !reg.Connected("member-1") })
}
