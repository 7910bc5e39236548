// Package console is `kubectl lodestar console`: a web page of the fleet,
// served on loopback, that reads and acts with the user's own hub credentials
// (nothing is installed on the hub; what the user may not read is absent,
// what the user may not do fails with the hub's own answer). It shows the
// clusters, the Placements of a namespace with each cluster's status and why
// clusters were left out, a Placement's rollout with the buttons of `kubectl
// lodestar rollout` (approve, pause, resume, undo: the same code), and its
// pods' logs and events through the debug API. Watches on the hub push
// changes to the page (server-sent events); lists are paged on the server, so
// thousands of clusters cost the page one page at a time. Every asset is
// embedded: it works without internet access.
package console

import (
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lodestar-dev/lodestar/api/client/clientset/versioned"
	"github.com/lodestar-dev/lodestar/internal/scheme"
	"github.com/lodestar-dev/lodestar/internal/version"
)

//go:embed assets
var assets embed.FS

// cookie carries the session token once the page was opened with it.
const cookie = "lodestar-console"

// csrfHeader must be on every request that changes something: a page of
// another origin cannot set it without a CORS preflight, which is never
// answered.
const csrfHeader = "X-Lodestar-Console"

// Options are what the console reads with.
type Options struct {
	// Config is the user's connection to the hub (kubeconfig, --as, ...).
	Config *rest.Config
	// ClusterSet is the cluster set's namespace shown; empty shows every set.
	ClusterSet string
	// Namespace is the namespace whose Placements are shown first.
	Namespace string
}

// Server serves the console.
type Server struct {
	opts   Options
	c      client.WithWatch
	typed  versioned.Interface
	token  string
	events *broadcaster
	// addr is the address the server listens on (Host header check).
	addr string
	// counts are the clusters view's heartbeats and Work counts, reused a while.
	counts cached
}

// New makes a console of the hub opts.Config reaches.
func New(opts Options) (*Server, error) {
	c, err := client.NewWithWatch(opts.Config, client.Options{Scheme: scheme.Hub()})
	if err != nil {
		return nil, err
	}
	typed, err := versioned.NewForConfig(opts.Config)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	return &Server{opts: opts, c: c, typed: typed, token: hex.EncodeToString(b), events: newBroadcaster()}, nil
}

// Listen binds addr, which must be a loopback address (the console acts with
// the user's credentials: it is the user's alone), and returns the listener
// and the URL to open (it carries the session token).
func (s *Server) Listen(addr string) (net.Listener, string, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, "", fmt.Errorf("--address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, "", fmt.Errorf("--address %q is not a loopback address: the console acts with your credentials and serves only you", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	s.addr = l.Addr().String()
	return l, "http://" + s.addr + "/?token=" + s.token, nil
}

// Handler is the console's HTTP handler.
func (s *Server) Handler() http.Handler {
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", s.index)
	api := map[string]func(*http.Request) (any, error){
		"GET /api/about":      s.about,
		"GET /api/clusters":   s.clusters,
		"GET /api/namespaces": s.namespaces,
		"GET /api/placements": s.placements,
		"GET /api/placement":  s.placement,
		"GET /api/pods":       s.pods,
		"GET /api/logs":       s.logs,
		"GET /api/events":     s.eventsOf,
		"POST /api/rollout":   s.rollout,
	}
	for pattern, h := range api {
		mux.Handle(pattern, s.authorised(jsonHandler(h)))
	}
	mux.Handle("GET /api/watch", s.authorised(http.HandlerFunc(s.watch)))
	return s.sameHost(mux)
}

// sameHost refuses requests for another host name (DNS rebinding: a page of
// another site that resolves its name to 127.0.0.1 reaches this port).
func (s *Server) sameHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, port, _ := net.SplitHostPort(s.addr)
		if s.addr != "" && r.Host != s.addr && r.Host != "localhost:"+port && r.Host != "127.0.0.1:"+port {
			http.Error(w, "unknown host", http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// index serves the page to the one who holds the token (from the URL the
// command printed) and gives it the session cookie.
func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	if t := r.URL.Query().Get("token"); t != "" {
		if !s.valid(t) {
			http.Error(w, "this console's URL carries another token: open the one kubectl lodestar console printed", http.StatusForbidden)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: cookie, Value: s.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	if c, err := r.Cookie(cookie); err != nil || !s.valid(c.Value) {
		http.Error(w, "open the URL kubectl lodestar console printed (it carries the session's token)", http.StatusForbidden)
		return
	}
	page, err := assets.ReadFile("assets/index.html")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'")
	w.Header().Set("X-Frame-Options", "DENY")
	_, _ = w.Write(page)
}

func (s *Server) valid(token string) bool {
	return subtle.ConstantTimeCompare([]byte(token), []byte(s.token)) == 1
}

// authorised lets only the session's own requests through; those that
// change something also carry csrfHeader.
func (s *Server) authorised(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie(cookie)
		if err != nil || !s.valid(c.Value) {
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "no session: open the URL kubectl lodestar console printed"})
			return
		}
		if r.Method != http.MethodGet && r.Header.Get(csrfHeader) != "1" {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "missing " + csrfHeader})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// jsonHandler writes what h returns as JSON, and its error with the hub's
// status code (403 stays 403: the page says what the user may not do).
func jsonHandler(h func(*http.Request) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out, err := h(r)
		if err != nil {
			code := http.StatusBadGateway
			var status apierrors.APIStatus
			var bad *badRequest
			switch {
			case errors.As(err, &bad):
				code = http.StatusBadRequest
			case errors.As(err, &status) && status.Status().Code != 0:
				code = int(status.Status().Code)
			}
			writeJSON(w, code, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, out)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// badRequest is a request the console cannot make sense of.
type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }

// required reads query parameters that must be set.
func required(r *http.Request, names ...string) ([]string, error) {
	out := make([]string, len(names))
	for i, n := range names {
		if out[i] = r.URL.Query().Get(n); out[i] == "" {
			return nil, &badRequest{"missing the " + n + " parameter"}
		}
	}
	return out, nil
}

// page reads offset and limit (at most maxPage, default defaultPage).
func page(r *http.Request) (offset, limit int) {
	offset, _ = strconv.Atoi(r.URL.Query().Get("offset"))
	limit, _ = strconv.Atoi(r.URL.Query().Get("limit"))
	if limit <= 0 || limit > maxPage {
		limit = defaultPage
	}
	return max(offset, 0), limit
}

const (
	defaultPage = 100
	maxPage     = 500
)

// window is items[offset:offset+limit], clamped.
func window[T any](items []T, offset, limit int) []T {
	if offset >= len(items) {
		return []T{}
	}
	return items[offset:min(offset+limit, len(items))]
}

// contains reports whether s holds q, ignoring case (the pages' filters).
func contains(s, q string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(q))
}

// About is who the console reads as and where.
type About struct {
	Version    string `json:"version"`
	Server     string `json:"server"`
	User       string `json:"user,omitempty"`
	Namespace  string `json:"namespace"`
	ClusterSet string `json:"clusterSet,omitempty"`
}

func (s *Server) about(*http.Request) (any, error) {
	return About{Version: version.Version(), Server: s.opts.Config.Host, User: s.opts.Config.Impersonate.UserName,
		Namespace: s.opts.Namespace, ClusterSet: s.opts.ClusterSet}, nil
}
