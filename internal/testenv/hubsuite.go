package testenv

import (
	"context"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// A hub reconciler's package suite runs that reconciler alone on a hub API
// server, and writes by hand what the other controllers would: these set it up.

// HubSuite is a hub reconciler's package suite (its TestMain sets the
// package's Gomega defaults first): the package's logger, one hub API server (*hub), and a manager with opts (the
// hub's manager options) running what setup adds, for cluster set set. Its
// result is TestMain's exit code.
func HubSuite(m interface{ Run() int }, opts ctrl.Options, set string, hub **ControlPlane, setup func(ctrl.Manager) error) int {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	return RunWithHub(m, opts.Scheme, func(cp *ControlPlane) (func(), error) {
		*hub = cp
		return RunHubManager(cp, opts, set, setup)
	})
}

// RunHubManager starts a manager on cp with opts (the hub's manager options;
// no metrics or probe endpoints) and the hub's cache indexes, after setup added
// the reconcilers under test, and creates the cluster-set namespace set. It
// runs until the returned stop.
func RunHubManager(cp *ControlPlane, opts ctrl.Options, set string, setup func(ctrl.Manager) error) (stop func(), err error) {
	ctx, cancel := context.WithCancel(context.Background())
	opts.Metrics, opts.HealthProbeBindAddress = metricsserver.Options{BindAddress: "0"}, "0"
	mgr, err := ctrl.NewManager(cp.Config, opts)
	if err == nil {
		err = lookup.AddIndexes(ctx, mgr.GetFieldIndexer())
	}
	if err == nil {
		err = setup(mgr)
	}
	if err == nil {
		err = cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: set}})
	}
	if err != nil {
		cancel()
		return nil, err
	}
	go func() { _ = mgr.Start(ctx) }()
	return cancel, nil
}

// NewTenant creates a tenant namespace, bound to the cluster set set.
func NewTenant(ctx context.Context, c client.Client, set string) (string, error) {
	ns := "test-" + rand.String(6)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return "", err
	}
	return ns, c.Create(ctx, &placementv1alpha1.ClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Name: set, Namespace: ns},
		Spec: placementv1alpha1.ClusterSetBindingSpec{ClusterSet: set}})
}

// NewClusters creates n clusters of the set set, named <prefix>-c<i>, as
// joining does on the hub: a ClusterProfile Lodestar manages (labelled with its
// index) and the cluster's hub namespace. It returns their names.
func NewClusters(ctx context.Context, c client.Client, set, prefix string, n int) ([]string, error) {
	var out []string
	for i := range n {
		name := fmt.Sprintf("%s-c%d", prefix, i)
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names.ClusterNamespace(name)}}); err != nil {
			return nil, err
		}
		if err := c.Create(ctx, &cpv1alpha1.ClusterProfile{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: set, Labels: map[string]string{
				placementv1alpha1.WorkNamespaceLabel: names.ClusterNamespace(name), "index": fmt.Sprint(i)}},
			Spec: cpv1alpha1.ClusterProfileSpec{DisplayName: name, ClusterManager: cpv1alpha1.ClusterManager{Name: placementv1alpha1.ClusterManagerName}},
		}); err != nil {
			return nil, err
		}
		out = append(out, name)
	}
	return out, nil
}
