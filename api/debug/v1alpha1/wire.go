// Package v1alpha1 is the wire contract of Lodestar's debug API,
// `debug.lodestar.dev/v1alpha1`: an aggregated API of the hub's API server (an
// APIService the hub chart installs) that the hub manager serves
// (internal/debugapi) and each agent answers through its tunnel. It holds the
// group, paths, subresources, headers and member identities both sides agree
// on, and nothing else. Through it a user reads the pods, logs
// and events of a Placement's workloads on its clusters, and execs and
// port-forwards into them, with the hub credentials and kubectl machinery they
// already have; and each agent opens its tunnel (internal/tunnel).
//
// Paths (all under /apis/debug.lodestar.dev/v1alpha1/namespaces/<ns>/):
//
//	placements/<placement>/<subresource>/<cluster>/api/v1/namespaces/<ns>/...
//	    a request for the member's API server, restricted by subresource:
//	    pods (GET pods), events (GET events), log (GET pods/<pod>/log),
//	    exec (pods/<pod>/exec), portforward (pods/<pod>/portforward); the
//	    hub API server authorises `<verb> placements/<subresource>` in the
//	    group, the debug server checks again (SubjectAccessReview) and that
//	    the Placement places something on the cluster, and the agent that
//	    the pods belong to the Placement's workloads.
//	tunnels/<cluster>/proxy
//	    the agent of cluster opens its tunnel (<ns> is the cluster's namespace).
//
// and, cluster-scoped, the tunnel access provider of platform teams'
// controllers (docs/extending.md):
//
//	/apis/debug.lodestar.dev/v1alpha1/clusters/<cluster>/proxy/<any member path>
//	    a request for the member's API server by a consumer, a hub
//	    ServiceAccount that a ConsumerAccessGrant names: the hub API server
//	    authorises `<verb> clusters/proxy` (the grant's hub role), the debug
//	    server checks the grant, and the agent serves it on the member as the
//	    consumer's own identity (ConsumerUser).
//
// Clients build a rest.Config whose Host ends with the placements prefix
// (kubeconfig.ClusterConfig), so that client-go's typed clients, log streams and
// exec/port-forward dialers work unchanged.
package v1alpha1

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// Group and Version of the debug API.
const (
	Group   = "debug.lodestar.dev"
	Version = "v1alpha1"
	// APIServiceName is the hub APIService that serves it.
	APIServiceName = Version + "." + Group
)

// Resources of the debug API.
const (
	// Placements are the Placements (the hub's), whose subresources reach
	// their workloads on the members.
	Placements = "placements"
	// Tunnels are the agents' tunnels, one per cluster, in its namespace.
	Tunnels = "tunnels"
	// TunnelSubresource is the subresource an agent opens its tunnel on.
	TunnelSubresource = "proxy"
)

// Clusters are the members, cluster-scoped, whose proxy subresource reaches
// the member's API server for a consumer (the tunnel access provider).
const (
	Clusters = "clusters"
	Proxy    = "proxy"
)

// ProxyVerbs are the verbs the hub API server derives from requests through
// clusters/proxy: what a consumer's hub role grants on it.
var ProxyVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete"}

// ClustersResource is the debug API's clusters/proxy, for errors.
var ClustersResource = schema.GroupResource{Group: Group, Resource: Clusters + "/" + Proxy}

// Subresources of a Placement: what a request may do on a member.
const (
	Pods        = "pods"
	Events      = "events"
	Log         = "log"
	Exec        = "exec"
	PortForward = "portforward"
)

// PlacementsResource is the debug API's placements, for errors.
var PlacementsResource = schema.GroupResource{Group: Group, Resource: Placements}

// Fleet is a Placement's subresource the hub manager answers itself (no
// member is asked): what `kubectl lodestar render` reads of the clusters
// beyond the Placement's namespace, for a user who may not read them
// (Options.Local).
const Fleet = "fleet"

// Services is a Placement's subresource the hub manager answers itself: the
// exported Services of its namespace, as `kubectl lodestar status` shows them,
// for a user who may not read the clusters' namespaces.
const Services = "services"

// Subresources are all of them, for discovery and roles.
var Subresources = []string{Pods, Events, Log, Exec, PortForward, Fleet, Services}

// Headers the hub's debug server sets on a request it sends through a tunnel;
// the agent acts on them (the tunnel is the hub's alone) and removes them.
const (
	// UserHeader is the hub user the request is for.
	UserHeader = "Lodestar-Debug-User"
	// PlacementHeader is the Placement, as namespace/name.
	PlacementHeader = "Lodestar-Debug-Placement"
	// SubresourceHeader is the subresource the request was authorised for.
	SubresourceHeader = "Lodestar-Debug-Subresource"
)

// ConsumerHeader is the consumer a request through a tunnel is for, as
// <namespace>/<name> of its hub ServiceAccount: the agent serves it as
// ConsumerUser, with whatever the member grants that user.
const ConsumerHeader = "Lodestar-Consumer"

// ConsumerPrefix precedes a consumer's namespace and name in its member
// identity; ConsumerGroup is the one group every consumer has on a member.
const (
	ConsumerPrefix = "lodestar:consumer:"
	ConsumerGroup  = "lodestar:consumers"
)

// ConsumerUser is the member identity of the hub ServiceAccount namespace/name.
func ConsumerUser(namespace, name string) string {
	return ConsumerPrefix + namespace + ":" + name
}

// ClusterProxyPath is the tunnel access provider's server path of cluster:
// what a consumer's client puts before the member's own paths.
func ClusterProxyPath(cluster string) string {
	return GroupVersionPath + "/" + Clusters + "/" + cluster + "/" + Proxy
}

// ParseClusterProxy parses a request for a member through the tunnel access
// provider: its cluster and the request's path on the member ("/" when the
// path ends at the proxy). ok is false for any other path.
func ParseClusterProxy(path string) (cluster, memberPath string, ok bool) {
	rest, found := strings.CutPrefix(path, GroupVersionPath+"/"+Clusters+"/")
	if !found {
		return "", "", false
	}
	cluster, rest, _ = strings.Cut(rest, "/")
	sub, memberPath, _ := strings.Cut(rest, "/")
	if cluster == "" || sub != Proxy {
		return "", "", false
	}
	return cluster, "/" + memberPath, true
}

// Identities the agent impersonates on its member for a hub user: prefixed,
// so that no hub identity (system:admin, system:masters, a hub service
// account) is ever a member identity.
const (
	// UserPrefix precedes the hub user's name.
	UserPrefix = "lodestar:hub:"
	// TenantGroupPrefix precedes the Placement's namespace: the one group the
	// member sees.
	TenantGroupPrefix = "lodestar:tenants:"
)

// MemberUser is the member identity of hub user user.
func MemberUser(user string) string { return UserPrefix + user }

// TenantGroup is the member group of the users of the Placements of namespace.
func TenantGroup(namespace string) string { return TenantGroupPrefix + namespace }

// GroupVersionPath is the debug API's path on the hub.
const GroupVersionPath = "/apis/" + Group + "/" + Version

// TunnelPath is where the agent of cluster opens its tunnel.
func TunnelPath(cluster string) string {
	return GroupVersionPath + "/namespaces/" + placementv1alpha1.ClusterNamespacePrefix + cluster + "/" + Tunnels + "/" + cluster + "/" + TunnelSubresource
}

// PlacementPath is the prefix of the requests for cluster's member on behalf of
// the Placement namespace/name, for subresource.
func PlacementPath(namespace, placement, subresource, cluster string) string {
	return GroupVersionPath + "/namespaces/" + namespace + "/" + Placements + "/" + placement + "/" + subresource + "/" + cluster
}

// Request is a debug API request, parsed from its path.
type Request struct {
	// Namespace is the path's namespace; Resource, Name and Subresource what
	// the hub API server authorised.
	Namespace, Resource, Name, Subresource string
	// Cluster is the member, and MemberPath the request's path on the member's
	// API server (placements only).
	Cluster, MemberPath string
}

// ParseRequest parses a path under the debug API; ok is false for paths
// outside it (discovery, health).
func ParseRequest(path string) (Request, bool) {
	rest, ok := strings.CutPrefix(path, GroupVersionPath+"/namespaces/")
	if !ok {
		return Request{}, false
	}
	parts := strings.SplitN(rest, "/", 6)
	if len(parts) < 4 {
		return Request{}, false
	}
	r := Request{Namespace: parts[0], Resource: parts[1], Name: parts[2], Subresource: parts[3]}
	if len(parts) > 4 {
		r.Cluster = parts[4]
	}
	if len(parts) > 5 {
		r.MemberPath = "/" + parts[5]
	}
	return r, r.Namespace != "" && r.Name != ""
}

// Target is what a member request reaches: the namespace and, for log, exec
// and port-forward, the pod.
type Target struct {
	Namespace, Pod string
}

// ParseMemberPath checks that a request for a member, authorised for
// subresource, is one that subresource allows, and returns its target:
// listing pods or events of one namespace, or one pod's log, exec or
// port-forward. Everything else is refused.
func ParseMemberPath(subresource, method, path string) (Target, error) {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if len(parts) < 5 || parts[0] != "api" || parts[1] != "v1" || parts[2] != "namespaces" || parts[3] == "" {
		return Target{}, fmt.Errorf("%s reaches /api/v1/namespaces/<namespace>/..., not %q", subresource, path)
	}
	t := Target{Namespace: parts[3]}
	rest := parts[4:]
	switch subresource {
	case Pods, Events:
		if len(rest) == 1 && rest[0] == subresource && method == http.MethodGet {
			return t, nil
		}
		return Target{}, fmt.Errorf("%s lists %s (GET .../namespaces/<namespace>/%s), not %s %q", subresource, subresource, subresource, method, path)
	case Log, Exec, PortForward:
		methods := []string{http.MethodGet, http.MethodPost}
		if subresource == Log {
			methods = methods[:1]
		}
		if len(rest) == 3 && rest[0] == "pods" && rest[1] != "" && rest[2] == subresource && slices.Contains(methods, method) {
			t.Pod = rest[1]
			return t, nil
		}
		return Target{}, fmt.Errorf("%s is %s of one pod (.../pods/<pod>/%s), not %s %q", subresource, strings.Join(methods, " or "), subresource, method, path)
	}
	return Target{}, fmt.Errorf("unknown subresource %q (one of %s)", subresource, strings.Join(Subresources, ", "))
}

// Verb is the authorisation verb of an HTTP method, as the API server derives it.
func Verb(method string) string {
	switch method {
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return "get"
}

// WriteStatus answers with a Kubernetes Status, which kubectl and client-go
// show: how both the hub's debug server and the agent refuse a request.
func WriteStatus(w http.ResponseWriter, err error) {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		status = apierrors.NewInternalError(err)
	}
	st := status.Status()
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	WriteJSON(w, int(st.Code), &st)
}

// WriteJSON answers with v as JSON and code.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
