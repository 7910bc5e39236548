// Package settled writes each Placement's Reconciling and Stalled conditions
// (internal/settled) from the conditions the other controllers write, so that
// kstatus (Flux, kpt, helm v4's --wait) and Argo CD read a Placement as they
// read any object: in progress, failed, or current.
package settled

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/conditions"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/patch"
	"github.com/lodestar-dev/lodestar/internal/settled"
)

// Name is the controller's field owner.
const Name = "lodestar-settled"

// Reconciler writes the Reconciling and Stalled conditions of Placements.
type Reconciler struct {
	Client client.Client
	// Workers is how many Placements are reconciled at once.
	Workers int
	// Scope is what this hub manager takes (docs/scale.md).
	Scope lookup.Scope
}

// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=placements,verbs=get;list;watch
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=placements/status,verbs=get;patch;update

// Reconcile writes one Placement's two conditions when they change.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	placement := &placementv1alpha1.Placement{}
	if err := r.Client.Get(ctx, req.NamespacedName, placement); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !placement.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // kstatus reads a deleted object as Terminating
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("placement", klog.KObj(placement)))
	reconciling, stalled := settled.Conditions(placement.Status.Conditions, placement.Generation)
	if conditions.Same(placement.Status.Conditions, reconciling) && conditions.Same(placement.Status.Conditions, stalled) {
		return ctrl.Result{}, nil
	}
	out := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: placement.Name, Namespace: placement.Namespace}}
	out.Status.Conditions = []metav1.Condition{
		conditions.Merge(placement.Status.Conditions, reconciling), conditions.Merge(placement.Status.Conditions, stalled),
	}
	return ctrl.Result{}, patch.ApplyStatus(ctx, r.Client, out, Name)
}

// SetupWithManager registers the controller: every change of a Placement
// (its status, mostly).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("settled").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		For(&placementv1alpha1.Placement{}).
		Complete(r.Scope.Only(mgr.GetClient(), r))
}
