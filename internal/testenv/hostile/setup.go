package hostile

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/lodestar-dev/lodestar/internal/scheme"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// AdminRules are what the standard `admin` role grants of the kinds the
// attacks use (a test hub runs no clusterrole-aggregation controller, so its
// `admin` is empty): since Kubernetes 1.22 no write of endpoints or
// endpointslices, and no escalate or bind. lodestar:tenant, which the hub
// chart aggregates into admin, is bound beside them.
var AdminRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets", "services", "serviceaccounts"}, Verbs: []string{"*"}},
	{APIGroups: []string{"apps"}, Resources: []string{"*"}, Verbs: []string{"*"}},
	{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"roles", "rolebindings"}, Verbs: []string{"create", "delete", "get", "list", "patch", "update", "watch"}},
	// The interpreted kind's (InstallInterpreted): its operator's chart
	// aggregates it into admin.
	{APIGroups: []string{InterpretedGroup}, Resources: []string{"*"}, Verbs: []string{"*"}},
}

// NewTenant makes a tenant on the hub: ServiceAccount name in namespace ns
// with AdminRules and lodestar:tenant there, and returns its own client,
// unthrottled (a hostile tenant does not hold back), once the hub's
// authorizer knows its bindings.
func NewTenant(ctx context.Context, admin client.Client, adminCfg *rest.Config, ns, name string) (client.Client, error) {
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: AdminRules},
	}
	for binding, ref := range map[string]rbacv1.RoleRef{
		name + "-admin":  {APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		name + "-tenant": {APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "lodestar:tenant"},
	} {
		objs = append(objs, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: binding, Namespace: ns},
			RoleRef: ref, Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}})
	}
	for _, obj := range objs {
		if err := admin.Create(ctx, obj); err != nil {
			return nil, err
		}
	}
	cfg, err := testenv.ServiceAccountConfig(ctx, adminCfg, ns, name, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 200, 400
	c, err := client.New(cfg, client.Options{Scheme: scheme.Hub()})
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		err := c.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns))
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the tenant's bindings did not reach the authorizer: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// PlaceBystander creates the bystander's ConfigMap and its Placement onto
// cluster in ns, as YAML.
func PlaceBystander(ctx context.Context, hub client.Client, ns, name, cluster string) error {
	for _, doc := range []string{
		fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata: {k: v0}\n", name),
		placement(name, "["+cluster+"]", "", "", "ConfigMap"),
	} {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			return err
		}
		obj.SetNamespace(ns)
		if err := hub.Create(ctx, obj); err != nil {
			return err
		}
	}
	return nil
}
