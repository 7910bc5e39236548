package debug

import (
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	debugv1alpha1 "github.com/lodestar-dev/lodestar/api/debug/v1alpha1"
)

// serveConsumer serves a consumer's request (the tunnel access provider) on
// the member as the consumer's own identity, ConsumerUser in ConsumerGroup:
// the member's RBAC (the ClusterRole its ConsumerAccessGrants carry here) and
// its audit log see that user. Nothing of the request's own identity passes.
func (h *Handler) serveConsumer(w http.ResponseWriter, r *http.Request, consumer string) {
	if !h.ConsumerAccess {
		debugv1alpha1.WriteStatus(w, apierrors.NewForbidden(debugv1alpha1.ClustersResource, h.ClusterNamespace,
			fmt.Errorf("the member's admin turned consumer access off on this cluster's agent (agent chart consumerAccess.enabled)")))
		return
	}
	namespace, name, ok := strings.Cut(consumer, "/")
	if !ok || namespace == "" || name == "" {
		debugv1alpha1.WriteStatus(w, apierrors.NewBadRequest(fmt.Sprintf("consumer %q is not <namespace>/<name>", consumer)))
		return
	}
	stripIdentity(r.Header)
	r.Header.Set("Impersonate-User", debugv1alpha1.ConsumerUser(namespace, name))
	r.Header.Set("Impersonate-Group", debugv1alpha1.ConsumerGroup)
	h.proxy.ServeHTTP(w, r)
}

// stripIdentity removes every header that says who a request is for: the
// agent alone says that to its member.
func stripIdentity(h http.Header) {
	for k := range h {
		if l := strings.ToLower(k); strings.HasPrefix(l, "impersonate-") || l == "authorization" || strings.HasPrefix(l, "lodestar-") {
			h.Del(k)
		}
	}
}
