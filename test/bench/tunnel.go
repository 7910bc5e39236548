package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// tunnelLists is how many LISTs X1 times each way.
const tunnelLists = 200

// tunnelList is X1: the same LIST (the member's namespaces) on one real
// member, directly (its API server, as its admin) and through the
// lodestar-tunnel access provider (the hub API server, the debug API and the
// agent's tunnel, as a consumer a ConsumerAccessGrant names, with the real
// lodestar-credentials plugin), one at a time, alternating.
func (f *fleet) tunnelList(ctx context.Context, member *testenv.ControlPlane, record func(*Result) error) error {
	say("X1: %d LISTs on %s, directly and through the tunnel", tunnelLists, member.Name)
	const ns, sa, grant = "bench-consumers", "lister", "bench-lister"
	if err := f.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	if err := f.admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	g := &placementv1alpha1.ConsumerAccessGrant{ObjectMeta: metav1.ObjectMeta{Name: grant}, Spec: placementv1alpha1.ConsumerAccessGrantSpec{
		Consumers: []placementv1alpha1.ConsumerRef{{Namespace: ns, Name: sa}}, ClusterSet: placementv1alpha1.DefaultClusterSet,
		ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"real": "yes"}},
		Rules:           []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list"}}},
	}}
	if err := f.admin.Create(ctx, g); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	if _, err := waitFor(ctx, 2*time.Minute, 100*time.Millisecond, func() (bool, error) {
		got := &placementv1alpha1.ConsumerAccessGrant{}
		if err := f.admin.Get(ctx, client.ObjectKey{Name: grant}, got); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(got.Status.Conditions, placementv1alpha1.ReadyCondition), nil
	}); err != nil {
		return fmt.Errorf("the grant is not Ready: %w", err)
	}
	tunnelCfg, err := f.consumerConfig(ctx, ns, sa, member.Name)
	if err != nil {
		return err
	}
	direct := rest.CopyConfig(member.Config)
	var clients [2]kubernetes.Interface
	for i, cfg := range []*rest.Config{direct, tunnelCfg} {
		cfg.QPS, cfg.Burst = -1, 0 // Unthrottled: the time is the request's.
		if clients[i], err = kubernetes.NewForConfig(cfg); err != nil {
			return err
		}
	}
	times := [2][]time.Duration{}
	for i := range tunnelLists + 10 {
		for way, cs := range clients {
			start := time.Now()
			if _, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
				return fmt.Errorf("LIST %d (%s): %w", i, []string{"direct", "tunnel"}[way], err)
			}
			if i >= 10 { // The first ten warm connections and the plugin's token up.
				times[way] = append(times[way], time.Since(start))
			}
		}
	}
	r := &Result{Scenario: "X1", Description: fmt.Sprintf("the same LIST (namespaces) on one real member, %d times each: directly, and through the lodestar-tunnel access provider (hub API server, debug API, agent tunnel) as a granted consumer", tunnelLists),
		Members: realMembersDesc}
	for way, name := range []string{"direct", "tunnel"} {
		r.add(name+" p50", quantile(times[way], 0.5), "ms")
		r.add(name+" p99", quantile(times[way], 0.99), "ms")
	}
	return record(r)
}

// consumerConfig is the member's client configuration a consumer builds from
// its ClusterProfile's lodestar-tunnel provider, with lodestar-credentials.
func (f *fleet) consumerConfig(ctx context.Context, ns, sa, cluster string) (*rest.Config, error) {
	cfg, err := testenv.ServiceAccountConfig(ctx, f.hub.Config, ns, sa, time.Hour)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(f.dir, "consumer")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	providers, err := testenv.TunnelProviders(dir, filepath.Join(f.bin, "lodestar-credentials"), cfg.BearerToken)
	if err != nil {
		return nil, err
	}
	profile := &cpv1alpha1.ClusterProfile{}
	if err := f.admin.Get(ctx, client.ObjectKey{Namespace: placementv1alpha1.DefaultClusterSet, Name: cluster}, profile); err != nil {
		return nil, err
	}
	return providers.BuildConfigFromCP(profile)
}

// quantile is the q quantile of ds, in milliseconds.
func quantile(ds []time.Duration, q float64) float64 {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s))+0.5) - 1
	return float64(s[min(max(i, 0), len(s)-1)]) / float64(time.Millisecond)
}
