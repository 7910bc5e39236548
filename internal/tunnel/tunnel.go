// Package tunnel carries the hub's requests to a member's agent over a
// connection the agent opens: pull only, the member needs no inbound port.
//
// The agent makes an HTTP/1.1 upgrade request to the hub's API server (a
// subresource of the aggregated debug API, authenticated and authorised by
// the hub like any other request of the agent's) and the hub's debug server
// answers 101; the API server then copies bytes both ways for as long as the
// connection lives, as it does for `kubectl exec`. Over that one connection
// runs hashicorp/yamux, a maintained stream multiplexer with keepalives: the
// hub opens one stream per request and writes the request as HTTP/1.1, so
// streaming responses and further upgrades (exec, port-forward) pass through
// unchanged; the agent serves the streams with an http.Server.
//
// Each hub replica is its own tunnel server. An agent holds one tunnel to each
// (the replica says its identity and how many there are when it answers, and
// the agent dials again through the load balancer until it holds them all),
// so whichever replica a request reaches has the agent's tunnel.
//
// A replica holds one tunnel per cluster: a new one replaces the one it held
// (an agent restarted, or dialling again after a cut, is never locked out by
// a half-dead connection), and each is checked again (Registry.Check) every
// Recheck while it is open: the identity that opened it may be revoked or
// stolen. The hub never accepts a stream the agent opens: each is closed as
// it comes, so an agent cannot make the hub buffer streams without bound.
package tunnel

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/yamux"
)

// Protocol is the value of the Upgrade header of a tunnel request.
const Protocol = "lodestar-tunnel.v1"

// Headers of the hub's answer to a tunnel request.
const (
	// ServerHeader is the answering replica's identity.
	ServerHeader = "Lodestar-Tunnel-Server"
	// ServerCountHeader is how many replicas the agent should hold a tunnel to.
	ServerCountHeader = "Lodestar-Tunnel-Servers"
)

// KeepAliveInterval is how often each end of a tunnel checks the other is
// there; a tunnel that misses a keepalive for ConnectionWriteTimeout closes.
const KeepAliveInterval = 5 * time.Second

// ErrNoTunnel is returned when no agent tunnel to a cluster is open.
var ErrNoTunnel = errors.New("no tunnel from the cluster's agent")

func sessionConfig() *yamux.Config {
	cfg := yamux.DefaultConfig()
	cfg.KeepAliveInterval = KeepAliveInterval
	cfg.ConnectionWriteTimeout = 10 * time.Second
	cfg.LogOutput = io.Discard
	return cfg
}

// Identity is who opened a tunnel, as the hub authenticated it.
type Identity struct {
	User, UID string
	Groups    []string
	Extra     map[string][]string
	// ServiceAccountUID is the UID of the agent's ServiceAccount the tunnel
	// was opened with (a revoke makes the ServiceAccount anew).
	ServiceAccountUID string
}

// DefaultRecheck is how often an open tunnel's identity is checked again.
const DefaultRecheck = 5 * time.Second

// Registry holds the tunnels the agents opened to one hub replica.
type Registry struct {
	// ID is this replica's identity, Count how many replicas there are.
	ID    string
	Count int
	// Check, when set, says whether the identity that opened cluster's tunnel
	// may still hold it; an error closes the tunnel. Recheck (DefaultRecheck)
	// is how often it runs for each open tunnel.
	Check   func(ctx context.Context, cluster string, id Identity) error
	Recheck time.Duration

	mu       sync.Mutex
	sessions map[string]*held
}

// held is a cluster's open tunnel and who opened it.
type held struct {
	sess *yamux.Session
	id   Identity
}

// NewRegistry returns an empty registry for replica id of count.
func NewRegistry(id string, count int) *Registry {
	return &Registry{ID: id, Count: max(count, 1), sessions: map[string]*held{}}
}

// Accept answers a tunnel request of cluster's agent: it takes the connection
// over and holds it as the cluster's tunnel until either end closes it, or a
// newer tunnel of the cluster replaces it, or Check refuses it. The caller
// has authenticated the agent as id and bound it to cluster.
func (r *Registry) Accept(w http.ResponseWriter, req *http.Request, cluster string, id Identity) error {
	if req.Header.Get("Upgrade") != Protocol {
		return fmt.Errorf("a tunnel request upgrades to %s", Protocol)
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		return errors.New("the connection cannot be taken over (HTTP/2?): a tunnel needs HTTP/1.1")
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		return err
	}
	answer := "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + Protocol +
		"\r\n" + ServerHeader + ": " + r.ID + "\r\n" + ServerCountHeader + ": " + strconv.Itoa(r.Count) + "\r\n\r\n"
	if _, err := buf.WriteString(answer); err != nil {
		_ = conn.Close()
		return err
	}
	if err := buf.Flush(); err != nil {
		_ = conn.Close()
		return err
	}
	cfg := sessionConfig()
	cfg.AcceptBacklog = 1 // streams the agent opens: closed as they come
	sess, err := yamux.Client(bufferedConn{Conn: conn, r: buf.Reader}, cfg)
	if err != nil {
		_ = conn.Close()
		return err
	}
	r.mu.Lock()
	old := r.sessions[cluster]
	r.sessions[cluster] = &held{sess: sess, id: id}
	r.mu.Unlock()
	if old != nil {
		_ = old.sess.Close() // one tunnel per cluster: the newest
	}
	go refuseStreams(sess)
	go func() {
		<-sess.CloseChan()
		r.mu.Lock()
		defer r.mu.Unlock()
		if h := r.sessions[cluster]; h != nil && h.sess == sess {
			delete(r.sessions, cluster)
		}
	}()
	return nil
}

// refuseStreams closes each stream the agent opens: the hub opens them, never
// the agent.
func refuseStreams(sess *yamux.Session) {
	for {
		stream, err := sess.AcceptStream()
		if err != nil {
			return
		}
		_ = stream.Close()
	}
}

// Run checks every open tunnel again every Recheck until ctx ends, closing
// those Check refuses.
func (r *Registry) Run(ctx context.Context) error {
	if r.Check == nil {
		return nil
	}
	t := time.NewTicker(cmp.Or(r.Recheck, DefaultRecheck))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		r.CheckAll(ctx)
	}
}

// CheckAll checks every open tunnel now (a revoke, say), closing those Check
// refuses.
func (r *Registry) CheckAll(ctx context.Context) {
	if r.Check == nil {
		return
	}
	r.mu.Lock()
	open := make(map[string]*held, len(r.sessions))
	for cluster, h := range r.sessions {
		open[cluster] = h
	}
	r.mu.Unlock()
	for cluster, h := range open {
		if err := r.Check(ctx, cluster, h.id); err != nil && ctx.Err() == nil {
			_ = h.sess.Close()
		}
	}
}

// Close closes every tunnel: the agents dial again (another replica, or this
// one when it is back).
func (r *Registry) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range r.sessions {
		_ = h.sess.Close()
	}
}

// Connected says whether cluster's agent holds a tunnel to this replica.
func (r *Registry) Connected(cluster string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.sessions[cluster]
	return h != nil && !h.sess.IsClosed()
}

// Clusters is how many clusters hold a tunnel to this replica.
func (r *Registry) Clusters() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sessions)
}

// Dial opens a stream to cluster's agent, on its tunnel.
func (r *Registry) Dial(ctx context.Context, cluster string) (net.Conn, error) {
	r.mu.Lock()
	h := r.sessions[cluster]
	r.mu.Unlock()
	if h != nil && !h.sess.IsClosed() {
		if stream, err := h.sess.Open(); err == nil {
			return stream, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return nil, fmt.Errorf("%w %s to this hub replica (%s)", ErrNoTunnel, cluster, r.ID)
}

// bufferedConn reads first what the HTTP server had buffered from conn.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
