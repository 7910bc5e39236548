package tunnel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/yamux"
	"k8s.io/client-go/rest"
)

// Agent keeps an agent's tunnels to the hub open: one to each hub replica,
// dialled again with backoff whenever one closes, and serves the hub's
// requests on them with Handler. It is a controller-runtime Runnable.
type Agent struct {
	// Hub is the agent's connection to the hub's API server.
	Hub *rest.Config
	// Path is the tunnel subresource's path on the hub's API server.
	Path string
	// Handler serves the requests the hub sends through the tunnels.
	Handler http.Handler
	// MinBackoff and MaxBackoff bound the wait between failed dials (defaults
	// 500 ms and 30 s).
	MinBackoff, MaxBackoff time.Duration
	Log                    logr.Logger

	mu       sync.Mutex
	sessions map[string]*yamux.Session
	wake     chan struct{}
}

// NeedLeaderElection is false: every agent replica may carry requests.
func (a *Agent) NeedLeaderElection() bool { return false }

// Connected is how many hub replicas the agent holds a tunnel to.
func (a *Agent) Connected() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.sessions)
}

// Start dials and holds the tunnels until ctx ends.
func (a *Agent) Start(ctx context.Context) error {
	minBackoff, maxBackoff := a.MinBackoff, a.MaxBackoff
	if minBackoff <= 0 {
		minBackoff = 500 * time.Millisecond
	}
	if maxBackoff <= 0 {
		maxBackoff = 30 * time.Second
	}
	a.mu.Lock()
	a.sessions, a.wake = map[string]*yamux.Session{}, make(chan struct{}, 1)
	a.mu.Unlock()
	rt, err := upgradeTransport(a.Hub)
	if err != nil {
		return err
	}
	want, backoff := 1, minBackoff
	for {
		if a.Connected() >= want {
			select {
			case <-ctx.Done():
				a.closeAll()
				return nil
			case <-a.wake:
				continue
			}
		}
		id, count, err := a.dial(ctx, rt)
		select {
		case <-ctx.Done():
			a.closeAll()
			return nil
		default:
		}
		switch {
		case err != nil:
			a.Log.Info("hub tunnel not open; dialling again", "error", err.Error(), "in", backoff.String())
		default:
			want = count
			if id != "" {
				backoff = minBackoff
				continue
			}
			// A replica already held: the load balancer chose it again.
		}
		select {
		case <-ctx.Done():
			a.closeAll()
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// dial opens one tunnel; it returns the new replica's identity (empty when
// the agent already held one to it) and how many replicas there are.
func (a *Agent) dial(ctx context.Context, rt http.RoundTripper) (string, int, error) {
	// The request's context is the agent's: the connection it upgrades to lives
	// on after the answer (the transport bounds the dial and the handshake).
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(a.Hub.Host, "/")+a.Path, nil)
	if err != nil {
		return "", 0, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", Protocol)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return "", 0, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		_ = resp.Body.Close()
		return "", 0, fmt.Errorf("the hub answered %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	conn, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		_ = resp.Body.Close()
		return "", 0, errors.New("the hub's answer is not a connection")
	}
	id := resp.Header.Get(ServerHeader)
	count, err := strconv.Atoi(resp.Header.Get(ServerCountHeader))
	if err != nil || count < 1 {
		count = 1
	}
	sess, err := yamux.Server(conn, sessionConfig())
	if err != nil {
		_ = conn.Close()
		return "", 0, err
	}
	// A replica holds one tunnel per cluster, the newest: one the agent
	// already held to it is replaced there, so here too.
	a.mu.Lock()
	old, held := a.sessions[id]
	a.sessions[id] = sess
	a.mu.Unlock()
	go a.serve(ctx, id, sess)
	if held {
		_ = old.Close()
		return "", count, nil
	}
	a.Log.Info("hub tunnel open", "replica", id, "replicas", count)
	return id, count, nil
}

// serve answers the hub's streams on sess until it closes, then asks Start to
// dial again.
func (a *Agent) serve(ctx context.Context, id string, sess *yamux.Session) {
	srv := &http.Server{Handler: a.Handler, ReadHeaderTimeout: 30 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	_ = srv.Serve(sess)
	_ = sess.Close()
	a.mu.Lock()
	if a.sessions[id] == sess {
		delete(a.sessions, id)
	}
	a.mu.Unlock()
	if ctx.Err() == nil {
		a.Log.Info("hub tunnel closed; dialling again", "replica", id)
	}
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

func (a *Agent) closeAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.sessions {
		_ = s.Close()
	}
}

// upgradeTransport is a round tripper to the hub that speaks HTTP/1.1, the only
// protocol a connection upgrade goes through, with the agent's credentials.
func upgradeTransport(hub *rest.Config) (http.RoundTripper, error) {
	cfg := rest.CopyConfig(hub)
	cfg.NextProtos = []string{"http/1.1"}
	cfg.Timeout = 0
	return rest.TransportFor(cfg)
}
