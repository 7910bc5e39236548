// Package tunnelprovider publishes, in each ClusterProfile whose agent serves
// consumers through its tunnel (the agent's property
// placementv1alpha1.PropertyConsumerTunnel), the lodestar-tunnel access
// provider: the hub's API server at the debug API's clusters/<cluster>/proxy,
// and the hub's CA. Consumers (a platform team's controller with the
// lodestar-credentials plugin) send their own hub token there, so the hub
// writes it, under its own field owner, and an agent may not change it
// (config/admission/agent-profiles.yaml): a stolen agent token cannot point
// consumers at another server.
package tunnelprovider

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1alpha1 "github.com/lodestar-dev/lodestar/api/debug/v1alpha1"
	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/lookup"
)

// Name is the controller's field owner of the entry.
const Name = "lodestar-tunnelprovider"

// Reconciler publishes the lodestar-tunnel access provider.
type Reconciler struct {
	Client client.Client
	// Server is the hub API server's address as consumers reach it.
	Server string
	// CAData is the CA consumers trust the hub's API server by.
	CAData []byte
}

// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=clusterprofiles,verbs=get;list;watch
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=clusterprofiles/status,verbs=get;patch;update

// Reconcile writes the entry when the agent serves consumers, and takes it
// away when it does not.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	profile := &cpv1alpha1.ClusterProfile{}
	if err := r.Client.Get(ctx, req.NamespacedName, profile); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	want := Desired(profile, r.Server, r.CAData)
	i := slices.IndexFunc(profile.Status.AccessProviders, func(ap cpv1alpha1.AccessProvider) bool {
		return ap.Name == placementv1alpha1.TunnelProvider
	})
	switch {
	case want == nil && i < 0:
		return ctrl.Result{}, nil
	case want != nil && i >= 0 && equality.Semantic.DeepEqual(*want, profile.Status.AccessProviders[i]):
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.apply(ctx, profile, want)
}

// apply writes the entry (none: this owner's entry goes) with server-side
// apply, leaving the agent's own entries and fields to it.
func (r *Reconciler) apply(ctx context.Context, profile *cpv1alpha1.ClusterProfile, ap *cpv1alpha1.AccessProvider) error {
	status := map[string]any{}
	if ap != nil {
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ap)
		if err != nil {
			return err
		}
		status["accessProviders"] = []any{content}
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": cpv1alpha1.GroupVersion.String(),
		"kind":       "ClusterProfile",
		"metadata":   map[string]any{"name": profile.Name, "namespace": profile.Namespace},
		"status":     status,
	}}
	if err := r.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(Name), client.ForceOwnership); err != nil {
		return fmt.Errorf("writing the %s access provider of ClusterProfile %s/%s: %w", placementv1alpha1.TunnelProvider, profile.Namespace, profile.Name, err)
	}
	return nil
}

// Desired is the lodestar-tunnel entry the hub publishes for profile: nil
// unless its agent reports that it serves consumers.
func Desired(profile *cpv1alpha1.ClusterProfile, server string, caData []byte) *cpv1alpha1.AccessProvider {
	serves := slices.ContainsFunc(profile.Status.Properties, func(p cpv1alpha1.Property) bool {
		return p.Name == placementv1alpha1.PropertyConsumerTunnel && p.Value == "true"
	})
	if !serves {
		return nil
	}
	ext, _ := json.Marshal(map[string]string{"clusterName": profile.Name})
	return &cpv1alpha1.AccessProvider{
		Name: placementv1alpha1.TunnelProvider,
		Cluster: clientcmdv1.Cluster{
			Server:                   strings.TrimSuffix(server, "/") + debugv1alpha1.ClusterProxyPath(profile.Name),
			CertificateAuthorityData: caData,
			Extensions:               []clientcmdv1.NamedExtension{{Name: "client.authentication.k8s.io/exec", Extension: runtime.RawExtension{Raw: ext}}},
		},
	}
}

// SetupWithManager registers the controller for the ClusterProfiles of the
// manager's cluster sets.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("tunnelprovider").
		For(&cpv1alpha1.ClusterProfile{}, builder.WithPredicates(lookup.ManagedProfiles)).
		Complete(r)
}
