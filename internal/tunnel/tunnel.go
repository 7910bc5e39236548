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
package tunnel

import (
	"bufio"
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

// Registry holds the tunnels the agents opened to one hub replica.
type Registry struct {
	// ID is this replica's identity, Count how many replicas there are.
	ID    string
	Count int

	mu       sync.Mutex
	sessions map[string][]*yamux.Session
}

// NewRegistry returns an empty registry for replica id of count.
func NewRegistry(id string, count int) *Registry {
	return &Registry{ID: id, Count: max(count, 1), sessions: map[string][]*yamux.Session{}}
}

// Accept answers a tunnel request of cluster's agent: it takes the connection
// over and holds it as the cluster's tunnel until either end closes it. The
// caller has authenticated the agent and bound it to cluster.
func (r *Registry) Accept(w http.ResponseWriter, req *http.Request, cluster string) error {
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
	sess, err := yamux.Client(bufferedConn{Conn: conn, r: buf.Reader}, sessionConfig())
	if err != nil {
		_ = conn.Close()
		return err
	}
	r.mu.Lock()
	r.sessions[cluster] = append(r.sessions[cluster], sess)
	r.mu.Unlock()
	go func() {
		<-sess.CloseChan()
		r.mu.Lock()
		defer r.mu.Unlock()
		list := r.sessions[cluster]
		for i, s := range list {
			if s == sess {
				list = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(r.sessions, cluster)
		} else {
			r.sessions[cluster] = list
		}
	}()
	return nil
}

// Close closes every tunnel: the agents dial again (another replica, or this
// one when it is back).
func (r *Registry) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, list := range r.sessions {
		for _, s := range list {
			_ = s.Close()
		}
	}
}

// Connected says whether cluster's agent holds a tunnel to this replica.
func (r *Registry) Connected(cluster string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.sessions[cluster] {
		if !s.IsClosed() {
			return true
		}
	}
	return false
}

// Clusters is how many clusters hold a tunnel to this replica.
func (r *Registry) Clusters() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sessions)
}

// Dial opens a stream to cluster's agent, on its newest tunnel.
func (r *Registry) Dial(ctx context.Context, cluster string) (net.Conn, error) {
	r.mu.Lock()
	list := append([]*yamux.Session(nil), r.sessions[cluster]...)
	r.mu.Unlock()
	for i := len(list) - 1; i >= 0; i-- {
		if list[i].IsClosed() {
			continue
		}
		if stream, err := list[i].Open(); err == nil {
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
