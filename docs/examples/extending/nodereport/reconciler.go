package nodereport

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mccontroller "sigs.k8s.io/multicluster-runtime/pkg/controller"
	mchandler "sigs.k8s.io/multicluster-runtime/pkg/handler"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

// Where the report is on each member.
const (
	Namespace = "default"
	Name      = "node-report"
)

// Reconciler keeps, on each member, the ConfigMap default/node-report listing
// the member's nodes, and which replica wrote it.
type Reconciler struct {
	Manager mcmanager.Manager
	// Replica names this replica in the reports.
	Replica string
}

// Reconcile writes the report of the request's member. Its requests are the
// report's namespace, on every member (so that a member without nodes is
// reported too), and each node event of a member asks for it again.
func (r *Reconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
	cl, err := r.Manager.GetCluster(ctx, req.ClusterName)
	if err != nil {
		return ctrl.Result{}, err
	}
	nodes := &corev1.NodeList{}
	if err := cl.GetClient().List(ctx, nodes); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the nodes of %s: %w", req.ClusterName, err)
	}
	var names []string
	for i := range nodes.Items {
		names = append(names, nodes.Items[i].Name)
	}
	slices.Sort(names)
	want := map[string]string{"cluster": req.ClusterName.String(), "nodes": strings.Join(names, ","), "replica": r.Replica}

	// The report is read from the member's API server, not a cache: a cache
	// would watch every ConfigMap of the member.
	cm := &corev1.ConfigMap{}
	err = cl.GetAPIReader().Get(ctx, client.ObjectKey{Namespace: Namespace, Name: Name}, cm)
	switch {
	case apierrors.IsNotFound(err):
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: Name}, Data: want}
		return ctrl.Result{}, cl.GetClient().Create(ctx, cm)
	case err != nil:
		return ctrl.Result{}, err
	}
	if maps.Equal(cm.Data, want) {
		return ctrl.Result{}, nil
	}
	cm.Data = want
	return ctrl.Result{}, cl.GetClient().Update(ctx, cm)
}

// SetupWithManager reconciles each engaged member's report: its namespace
// (one request per member) and its nodes (mapped to that request).
func (r *Reconciler) SetupWithManager(mgr mcmanager.Manager) error {
	r.Manager = mgr
	report := func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: Namespace}}}
	}
	return mcbuilder.ControllerManagedBy(mgr).
		Named("node-report").
		// Replicas may share a process (tests): their controllers share a name.
		WithOptions(mccontroller.Options{SkipNameValidation: ptr.To(true)}).
		For(&corev1.Namespace{}, mcbuilder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == Namespace }))).
		Watches(&corev1.Node{}, mchandler.EnqueueRequestsFromMapFunc(report)).
		Complete(r)
}
