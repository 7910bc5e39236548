// Package clusterplacement carries out each ClusterPlacement through a Placement
// of the same name and spec in placementv1alpha1.ClusterPlacementNamespace, so
// that scheduling, rendering, rollout, overrides and status are the Placement's
// own code; it copies that Placement's status back to the ClusterPlacement.
package clusterplacement

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/handlers"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/patch"
	"github.com/lodestar-dev/lodestar/internal/settled"
)

// Name is the controller's field owner.
const Name = "lodestar-clusterplacement"

// statusWindow gathers the status changes of a carrying Placement (a fan-out
// moves its counts often) before they are copied.
const statusWindow = time.Second

// lookSoon is when a reconcile that made or changed the carrier looks again:
// what it wrote shows in the cache by then, and its status is copied.
const lookSoon = statusWindow

// backstop is how often a ClusterPlacement whose carrier is not settled is
// looked at without an event: its status never waits on one event alone.
const backstop = 5 * time.Second

// Reconciler carries out ClusterPlacements.
type Reconciler struct {
	Client client.Client
}

// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=clusterplacements,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=clusterplacements/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=placements,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=reserved,verbs=create

// Reconcile keeps the carrying Placement in line with the ClusterPlacement and
// copies its status back.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	key := client.ObjectKey{Namespace: placementv1alpha1.ClusterPlacementNamespace, Name: req.Name}
	carrier := &placementv1alpha1.Placement{}
	err := r.Client.Get(ctx, key, carrier)
	if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	// Only a Placement the hub made for this ClusterPlacement is its carrier:
	// another one of the name is never adopted, changed or deleted.
	exists := err == nil && carrier.Annotations[placementv1alpha1.ClusterPlacementAnnotation] == req.Name
	squatted := err == nil && !exists
	cp := &placementv1alpha1.ClusterPlacement{}
	if err := r.Client.Get(ctx, req.NamespacedName, cp); err != nil {
		if apierrors.IsNotFound(err) && exists && carrier.DeletionTimestamp.IsZero() {
			// A carrier whose ClusterPlacement is gone (deleted around its
			// finalizer, say) goes too.
			return ctrl.Result{}, client.IgnoreNotFound(r.Client.Delete(ctx, carrier))
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("clusterPlacement", klog.KObj(cp)))
	if squatted {
		return ctrl.Result{}, r.inTheWay(ctx, cp, key)
	}

	if !cp.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, cp, carrier, exists)
	}
	after, err := r.carry(ctx, cp, carrier, exists, key)
	return ctrl.Result{RequeueAfter: after}, err
}

// reconcileDelete deletes the carrying Placement, whose own finalizer waits
// for its Works to go; the ClusterPlacement waits for it, then lets go.
func (r *Reconciler) reconcileDelete(ctx context.Context, cp *placementv1alpha1.ClusterPlacement, carrier *placementv1alpha1.Placement, exists bool) error {
	if exists {
		if carrier.DeletionTimestamp.IsZero() {
			if err := r.Client.Delete(ctx, carrier); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
		return nil // Its deletion triggers the next reconcile.
	}
	return patch.SetFinalizer(ctx, r.Client, cp, placementv1alpha1.PlacementFinalizer, false)
}

// carry makes the carrying Placement (key) carry the ClusterPlacement's spec,
// creating it when it does not exist, and copies its status back.
func (r *Reconciler) carry(ctx context.Context, cp *placementv1alpha1.ClusterPlacement, carrier *placementv1alpha1.Placement, exists bool, key client.ObjectKey) (time.Duration, error) {
	if err := patch.SetFinalizer(ctx, r.Client, cp, placementv1alpha1.PlacementFinalizer, true); err != nil {
		return 0, err
	}
	if !exists {
		if err := r.ensureNamespace(ctx); err != nil {
			return 0, err
		}
		carrier = &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{
			Name: key.Name, Namespace: key.Namespace,
			Annotations: map[string]string{placementv1alpha1.ClusterPlacementAnnotation: cp.Name},
		}, Spec: cp.Spec}
		err := r.Client.Create(ctx, carrier)
		if apierrors.IsAlreadyExists(err) {
			// Made a moment ago (by this controller: the cache does not
			// show it yet). Not an error: an error's backoff doubles with
			// each retry while the cache lags, and could outlast the
			// carrier's last status change, the last event that would have
			// brought this ClusterPlacement back.
			return lookSoon, nil
		}
		if err != nil {
			return 0, fmt.Errorf("creating the carrying Placement: %w", err)
		}
		return lookSoon, nil
	}
	if !equality.Semantic.DeepEqual(carrier.Spec, cp.Spec) {
		base := carrier.DeepCopy()
		carrier.Spec = cp.Spec
		if err := r.Client.Patch(ctx, carrier, client.MergeFrom(base)); err != nil {
			return 0, fmt.Errorf("updating the carrying Placement: %w", err)
		}
		// A patch that changes nothing on the server (a spec only this
		// cache sees differently) brings no event: look again regardless.
		return lookSoon, nil
	}
	return r.copyStatus(ctx, cp, carrier)
}

// inTheWay says on the ClusterPlacement that a Placement the hub did not make
// holds its carrier's name; it waits for that Placement to go (a Placement
// event brings the next reconcile).
func (r *Reconciler) inTheWay(ctx context.Context, cp *placementv1alpha1.ClusterPlacement, key client.ObjectKey) error {
	out := &placementv1alpha1.ClusterPlacement{ObjectMeta: metav1.ObjectMeta{Name: cp.Name}}
	out.Status.Conditions = []metav1.Condition{{Type: placementv1alpha1.ScheduledCondition, Status: metav1.ConditionFalse,
		Reason: placementv1alpha1.ReasonCarrierInTheWay, ObservedGeneration: cp.Generation, LastTransitionTime: metav1.Now(),
		Message: fmt.Sprintf("Placement %s/%s is not a carrier the hub made (no %s annotation): it is left alone, and this ClusterPlacement waits for it to go",
			key.Namespace, key.Name, placementv1alpha1.ClusterPlacementAnnotation)}}
	return patch.ApplyStatus(ctx, r.Client, out, Name)
}

// copyStatus writes the carrying Placement's status on the ClusterPlacement; the
// generations the carrier's controllers observed become the ClusterPlacement's
// own (both specs are equal at this point).
func (r *Reconciler) copyStatus(ctx context.Context, cp *placementv1alpha1.ClusterPlacement, carrier *placementv1alpha1.Placement) (time.Duration, error) {
	st := *carrier.Status.DeepCopy()
	translate := func(gen int64) int64 {
		if gen == carrier.Generation {
			return cp.Generation
		}
		return 0 // an earlier spec: not one the ClusterPlacement can name
	}
	st.ObservedGeneration = translate(st.ObservedGeneration)
	for i := range st.Conditions {
		st.Conditions[i].ObservedGeneration = translate(st.Conditions[i].ObservedGeneration)
	}
	after := time.Duration(0)
	if !carrierSettled(carrier) {
		after = backstop
	}
	if equality.Semantic.DeepEqual(st, cp.Status) {
		return after, nil
	}
	out := &placementv1alpha1.ClusterPlacement{ObjectMeta: metav1.ObjectMeta{Name: cp.Name}, Status: st}
	return after, patch.ApplyStatus(ctx, r.Client, out, Name)
}

// carrierSettled tells whether the carrier's controllers are done with its spec: its
// status observed its generation and it is not Reconciling. Until then its
// status moves, and the ClusterPlacement looks again after backstop even
// without an event of it.
func carrierSettled(carrier *placementv1alpha1.Placement) bool {
	if carrier.Status.ObservedGeneration != carrier.Generation {
		return false
	}
	c := apimeta.FindStatusCondition(carrier.Status.Conditions, settled.ReconcilingCondition)
	return c != nil && c.ObservedGeneration == carrier.Generation && c.Status == metav1.ConditionFalse
}

// ensureNamespace creates ClusterPlacementNamespace, marked as Lodestar's, when
// it is missing (the hub chart makes it); one that exists unmarked is someone
// else's, and carries nothing.
func (r *Reconciler) ensureNamespace(ctx context.Context) error {
	err := lookup.Reserve(ctx, r.Client, placementv1alpha1.ClusterPlacementNamespace, placementv1alpha1.ReservedForClusterPlacements)
	var notOurs *lookup.NotReservedError
	if errors.As(err, &notOurs) {
		return fmt.Errorf("%w: no ClusterPlacement is carried out in it", err)
	}
	return err
}

// SetupWithManager registers the controller: ClusterPlacements, and the
// Placements that carry them out.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("clusterplacement").
		For(&placementv1alpha1.ClusterPlacement{}).
		Watches(&placementv1alpha1.Placement{}, handlers.Coalescing(carried, statusWindow)).
		Complete(r)
}

// carried maps a carrying Placement to its ClusterPlacement.
func carried(_ context.Context, obj client.Object) []reconcile.Request {
	name, ok := obj.GetAnnotations()[placementv1alpha1.ClusterPlacementAnnotation]
	if !ok || obj.GetNamespace() != placementv1alpha1.ClusterPlacementNamespace {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: name}}}
}
