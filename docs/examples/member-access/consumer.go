// Package consumer is an example of a platform team's controller on the hub
// that reaches member clusters directly, the SIG-Multicluster way: it reads a
// ClusterProfile, builds a client from the profile's status.accessProviders with
// sigs.k8s.io/cluster-inventory-api/pkg/access, and the upstream secretreader
// credential plugin hands it the token Lodestar copied into its namespace
// (docs/member-access.md). cmd/consumer runs it; TestMemberAccess runs it
// against real member API servers.
package consumer

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Namespaces lists the namespaces of one member cluster, reached through its
// ClusterProfile clusterSet/cluster with the access providers of providers
// (the JSON file access.NewFromFile reads).
func Namespaces(ctx context.Context, hub client.Reader, providers *access.Config, clusterSet, cluster string) ([]string, error) {
	profile := &cpv1alpha1.ClusterProfile{}
	if err := hub.Get(ctx, client.ObjectKey{Namespace: clusterSet, Name: cluster}, profile); err != nil {
		return nil, fmt.Errorf("reading ClusterProfile %s/%s: %w", clusterSet, cluster, err)
	}
	cfg, err := providers.BuildConfigFromCP(profile)
	if err != nil {
		return nil, fmt.Errorf("building a client of %s: %w", cluster, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the namespaces of %s: %w", cluster, err)
	}
	out := make([]string, 0, len(list.Items))
	for _, ns := range list.Items {
		if ns.Status.Phase != corev1.NamespaceTerminating {
			out = append(out, ns.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Scheme is a scheme with ClusterProfiles, for the consumer's hub client.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := cpv1alpha1.AddToScheme(s); err != nil {
		panic(err) // Registering static types cannot fail.
	}
	return s
}
