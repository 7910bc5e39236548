package debugapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	debugv1alpha1 "github.com/lodestar-dev/lodestar/api/debug/v1alpha1"
	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/agentidentity"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/tunnel"
)

// Default limits of open streams (logs, exec and port-forward sessions).
const (
	DefaultStreamsPerUser = 50
	// DefaultStreamsPerNamespace bounds the streams of one namespace's
	// Placements, whoever opens them: a namespace admin can mint users
	// (ServiceAccounts) without end.
	DefaultStreamsPerNamespace = 100
	DefaultStreams             = 1000
	// DefaultRecheck is how often an open stream's authorisation is checked
	// again: a revoked RoleBinding ends it within this.
	DefaultRecheck = 20 * time.Second
)

// copyBuffers are the proxy's copy buffers, 4 KiB each.
var copyBuffers = &bufferPool{pool: sync.Pool{New: func() any { b := make([]byte, 4<<10); return &b }}}

type bufferPool struct{ pool sync.Pool }

func (p *bufferPool) Get() []byte  { return *p.pool.Get().(*[]byte) }
func (p *bufferPool) Put(b []byte) { p.pool.Put(&b) }

// Server serves the debug API on the hub.
type Server struct {
	// localPace paces each user's local answers (Local).
	localPace userPace

	// Reader reads Placements (the hub manager's cache).
	Reader client.Reader
	// Works reads whether a Placement has Works on a cluster: from the API
	// server, since a manager caches only its own Works and the debug API
	// serves every manager's Placements (Reader when nil).
	Works client.Reader
	// Reviews checks a user's access (SubjectAccessReviews of the hub).
	Reviews authorizationclient.SubjectAccessReviewInterface
	// Tunnels are the agents' tunnels to this replica.
	Tunnels *tunnel.Registry
	// Auth authenticates the hub API server's proxy.
	Auth *FrontProxy
	// StreamsPerUser, StreamsPerNamespace and Streams bound the open streams of
	// one user, of one namespace's Placements and of the replica (defaults
	// DefaultStreamsPerUser, DefaultStreamsPerNamespace, DefaultStreams).
	StreamsPerUser, StreamsPerNamespace, Streams int
	// Recheck is how often an open stream is authorised again (DefaultRecheck).
	Recheck time.Duration
	// ConsumerRecheck is how often a consumer's open stream is checked
	// against the grants (DefaultConsumerRecheck).
	ConsumerRecheck time.Duration
	// Local answer the subresources the hub manager serves itself.
	Local map[string]LocalHandler
	Log   logr.Logger
	// tunnelAuth binds tunnels to the agent ServiceAccount that opened them.
	tunnelAuth *tunnelAuth

	once   sync.Once
	proxy  *httputil.ReverseProxy
	mu     sync.Mutex
	open   map[string]int
	openNS map[string]int
	total  int
}

type proxiedKey struct{}

// proxied is what Rewrite needs to know of a request.
type proxied struct {
	cluster, memberPath, user, placement, subresource string
	// consumer is the consumer's ServiceAccount (namespace/name) of a request
	// through the tunnel access provider.
	consumer string
}

func (s *Server) init() {
	s.once.Do(func() {
		if s.StreamsPerUser <= 0 {
			s.StreamsPerUser = DefaultStreamsPerUser
		}
		if s.StreamsPerNamespace <= 0 {
			s.StreamsPerNamespace = DefaultStreamsPerNamespace
		}
		if s.Streams <= 0 {
			s.Streams = DefaultStreams
		}
		if s.Recheck <= 0 {
			s.Recheck = DefaultRecheck
		}
		if s.ConsumerRecheck <= 0 {
			s.ConsumerRecheck = DefaultConsumerRecheck
		}
		s.open, s.openNS = map[string]int{}, map[string]int{}
		s.proxy = &httputil.ReverseProxy{
			Rewrite: s.rewrite,
			Transport: &http.Transport{
				// One tunnel stream per request: nothing is pooled across users.
				DisableKeepAlives: true,
				DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
					host, _, _ := net.SplitHostPort(addr)
					return s.Tunnels.Dial(ctx, strings.TrimSuffix(host, ".tunnel"))
				},
			},
			FlushInterval: -1,
			// Small copy buffers: a log line is far below 4 KiB, and a hub
			// holds a copy per open stream.
			BufferPool: copyBuffers,
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				p, _ := r.Context().Value(proxiedKey{}).(proxied)
				if r.Context().Err() != nil {
					return // The client left, or its access was revoked.
				}
				debugv1alpha1.WriteStatus(w, apierrors.NewServiceUnavailable(fmt.Sprintf("reaching cluster %s through its agent's tunnel: %v", p.cluster, err)))
			},
		}
	})
}

// ServeHTTP serves discovery, the agents' tunnels and the Placements' requests.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.init()
	switch r.URL.Path {
	case "/healthz", "/readyz", "/livez":
		_, _ = w.Write([]byte("ok"))
		return
	}
	if err := s.Auth.Verified(r); err != nil {
		debugv1alpha1.WriteStatus(w, apierrors.NewUnauthorized(err.Error()))
		return
	}
	switch strings.TrimSuffix(r.URL.Path, "/") {
	case debugv1alpha1.GroupVersionPath:
		debugv1alpha1.WriteJSON(w, http.StatusOK, Discovery())
		return
	case "/apis/" + debugv1alpha1.Group:
		debugv1alpha1.WriteJSON(w, http.StatusOK, &metav1.APIGroup{
			TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: debugv1alpha1.Group,
			Versions:         []metav1.GroupVersionForDiscovery{{GroupVersion: debugv1alpha1.Group + "/" + debugv1alpha1.Version, Version: debugv1alpha1.Version}},
			PreferredVersion: metav1.GroupVersionForDiscovery{GroupVersion: debugv1alpha1.Group + "/" + debugv1alpha1.Version, Version: debugv1alpha1.Version},
		})
		return
	}
	if cluster, memberPath, ok := debugv1alpha1.ParseClusterProxy(r.URL.Path); ok {
		user, err := s.Auth.Authenticate(r)
		if err != nil {
			debugv1alpha1.WriteStatus(w, apierrors.NewUnauthorized(err.Error()))
			return
		}
		s.serveConsumer(w, r, user, cluster, memberPath)
		return
	}
	req, ok := debugv1alpha1.ParseRequest(r.URL.Path)
	if !ok {
		debugv1alpha1.WriteStatus(w, apierrors.NewNotFound(schema.GroupResource{Group: debugv1alpha1.Group}, r.URL.Path))
		return
	}
	user, err := s.Auth.Authenticate(r)
	if err != nil {
		debugv1alpha1.WriteStatus(w, apierrors.NewUnauthorized(err.Error()))
		return
	}
	switch req.Resource {
	case debugv1alpha1.Tunnels:
		s.serveTunnel(w, r, user, req)
	case debugv1alpha1.Placements:
		s.servePlacement(w, r, user, req)
	default:
		debugv1alpha1.WriteStatus(w, apierrors.NewNotFound(schema.GroupResource{Group: debugv1alpha1.Group, Resource: req.Resource}, req.Name))
	}
}

// Discovery is the debug API's resource list.
func Discovery() *metav1.APIResourceList {
	list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: debugv1alpha1.Group + "/" + debugv1alpha1.Version}
	for _, sub := range debugv1alpha1.Subresources {
		list.APIResources = append(list.APIResources, metav1.APIResource{Name: debugv1alpha1.Placements + "/" + sub, Namespaced: true, Kind: "Placement", Verbs: []string{"get", "create"}})
	}
	list.APIResources = append(list.APIResources, metav1.APIResource{Name: debugv1alpha1.Tunnels + "/" + debugv1alpha1.TunnelSubresource, Namespaced: true, Kind: "Tunnel", Verbs: []string{"create"}},
		metav1.APIResource{Name: debugv1alpha1.Clusters + "/" + debugv1alpha1.Proxy, Kind: "Cluster", Verbs: debugv1alpha1.ProxyVerbs})
	return list
}

// serveTunnel takes an agent's tunnel: only the agent of the cluster the path
// names, by its own hub identity, whatever it says of itself.
func (s *Server) serveTunnel(w http.ResponseWriter, r *http.Request, user User, req debugv1alpha1.Request) {
	cluster := req.Name
	if req.Subresource != debugv1alpha1.TunnelSubresource || req.Cluster != "" {
		debugv1alpha1.WriteStatus(w, apierrors.NewNotFound(schema.GroupResource{Group: debugv1alpha1.Group, Resource: debugv1alpha1.Tunnels}, cluster))
		return
	}
	if req.Namespace != names.ClusterNamespace(cluster) || user.Name != agentidentity.User(cluster) {
		debugv1alpha1.WriteStatus(w, apierrors.NewForbidden(schema.GroupResource{Group: debugv1alpha1.Group, Resource: debugv1alpha1.Tunnels}, cluster,
			fmt.Errorf("only the agent of cluster %s (%s) opens its tunnel, in namespace %s; %s may not", cluster, agentidentity.User(cluster), names.ClusterNamespace(cluster), user.Name)))
		return
	}
	id, err := s.tunnelAuth.identity(r.Context(), cluster, user)
	if err != nil {
		debugv1alpha1.WriteStatus(w, apierrors.NewForbidden(schema.GroupResource{Group: debugv1alpha1.Group, Resource: debugv1alpha1.Tunnels}, cluster, err))
		return
	}
	if err := s.Tunnels.Accept(w, r, cluster, id); err != nil {
		debugv1alpha1.WriteStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	s.Log.V(1).Info("agent tunnel open", "cluster", cluster)
}

// servePlacement authorises a request for a member on behalf of a Placement
// and passes it to the cluster's agent.
func (s *Server) servePlacement(w http.ResponseWriter, r *http.Request, user User, req debugv1alpha1.Request) {
	gr := schema.GroupResource{Group: debugv1alpha1.Group, Resource: debugv1alpha1.Placements + "/" + req.Subresource}
	if local, ok := s.Local[req.Subresource]; ok {
		s.serveLocal(w, r, user, req, local)
		return
	}
	target, err := debugv1alpha1.ParseMemberPath(req.Subresource, r.Method, req.MemberPath)
	if err != nil || req.Cluster == "" {
		if err == nil {
			err = errors.New("no cluster in the path")
		}
		debugv1alpha1.WriteStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	if target.Namespace != req.Namespace {
		debugv1alpha1.WriteStatus(w, apierrors.NewForbidden(gr, req.Name, fmt.Errorf("a Placement of namespace %s reaches only namespace %s on its clusters, not %s", req.Namespace, req.Namespace, target.Namespace)))
		return
	}
	ctx := r.Context()
	if _, ok := s.authorizedPlacement(w, r, user, req); !ok {
		return
	}
	works := &metav1.PartialObjectMetadataList{}
	works.SetGroupVersionKind(workv1alpha1.SchemeGroupVersion.WithKind("WorkList"))
	if err := cmp.Or[client.Reader](s.Works, s.Reader).List(ctx, works, client.InNamespace(names.ClusterNamespace(req.Cluster)), client.MatchingLabels{
		placementv1alpha1.PlacementNameLabel: names.LabelValue(req.Name), placementv1alpha1.PlacementNamespaceLabel: req.Namespace,
	}, client.Limit(1)); err != nil {
		debugv1alpha1.WriteStatus(w, err)
		return
	}
	if len(works.Items) == 0 {
		debugv1alpha1.WriteStatus(w, apierrors.NewNotFound(schema.GroupResource{Group: placementv1alpha1.GroupVersion.Group, Resource: "placements"},
			fmt.Sprintf("%s on cluster %s (the Placement places nothing there)", req.Name, req.Cluster)))
		return
	}
	if !s.Tunnels.Connected(req.Cluster) {
		debugv1alpha1.WriteStatus(w, apierrors.NewServiceUnavailable(fmt.Sprintf("cluster %s: its agent holds no tunnel to this hub replica (%s); the agent dials again within seconds if it runs and reaches the hub", req.Cluster, s.Tunnels.ID)))
		return
	}
	release, err := s.acquire(user.Name, req.Namespace)
	if err != nil {
		debugv1alpha1.WriteStatus(w, err)
		return
	}
	defer release()
	ctx, cancel := context.WithCancelCause(context.WithValue(ctx, proxiedKey{}, proxied{
		cluster: req.Cluster, memberPath: req.MemberPath, user: user.Name, placement: req.Namespace + "/" + req.Name, subresource: req.Subresource,
	}))
	defer cancel(nil)
	go s.recheck(ctx, cancel, user, req, r.Method)
	s.serveProxied(w, r.WithContext(ctx), req.Cluster)
}

// revokedError is why an open request was ended: its access was revoked.
type revokedError struct{ msg string }

func (e *revokedError) Error() string { return e.msg }

// serveProxied passes r through cluster's tunnel. A request ended because its
// access was revoked (its context's cause a *revokedError) ends cleanly, not
// with a reset stream (which the client reads as INTERNAL_ERROR): a watch
// (JSON or protobuf) gets a last ERROR event whose Forbidden Status says what
// was revoked.
func (s *Server) serveProxied(w http.ResponseWriter, r *http.Request, cluster string) {
	defer func() {
		v := recover()
		revoked := (*revokedError)(nil)
		isRevoked := errors.As(context.Cause(r.Context()), &revoked)
		if v != nil && (v != http.ErrAbortHandler || !isRevoked) { //nolint:errorlint // the panic value itself, as net/http compares it
			panic(v)
		}
		if isRevoked && isWatch(r) {
			st := apierrors.NewForbidden(debugv1alpha1.ClustersResource, cluster, revoked).ErrStatus
			if err := writeWatchError(w, w.Header().Get("Content-Type"), &st); err == nil {
				if f, ok := w.(http.Flusher); ok {
					f.Flush()
				}
			}
		}
	}()
	s.proxy.ServeHTTP(w, r)
}

// watchCodecs encode a watch's events, as the API server does: JSON or
// protobuf, whichever the watch streams.
var watchCodecs = func() serializer.CodecFactory {
	sch := runtime.NewScheme()
	metav1.AddToGroupVersion(sch, schema.GroupVersion{Version: "v1"})
	return serializer.NewCodecFactory(sch)
}()

// writeWatchError writes a watch's ERROR event carrying st, framed for the
// watch's content type (a JSON or a protobuf stream).
func writeWatchError(w io.Writer, contentType string, st *metav1.Status) error {
	mediaType, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return err
	}
	info, ok := runtime.SerializerInfoForMediaType(watchCodecs.SupportedMediaTypes(), mediaType)
	if !ok || info.StreamSerializer == nil {
		return fmt.Errorf("no watch encoding for %q", contentType)
	}
	st.APIVersion, st.Kind = "v1", "Status"
	object, err := runtime.Encode(watchCodecs.EncoderForVersion(info.Serializer, schema.GroupVersion{Version: "v1"}), st)
	if err != nil {
		return err
	}
	enc := streaming.NewEncoder(info.StreamSerializer.NewFrameWriter(w), info.StreamSerializer.Serializer)
	return enc.Encode(&metav1.WatchEvent{Type: "ERROR", Object: runtime.RawExtension{Raw: object}})
}

// isWatch tells whether r asks to watch.
func isWatch(r *http.Request) bool {
	v := r.URL.Query().Get("watch")
	return v == "true" || v == "1"
}

// serveLocal answers a GET of a subresource the hub manager serves itself,
// once the hub authorised the user for it.
func (s *Server) serveLocal(w http.ResponseWriter, r *http.Request, user User, req debugv1alpha1.Request, local LocalHandler) {
	if r.Method != http.MethodGet || req.MemberPath != "" {
		debugv1alpha1.WriteStatus(w, apierrors.NewBadRequest(fmt.Sprintf("placements/%s takes a GET of .../%s/[<cluster>]", req.Subresource, req.Subresource)))
		return
	}
	if ok, wait := s.localPace.allow(user.Name, time.Now()); !ok {
		debugv1alpha1.WriteStatus(w, apierrors.NewTooManyRequests(
			fmt.Sprintf("user %q asks placements/%s more than %d times a second", user.Name, req.Subresource, DefaultLocalPerUser), int(wait.Seconds())+1))
		return
	}
	placement, ok := s.authorizedPlacement(w, r, user, req)
	if !ok {
		return
	}
	out, err := local(r.Context(), s.Reader, placement, req.Cluster)
	if err != nil {
		debugv1alpha1.WriteStatus(w, err)
		return
	}
	debugv1alpha1.WriteJSON(w, http.StatusOK, out)
}

// authorizedPlacement reads the request's Placement once the hub authorised
// the user for its subresource; false when it answered the request already
// (a refusal, a Placement that is not there).
func (s *Server) authorizedPlacement(w http.ResponseWriter, r *http.Request, user User, req debugv1alpha1.Request) (*placementv1alpha1.Placement, bool) {
	gr := schema.GroupResource{Group: debugv1alpha1.Group, Resource: debugv1alpha1.Placements + "/" + req.Subresource}
	ctx := r.Context()
	if allowed, reason, err := s.allowed(ctx, user, req, r.Method); err != nil {
		debugv1alpha1.WriteStatus(w, apierrors.NewInternalError(fmt.Errorf("checking access: %w", err)))
		return nil, false
	} else if !allowed {
		debugv1alpha1.WriteStatus(w, apierrors.NewForbidden(gr, req.Name, fmt.Errorf("user %q may not %s placements/%s in namespace %s on the hub%s", user.Name, debugv1alpha1.Verb(r.Method), req.Subresource, req.Namespace, reason)))
		return nil, false
	}
	placement := &placementv1alpha1.Placement{}
	if err := s.Reader.Get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: req.Name}, placement); err != nil {
		debugv1alpha1.WriteStatus(w, err)
		return nil, false
	}
	return placement, true
}

// allowed asks the hub whether user may act on the Placement's subresource.
func (s *Server) allowed(ctx context.Context, user User, req debugv1alpha1.Request, method string) (bool, string, error) {
	review, err := askHub(ctx, s.Reviews, user, authorizationv1.ResourceAttributes{
		Namespace: req.Namespace, Verb: debugv1alpha1.Verb(method), Group: debugv1alpha1.Group, Version: debugv1alpha1.Version,
		Resource: debugv1alpha1.Placements, Subresource: req.Subresource, Name: req.Name,
	})
	if err != nil {
		return false, "", err
	}
	reason := ""
	if review.Status.Reason != "" {
		reason = ": " + review.Status.Reason
	}
	return review.Status.Allowed, reason, nil
}

// askHub asks the hub (a SubjectAccessReview) whether user may do attrs.
func askHub(ctx context.Context, reviews authorizationclient.SubjectAccessReviewInterface, user User, attrs authorizationv1.ResourceAttributes) (*authorizationv1.SubjectAccessReview, error) {
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = v
	}
	return reviews.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Name, UID: user.UID, Groups: user.Groups, Extra: extra, ResourceAttributes: &attrs,
	}}, metav1.CreateOptions{})
}

// recheck ends a request whose access the hub revoked while it is open.
func (s *Server) recheck(ctx context.Context, cancel context.CancelCauseFunc, user User, req debugv1alpha1.Request, method string) {
	t := time.NewTicker(s.Recheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		allowed, _, err := s.allowed(ctx, user, req, method)
		if err != nil {
			continue // The hub API server unreachable for a moment ends nothing.
		}
		if !allowed {
			s.Log.Info("access revoked: ending the open request", "user", user.Name, "placement", req.Namespace+"/"+req.Name, "subresource", req.Subresource, "cluster", req.Cluster)
			cancel(&revokedError{fmt.Sprintf("access revoked: user %s may no longer use placements/%s of %s/%s", user.Name, req.Subresource, req.Namespace, req.Name)})
			return
		}
	}
}

// acquire counts an open request against the limits: of its user, of its
// Placement's namespace, and of the replica.
func (s *Server) acquire(user, namespace string) (func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[user] >= s.StreamsPerUser {
		return nil, apierrors.NewTooManyRequests(fmt.Sprintf("user %q has %d debug streams open, the most one user may (close some, or narrow the command with --cluster)", user, s.open[user]), 1)
	}
	if s.openNS[namespace] >= s.StreamsPerNamespace {
		return nil, apierrors.NewTooManyRequests(fmt.Sprintf("the Placements of namespace %s have %d debug streams open, the most one namespace may; try again later", namespace, s.openNS[namespace]), 1)
	}
	if s.total >= s.Streams {
		return nil, apierrors.NewTooManyRequests(fmt.Sprintf("this hub replica has %d debug streams open, the most it serves; try again later", s.total), 1)
	}
	s.open[user]++
	s.openNS[namespace]++
	s.total++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.total--
		if s.open[user]--; s.open[user] <= 0 {
			delete(s.open, user)
		}
		if s.openNS[namespace]--; s.openNS[namespace] <= 0 {
			delete(s.openNS, namespace)
		}
	}, nil
}

// rewrite sends a request to the cluster's agent, with the hub's word on who
// it is for instead of any identity headers of its own.
func (s *Server) rewrite(pr *httputil.ProxyRequest) {
	p, _ := pr.In.Context().Value(proxiedKey{}).(proxied)
	pr.Out.URL = &url.URL{Scheme: "http", Host: p.cluster + ".tunnel", Path: p.memberPath, RawQuery: pr.In.URL.RawQuery}
	pr.Out.Host = ""
	for name := range pr.Out.Header {
		if s.Auth.IdentityHeader(name) || strings.HasPrefix(strings.ToLower(name), "lodestar-") {
			pr.Out.Header.Del(name)
		}
	}
	if p.consumer != "" {
		pr.Out.Header.Set(debugv1alpha1.ConsumerHeader, p.consumer)
		return
	}
	pr.Out.Header.Set(debugv1alpha1.UserHeader, p.user)
	pr.Out.Header.Set(debugv1alpha1.PlacementHeader, p.placement)
	pr.Out.Header.Set(debugv1alpha1.SubresourceHeader, p.subresource)
}
