package debugapi

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1alpha1 "github.com/lodestar-dev/lodestar/api/debug/v1alpha1"
	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/lookup"
)

// DefaultConsumerRecheck is how often a consumer's open stream is checked
// against the grants (a read of the hub manager's cache): a revoked grant ends
// it within this, and the time the cache takes to hear of it.
const DefaultConsumerRecheck = 2 * time.Second

// serveConsumer passes a consumer's request for cluster's member through the
// cluster's tunnel, when a ConsumerAccessGrant grants it that cluster. The hub
// API server authorised `<verb> clusters/proxy` of the cluster already (the
// grant's hub role); the grant is read again here, so that a revoked grant
// ends open streams without waiting for RBAC.
func (s *Server) serveConsumer(w http.ResponseWriter, r *http.Request, user User, cluster, memberPath string) {
	namespace, name, err := serviceaccount.SplitUsername(user.Name)
	if err != nil {
		debugv1alpha1.WriteStatus(w, apierrors.NewForbidden(debugv1alpha1.ClustersResource, cluster,
			fmt.Errorf("user %q is not a ServiceAccount: consumers of the tunnel access provider are hub ServiceAccounts that a ConsumerAccessGrant names", user.Name)))
		return
	}
	ctx := r.Context()
	grants, err := Granted(ctx, s.Reader, namespace, name, cluster)
	if err != nil {
		debugv1alpha1.WriteStatus(w, apierrors.NewInternalError(fmt.Errorf("reading the ConsumerAccessGrants: %w", err)))
		return
	}
	if len(grants) == 0 {
		debugv1alpha1.WriteStatus(w, apierrors.NewForbidden(debugv1alpha1.ClustersResource, cluster,
			fmt.Errorf("no ConsumerAccessGrant grants ServiceAccount %s/%s cluster %s", namespace, name, cluster)))
		return
	}
	if !s.Tunnels.Connected(cluster) {
		debugv1alpha1.WriteStatus(w, apierrors.NewServiceUnavailable(fmt.Sprintf("cluster %s: its agent holds no tunnel to this hub replica (%s); the agent dials again within seconds if it runs and reaches the hub", cluster, s.Tunnels.ID)))
		return
	}
	release, err := s.acquire(user.Name, namespace)
	if err != nil {
		debugv1alpha1.WriteStatus(w, err)
		return
	}
	defer release()
	ctx, cancel := context.WithCancelCause(context.WithValue(ctx, proxiedKey{}, proxied{
		cluster: cluster, memberPath: memberPath, consumer: namespace + "/" + name,
	}))
	defer cancel(nil)
	go s.recheckConsumer(ctx, cancel, namespace, name, cluster)
	s.serveProxied(w, r.WithContext(ctx), cluster)
}

// recheckConsumer ends a consumer's request once no grant grants it the cluster.
func (s *Server) recheckConsumer(ctx context.Context, cancel context.CancelCauseFunc, namespace, name, cluster string) {
	t := time.NewTicker(s.ConsumerRecheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		grants, err := Granted(ctx, s.Reader, namespace, name, cluster)
		if err != nil {
			continue // A cache read failing for a moment ends nothing.
		}
		if len(grants) == 0 {
			s.Log.Info("consumer access revoked: ending the open request", "consumer", namespace+"/"+name, "cluster", cluster)
			cancel(&revokedError{fmt.Sprintf("access revoked: no ConsumerAccessGrant grants ServiceAccount %s/%s cluster %s any more", namespace, name, cluster)})
			return
		}
	}
}

// Granted are the names of the ConsumerAccessGrants that grant the hub
// ServiceAccount namespace/name the cluster: grants naming it, not being
// deleted, whose set holds a Lodestar ClusterProfile of the cluster matching
// their selector.
func Granted(ctx context.Context, reader client.Reader, namespace, name, cluster string) ([]string, error) {
	list := &placementv1alpha1.ConsumerAccessGrantList{}
	if err := reader.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var out []string
	for i := range list.Items {
		g := &list.Items[i]
		if !g.DeletionTimestamp.IsZero() || !slices.Contains(g.Spec.Consumers, placementv1alpha1.ConsumerRef{Namespace: namespace, Name: name}) {
			continue
		}
		ok, err := Selects(ctx, reader, g, cluster)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, g.Name)
		}
	}
	return out, nil
}

// Selects says whether the grant selects cluster: its set holds Lodestar's
// ClusterProfile of the cluster, not being deleted, and its labels match the
// grant's selector (an invalid selector selects nothing).
func Selects(ctx context.Context, reader client.Reader, g *placementv1alpha1.ConsumerAccessGrant, cluster string) (bool, error) {
	profile := &cpv1alpha1.ClusterProfile{}
	if err := reader.Get(ctx, client.ObjectKey{Namespace: g.Spec.ClusterSet, Name: cluster}, profile); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if !lookup.Managed(profile) || !profile.DeletionTimestamp.IsZero() {
		return false, nil
	}
	sel, err := lookup.GrantSelector(g.Spec.ClusterSelector)
	if err != nil {
		return false, nil //nolint:nilerr // an invalid selector grants nothing; the grant's status says why
	}
	return sel.Matches(labels.Set(profile.Labels)), nil
}
