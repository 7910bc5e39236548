// Package debug is the agent's side of debugging from the hub
// (docs/debugging.md): it keeps the agent's tunnels to the hub open
// (internal/tunnel) and serves the requests the hub's debug server sends
// through them on the member's API server, as the prefixed identity of the hub
// user (debugv1alpha1.MemberUser, debugv1alpha1.TenantGroup) and only for the pods of
// the Placement's workloads.
package debug

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1alpha1 "github.com/lodestar-dev/lodestar/api/debug/v1alpha1"
)

// +kubebuilder:rbac:groups=debug.lodestar.dev,resources=tunnels/proxy,verbs=create

// Tenant access the agent grants the tenant group of a namespace it serves a
// request in (the member admin's choice, agent chart debug.tenantAccess).
const (
	// TenantAccessNone grants nothing: the member admin binds the groups.
	TenantAccessNone = "none"
	// TenantAccessLogs binds LogsRole: pods, their logs and events.
	TenantAccessLogs = "logs"
	// TenantAccessExec binds ExecRole: LogsRole and exec and port-forward.
	TenantAccessExec = "exec"
)

// The member ClusterRoles the agent chart installs for the tenant groups, and
// the RoleBinding the agent makes in a namespace.
const (
	LogsRole           = "lodestar:debug:logs"
	ExecRole           = "lodestar:debug:exec"
	TenantRoleBinding  = "lodestar-debug-tenants"
	tenantBindingLabel = "debug.lodestar.dev/tenant-access"
)

// Handler serves the hub's requests on the member.
type Handler struct {
	// Member is the agent's connection to its member.
	Member *rest.Config
	// MemberClient reads the member directly (pods, ReplicaSets, Jobs) and
	// makes the tenant RoleBindings.
	MemberClient client.Client
	// Hub reads the cluster's Works (the agent's hub cache).
	Hub client.Reader
	// ClusterNamespace is the cluster's namespace on the hub; HubID the hub's
	// identity in the names of the member's AppliedWorks.
	ClusterNamespace, HubID string
	// TenantAccess is what the agent grants the tenant groups (TenantAccess*).
	TenantAccess string
	// ConsumerAccess serves the consumers of the tunnel access provider
	// (serveConsumer); off, they are refused.
	ConsumerAccess bool
	Log            logr.Logger

	once      sync.Once
	initErr   error
	transport http.RoundTripper
	proxy     *httputil.ReverseProxy
	base      *url.URL
	bound     sync.Map
}

func (h *Handler) init() error {
	h.once.Do(func() {
		cfg := rest.CopyConfig(h.Member)
		// The hub user's identity is set per request; HTTP/1.1 for upgrades.
		cfg.Impersonate = rest.ImpersonationConfig{}
		cfg.NextProtos = []string{"http/1.1"}
		cfg.Timeout = 0
		if h.transport, h.initErr = rest.TransportFor(cfg); h.initErr != nil {
			return
		}
		if h.base, h.initErr = url.Parse(strings.TrimSuffix(cfg.Host, "/") + "/"); h.initErr != nil {
			return
		}
		h.proxy = &httputil.ReverseProxy{
			Transport:     h.transport,
			FlushInterval: -1,
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(h.base)
				pr.Out.URL.Path, pr.Out.URL.RawPath = pr.In.URL.Path, ""
				if p := strings.TrimSuffix(h.base.Path, "/"); p != "" {
					pr.Out.URL.Path = p + pr.In.URL.Path
				}
			},
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				if r.Context().Err() == nil {
					debugv1alpha1.WriteStatus(w, apierrors.NewServiceUnavailable(fmt.Sprintf("reaching the member's API server: %v", err)))
				}
			},
		}
	})
	return h.initErr
}

// ServeHTTP serves one request of the hub's debug server.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := h.init(); err != nil {
		debugv1alpha1.WriteStatus(w, apierrors.NewInternalError(err))
		return
	}
	if consumer := r.Header.Get(debugv1alpha1.ConsumerHeader); consumer != "" {
		h.serveConsumer(w, r, consumer)
		return
	}
	user, placement, sub := r.Header.Get(debugv1alpha1.UserHeader), r.Header.Get(debugv1alpha1.PlacementHeader), r.Header.Get(debugv1alpha1.SubresourceHeader)
	namespace, name, _ := strings.Cut(placement, "/")
	target, err := debugv1alpha1.ParseMemberPath(sub, r.Method, r.URL.Path)
	if err != nil || user == "" || name == "" {
		if err == nil {
			err = fmt.Errorf("a request without its user or Placement")
		}
		debugv1alpha1.WriteStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	if target.Namespace != namespace {
		debugv1alpha1.WriteStatus(w, apierrors.NewForbidden(podsResource, target.Pod, fmt.Errorf("a Placement of namespace %s reaches only that namespace", namespace)))
		return
	}
	stripIdentity(r.Header)
	ctx := r.Context()
	owned, err := placedWorkloads(ctx, h.Hub, h.MemberClient, h.HubID, h.ClusterNamespace, namespace, name)
	if err != nil {
		debugv1alpha1.WriteStatus(w, apierrors.NewInternalError(err))
		return
	}
	if owned.empty() {
		debugv1alpha1.WriteStatus(w, apierrors.NewNotFound(placementsResource, fmt.Sprintf("%s (it places nothing in namespace %s of this cluster)", name, namespace)))
		return
	}
	h.grantTenantAccess(ctx, namespace)
	r.Header.Set("Impersonate-User", debugv1alpha1.MemberUser(user))
	r.Header.Set("Impersonate-Group", debugv1alpha1.TenantGroup(namespace))
	switch sub {
	case debugv1alpha1.Pods, debugv1alpha1.Events:
		h.list(w, r, sub, owned)
	default:
		pod := &corev1.Pod{}
		if err := h.MemberClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: target.Pod}, pod); err != nil {
			debugv1alpha1.WriteStatus(w, err)
			return
		}
		if !owned.ownsPod(pod) {
			debugv1alpha1.WriteStatus(w, apierrors.NewForbidden(podsResource, target.Pod, fmt.Errorf("the pod is not one of Placement %s's workloads on this cluster", placement)))
			return
		}
		h.proxy.ServeHTTP(w, r)
	}
}

var (
	podsResource       = corev1.Resource("pods")
	placementsResource = debugv1alpha1.PlacementsResource
)

// Bounds of a list of pods or events: read from the member a page at a time,
// at most maxListed of the Placement's kept.
const (
	listPage  = 500
	maxListed = 5000
)

// list lists pods or events as the user, a page at a time, and keeps those of
// the Placement's workloads. It lists only: a watch is refused, never passed
// to the member.
func (h *Handler) list(w http.ResponseWriter, r *http.Request, sub string, owned *workloads) {
	query := r.URL.Query()
	if v := query.Get("watch"); v != "" && v != "false" && v != "0" {
		debugv1alpha1.WriteStatus(w, apierrors.NewBadRequest("the debug API lists pods and events; it does not watch them (follow logs with kubectl lodestar logs -f)"))
		return
	}
	for _, k := range []string{"watch", "allowWatchBookmarks", "sendInitialEvents", "resourceVersionMatch", "continue"} {
		query.Del(k)
	}
	var pods map[types.UID]*corev1.Pod
	if sub == debugv1alpha1.Events {
		var err error
		if pods, err = h.podsByUID(r.Context(), namespaceOf(r.URL.Path)); err != nil {
			debugv1alpha1.WriteStatus(w, apierrors.NewInternalError(err))
			return
		}
	}
	podList, eventList := &corev1.PodList{}, &corev1.EventList{}
	kept, truncated := 0, false
	for next := ""; ; {
		query.Set("limit", strconv.Itoa(listPage))
		query.Set("continue", next)
		status, body, err := h.get(r, query)
		if err != nil {
			debugv1alpha1.WriteStatus(w, apierrors.NewServiceUnavailable(fmt.Sprintf("reaching the member's API server: %v", err)))
			return
		}
		if status != http.StatusOK {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write(body)
			return
		}
		var meta metav1.ListMeta
		switch sub {
		case debugv1alpha1.Pods:
			page := &corev1.PodList{}
			if err := json.Unmarshal(body, page); err != nil {
				debugv1alpha1.WriteStatus(w, apierrors.NewInternalError(err))
				return
			}
			for i := range page.Items {
				if owned.ownsPod(&page.Items[i]) && kept < maxListed {
					podList.Items = append(podList.Items, page.Items[i])
					kept++
				}
			}
			meta = page.ListMeta
		case debugv1alpha1.Events:
			page := &corev1.EventList{}
			if err := json.Unmarshal(body, page); err != nil {
				debugv1alpha1.WriteStatus(w, apierrors.NewInternalError(err))
				return
			}
			for i := range page.Items {
				if owned.ownsEvent(&page.Items[i], pods) && kept < maxListed {
					eventList.Items = append(eventList.Items, page.Items[i])
					kept++
				}
			}
			meta = page.ListMeta
		}
		if kept >= maxListed && meta.Continue != "" {
			truncated = true
			break
		}
		if next = meta.Continue; next == "" {
			break
		}
	}
	if truncated {
		w.Header().Add("Warning", fmt.Sprintf(`299 - "more than %d %s of the Placement on this cluster: the first %d are listed"`, maxListed, sub, maxListed))
	}
	w.Header().Set("Content-Type", "application/json")
	var out any = podList
	if sub == debugv1alpha1.Events {
		out = eventList
	}
	_ = json.NewEncoder(w).Encode(out)
}

// get reads one page of a list from the member as the user (r's headers), at
// most maxPageBytes of it.
func (h *Handler) get(r *http.Request, query url.Values) (int, []byte, error) {
	u := *h.base
	u.Path = strings.TrimSuffix(h.base.Path, "/") + r.URL.Path
	u.RawQuery = query.Encode()
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header = r.Header.Clone()
	req.Header.Set("Accept", "application/json")
	req.Header.Del("Accept-Encoding")
	resp, err := h.transport.RoundTrip(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPageBytes+1))
	if err != nil {
		return 0, nil, err
	}
	if len(body) > maxPageBytes {
		return 0, nil, fmt.Errorf("a page of %d items is more than %d MiB", listPage, maxPageBytes>>20)
	}
	return resp.StatusCode, body, nil
}

// maxPageBytes bounds one page read from the member.
const maxPageBytes = 64 << 20

// podsByUID reads the namespace's pods as the agent: an event names its pod,
// whose controllers say whose it is.
func (h *Handler) podsByUID(ctx context.Context, namespace string) (map[types.UID]*corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := h.MemberClient.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	out := make(map[types.UID]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].UID] = &list.Items[i]
	}
	return out, nil
}

func namespaceOf(path string) string {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if len(parts) > 3 {
		return parts[3]
	}
	return ""
}

// grantTenantAccess binds the namespace's tenant group to the role the member
// admin chose, once per namespace (by its UID: a namespace deleted and made
// again is bound again) and agent run. A binding the agent made
// earlier for another choice (the member admin turned exec off, or all
// access) is replaced or removed, so that the member's word stands; one the
// agent did not make is left as it is (the member admin's), and never deleted.
func (h *Handler) grantTenantAccess(ctx context.Context, namespace string) {
	role := map[string]string{TenantAccessLogs: LogsRole, TenantAccessExec: ExecRole}[h.TenantAccess]
	ns := &corev1.Namespace{}
	if err := h.MemberClient.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		h.Log.Error(err, "reading the namespace to grant its tenant group access", "namespace", namespace)
		return
	}
	if uid, done := h.bound.Load(namespace); done && uid == ns.UID {
		return
	}
	have := &rbacv1.RoleBinding{}
	err := h.MemberClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: TenantRoleBinding}, have)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		h.Log.Error(err, "reading the tenant group's access to its namespace", "namespace", namespace)
		return
	case have.Labels[tenantBindingLabel] == "":
		h.bound.Store(namespace, ns.UID) // the member admin's own
		return
	case have.RoleRef.Name == role:
		h.bound.Store(namespace, ns.UID)
		return
	default:
		// Ours, for an earlier choice: its role cannot change, so it goes.
		if err := h.MemberClient.Delete(ctx, have, client.Preconditions{UID: &have.UID}); client.IgnoreNotFound(err) != nil {
			h.Log.Error(err, "withdrawing the tenant group's earlier access", "namespace", namespace, "role", have.RoleRef.Name)
			return
		}
	}
	if role == "" {
		h.bound.Store(namespace, ns.UID)
		return
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: TenantRoleBinding, Labels: map[string]string{tenantBindingLabel: h.TenantAccess}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: debugv1alpha1.TenantGroup(namespace)}},
	}
	if err := h.MemberClient.Create(ctx, rb); err != nil && !apierrors.IsAlreadyExists(err) {
		h.Log.Error(err, "granting the tenant group access to its namespace", "namespace", namespace, "role", role)
		return
	}
	h.bound.Store(namespace, ns.UID)
}
