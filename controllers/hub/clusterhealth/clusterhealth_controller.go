// Package clusterhealth turns each agent's Lease into its ClusterProfile's
// conditions: AgentReachable (is the agent renewing its Lease) and the standard
// ControlPlaneHealthy (the member API server's readiness as the agent reports it).
package clusterhealth

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/conditions"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// Name is the controller's field owner.
const Name = "lodestar-clusterhealth"

// DefaultGracePeriod is how long after its Lease expires an agent still counts as
// reachable.
const DefaultGracePeriod = 20 * time.Second

// Reconciler sets the health conditions of ClusterProfiles.
type Reconciler struct {
	Client client.Client
	// GracePeriod is added to a Lease's duration before its agent is unreachable.
	GracePeriod time.Duration
	// Workers is how many ClusterProfiles are reconciled at once.
	Workers int
	// ClusterSetNamespaces are the cluster sets the hub manages: ClusterProfiles
	// elsewhere (a foreign namespace, say) are never acted on.
	ClusterSetNamespaces []string
}

// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=clusterprofiles,verbs=get;list;watch
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=clusterprofiles/status,verbs=get;patch;update

// Reconcile sets one ClusterProfile's conditions from its agent's Lease.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	profile, err := lookup.ManagedProfile(ctx, r.Client, req.NamespacedName, r.ClusterSetNamespaces)
	if profile == nil || err != nil {
		return ctrl.Result{}, err
	}
	lease := &coordinationv1.Lease{}
	err = r.Client.Get(ctx, client.ObjectKey{Namespace: names.ClusterNamespace(profile.Name), Name: placementv1alpha1.AgentLeaseName}, lease)
	if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	if err != nil {
		lease = nil
	}
	reachable, healthy, recheck := Evaluate(lease, time.Now(), r.GracePeriod)
	healthy = CheckIdentity(profile, healthy)
	reachable.ObservedGeneration, healthy.ObservedGeneration = profile.Generation, profile.Generation
	if !conditions.Same(profile.Status.Conditions, reachable) || !conditions.Same(profile.Status.Conditions, healthy) {
		if err := r.apply(ctx, profile, reachable, healthy); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{RequeueAfter: recheck}, nil
}

// Evaluate returns the AgentReachable and ControlPlaneHealthy conditions for an
// agent's Lease (nil when it has none) at now, and when to look again (0: only on
// the next Lease change).
func Evaluate(lease *coordinationv1.Lease, now time.Time, grace time.Duration) (reachable, healthy metav1.Condition, recheck time.Duration) {
	cond := func(t string, s metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg}
	}
	if lease == nil || lease.Spec.RenewTime == nil {
		return cond(placementv1alpha1.AgentReachableCondition, metav1.ConditionUnknown, placementv1alpha1.ReasonAgentNotSeen, "the agent has not renewed its Lease yet"),
			cond(placementv1alpha1.ControlPlaneHealthyCondition, metav1.ConditionUnknown, placementv1alpha1.ReasonAgentNotSeen, "no report from the agent yet"), 0
	}
	duration := 40 * time.Second
	if d := lease.Spec.LeaseDurationSeconds; d != nil && *d > 0 {
		duration = time.Duration(*d) * time.Second
	}
	renewed := lease.Spec.RenewTime.Time
	deadline := renewed.Add(duration + grace)
	if now.After(deadline) {
		msg := "the agent last renewed its Lease at " + renewed.UTC().Format(time.RFC3339) + "; it expired more than " + grace.String() + " ago"
		return cond(placementv1alpha1.AgentReachableCondition, metav1.ConditionFalse, placementv1alpha1.ReasonLeaseExpired, msg),
			cond(placementv1alpha1.ControlPlaneHealthyCondition, metav1.ConditionUnknown, placementv1alpha1.ReasonAgentUnreachable, "the agent is unreachable: "+msg), 0
	}
	reachable = cond(placementv1alpha1.AgentReachableCondition, metav1.ConditionTrue, placementv1alpha1.ReasonLeaseRenewed, "the agent renews its Lease")
	ready, _ := strconv.ParseBool(lease.Annotations[placementv1alpha1.MemberReadyAnnotation])
	msg := lease.Annotations[placementv1alpha1.MemberReadyMessageAnnotation]
	if ready {
		healthy = cond(placementv1alpha1.ControlPlaneHealthyCondition, metav1.ConditionTrue, placementv1alpha1.ReasonMemberReady, msg)
	} else {
		if msg == "" {
			msg = "the agent reports the member API server not ready"
		}
		healthy = cond(placementv1alpha1.ControlPlaneHealthyCondition, metav1.ConditionFalse, placementv1alpha1.ReasonMemberNotReady, msg)
	}
	// Looked at again just past the deadline: an agent that stopped is reported
	// as soon as the bound allows, not a second later.
	return reachable, healthy, deadline.Sub(now) + recheckSlack
}

// ClusterIDProperty is the cluster ID property the agent reports (KEP-2149's
// id.k8s.io, the member's kube-system namespace UID unless its admin set
// another), compared with the one recorded at join.
const ClusterIDProperty = "id.k8s.io"

// CheckIdentity is healthy unless the agent reports a cluster ID other than
// the one join recorded (ClusterIDAnnotation): then the cluster is not
// healthy (the scheduler chooses it for nothing new), saying both IDs. A
// cluster joined without an ID, or whose agent has not reported one, is not
// checked.
func CheckIdentity(profile *cpv1alpha1.ClusterProfile, healthy metav1.Condition) metav1.Condition {
	joined := profile.Annotations[placementv1alpha1.ClusterIDAnnotation]
	i := slices.IndexFunc(profile.Status.Properties, func(p cpv1alpha1.Property) bool { return p.Name == ClusterIDProperty })
	if joined == "" || i < 0 || profile.Status.Properties[i].Value == joined || healthy.Status == metav1.ConditionUnknown {
		return healthy
	}
	healthy.Status, healthy.Reason = metav1.ConditionFalse, placementv1alpha1.ReasonIdentityMismatch
	healthy.Message = fmt.Sprintf("the agent reports cluster ID %s, not %s recorded at join: its hub token may be in another cluster's hands; "+
		"revoke it (kubectl lodestar revoke %s) and join the cluster again", profile.Status.Properties[i].Value, joined, profile.Name)
	return healthy
}

// recheckSlack is how long after a Lease's deadline the hub looks again.
const recheckSlack = 10 * time.Millisecond

// apply writes only the two conditions, under the controller's own field manager.
func (r *Reconciler) apply(ctx context.Context, profile *cpv1alpha1.ClusterProfile, conds ...metav1.Condition) error {
	var list []any
	for _, c := range conds {
		c = conditions.Merge(profile.Status.Conditions, c)
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&c)
		if err != nil {
			return err
		}
		list = append(list, u)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": cpv1alpha1.GroupVersion.String(),
		"kind":       "ClusterProfile",
		"metadata":   map[string]any{"name": profile.Name, "namespace": profile.Namespace},
		"status":     map[string]any{"conditions": list},
	}}
	return client.IgnoreNotFound(r.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(Name), client.ForceOwnership))
}

// SetupWithManager registers the controller: ClusterProfiles, and the agents'
// Leases (cached by label only).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.GracePeriod == 0 {
		r.GracePeriod = DefaultGracePeriod
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("clusterhealth").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		For(&cpv1alpha1.ClusterProfile{}, builder.WithPredicates(lookup.ManagedProfiles)).
		Watches(&coordinationv1.Lease{}, r.leaseHandler()).
		Complete(r)
}

// leaseHandler maps Lease events to the cluster's ClusterProfile. A renewal that
// changes nothing but the renew time is skipped while the cluster counts as
// reachable: the reconcile already waits for the Lease's deadline.
func (r *Reconciler) leaseHandler() handler.EventHandler {
	enqueue := func(ctx context.Context, lease client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request], onlyIfUnreachable bool) {
		cluster, ok := names.ClusterFromNamespace(lease.GetNamespace())
		if !ok || lease.GetName() != placementv1alpha1.AgentLeaseName {
			return
		}
		profiles, err := lookup.ClusterProfilesNamed(ctx, r.Client, cluster)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing ClusterProfiles for a Lease", "cluster", cluster)
			return
		}
		for i := range profiles {
			p := &profiles[i]
			if onlyIfUnreachable && meta.IsStatusConditionTrue(p.Status.Conditions, placementv1alpha1.AgentReachableCondition) {
				continue
			}
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q, false)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			a, b := e.ObjectOld.GetAnnotations(), e.ObjectNew.GetAnnotations()
			changed := a[placementv1alpha1.MemberReadyAnnotation] != b[placementv1alpha1.MemberReadyAnnotation] ||
				a[placementv1alpha1.MemberReadyMessageAnnotation] != b[placementv1alpha1.MemberReadyMessageAnnotation]
			enqueue(ctx, e.ObjectNew, q, !changed)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q, false)
		},
	}
}
