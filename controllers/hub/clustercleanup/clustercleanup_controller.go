// Package clustercleanup keeps the cleanup finalizer on the ClusterProfiles
// Lodestar manages and, once one is deleted, removes the cluster's hub side.
package clustercleanup

import (
	"cmp"
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/handlers"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/patch"
	"github.com/lodestar-dev/lodestar/internal/teardown"
)

// Name is the cleanup controller's event source.
const Name = "lodestar-clustercleanup"

// EventMemberCleanupAbandoned is the event on a deleted ClusterProfile when the hub
// gives up waiting for its unreachable agent to clean the member.
const EventMemberCleanupAbandoned = "MemberCleanupAbandoned"

// DefaultGracePeriod is how long the hub waits for an unreachable agent to
// remove what it placed before it gives up on the member and cleans the hub side.
const DefaultGracePeriod = 10 * time.Minute

// Reconciler removes a deleted ClusterProfile's hub side: its Works (each removed from
// the member by the agent, or given up on when the agent has been unreachable for
// the grace period, leaving the member's objects in place), its namespace with the
// agent's identity and Lease, and the agent's Role in the cluster set.
type Reconciler struct {
	Client client.Client
	// APIReader lists the Works of a cluster being removed from the API
	// server: the cache holds only this manager's, and hand-written Works go
	// too (Client when nil).
	APIReader client.Reader
	Recorder  events.EventRecorder
	// GracePeriod is how long an unreachable agent has to clean up.
	GracePeriod time.Duration
	// ClusterSetNamespaces are the cluster sets the hub manages: ClusterProfiles
	// elsewhere (a foreign namespace, say) are never acted on.
	ClusterSetNamespaces []string
}

// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=clusterprofiles,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=works,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile keeps the cleanup finalizer and the Work namespace label on managed
// ClusterProfiles and does the cleanup once one is deleted.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	profile, err := lookup.ManagedProfile(ctx, r.Client, req.NamespacedName, r.ClusterSetNamespaces)
	if profile == nil || err != nil {
		return ctrl.Result{}, err
	}
	if profile.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.markManaged(ctx, profile)
	}
	if !controllerutil.ContainsFinalizer(profile, placementv1alpha1.ClusterCleanupFinalizer) {
		return ctrl.Result{}, nil
	}
	log := ctrl.LoggerFrom(ctx)
	ns := names.ClusterNamespace(profile.Name)

	works := &workv1alpha1.WorkList{}
	if err := cmp.Or[client.Reader](r.APIReader, r.Client).List(ctx, works, client.InNamespace(ns)); err != nil {
		return ctrl.Result{}, err
	}
	if len(works.Items) > 0 {
		giveUp, wait := r.agentGone(profile)
		never := neverConnected(profile)
		for i := range works.Items {
			w := &works.Items[i]
			if w.DeletionTimestamp.IsZero() {
				// Placements no longer choose the cluster; hand-written Works go too.
				if err := r.Client.Delete(ctx, w); client.IgnoreNotFound(err) != nil {
					return ctrl.Result{}, fmt.Errorf("deleting Work %s/%s: %w", w.Namespace, w.Name, err)
				}
			}
			if giveUp {
				if err := patch.SetFinalizer(ctx, r.Client, w, lodestarworkv1alpha1.WorkFinalizer, false); err != nil {
					return ctrl.Result{}, err
				}
			}
		}
		if giveUp && never {
			log.Info("Removed the Works of a cluster whose agent never connected: nothing of them was applied", "works", len(works.Items))
			return ctrl.Result{RequeueAfter: time.Second}, nil
		}
		if giveUp {
			r.Recorder.Eventf(profile, nil, corev1.EventTypeWarning, EventMemberCleanupAbandoned, "Cleanup",
				"the agent has been unreachable for more than %s: %d Works removed from the hub only; the member keeps their objects", r.GracePeriod, len(works.Items))
			log.Info("Gave up on an unreachable agent's cleanup; the member keeps its objects", "works", len(works.Items))
			return ctrl.Result{RequeueAfter: time.Second}, nil
		}
		// Work deletions bring the next reconcile; the grace period may end first.
		return ctrl.Result{RequeueAfter: wait}, nil
	}

	// The cluster's namespace goes only when Lodestar made it (join marks it).
	kept, err := teardown.RemoveHubSide(ctx, r.Client, profile.Namespace, profile.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	if kept {
		log.Info("Left a namespace Lodestar did not make", "namespace", ns)
	}
	log.Info("Removed a deleted cluster's hub side", "namespace", ns)
	return ctrl.Result{}, patch.SetFinalizer(ctx, r.Client, profile, placementv1alpha1.ClusterCleanupFinalizer, false)
}

// agentGone tells whether the agent of a deleted cluster is taken to be gone for
// good: unreachable (or never connected) for the grace period, counted from the
// later of the profile's deletion and the condition's last change. Otherwise it
// says how long to wait before asking again.
//
// An agent that never connected is gone at once: it applied nothing, so there
// is nothing on the member to wait for.
func (r *Reconciler) agentGone(profile *cpv1alpha1.ClusterProfile) (bool, time.Duration) {
	if neverConnected(profile) {
		return true, 0
	}
	c := meta.FindStatusCondition(profile.Status.Conditions, placementv1alpha1.AgentReachableCondition)
	if c != nil && c.Status == metav1.ConditionTrue {
		return false, r.GracePeriod
	}
	since := profile.DeletionTimestamp.Time
	if c != nil && c.LastTransitionTime.After(since) {
		since = c.LastTransitionTime.Time
	}
	left := time.Until(since.Add(r.GracePeriod))
	if left <= 0 {
		return true, 0
	}
	return false, left
}

// neverConnected tells whether the cluster's agent never renewed its Lease.
func neverConnected(profile *cpv1alpha1.ClusterProfile) bool {
	c := meta.FindStatusCondition(profile.Status.Conditions, placementv1alpha1.AgentReachableCondition)
	return c != nil && c.Reason == placementv1alpha1.ReasonAgentNotSeen
}

// SetupWithManager registers the cleanup controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.GracePeriod == 0 {
		r.GracePeriod = DefaultGracePeriod
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("clustercleanup").
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		For(&cpv1alpha1.ClusterProfile{}, builder.WithPredicates(lookup.ManagedProfiles)).
		// A Work of a cluster namespace going away may finish a cleanup.
		Watches(&workv1alpha1.Work{}, handler.EnqueueRequestsFromMapFunc(r.profileOfWork),
			builder.WithPredicates(handlers.Deletions)).
		Complete(r)
}

// profileOfWork maps a deleted Work to its cluster's ClusterProfile (by name,
// through the index the health controller keeps).
func (r *Reconciler) profileOfWork(ctx context.Context, w client.Object) []reconcile.Request {
	cluster, ok := names.ClusterFromNamespace(w.GetNamespace())
	if !ok {
		return nil
	}
	profiles, err := lookup.ClusterProfilesNamed(ctx, r.Client, cluster)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing ClusterProfiles for a Work", "cluster", cluster)
		return nil
	}
	var out []reconcile.Request
	for i := range profiles {
		if !profiles[i].DeletionTimestamp.IsZero() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&profiles[i])})
		}
	}
	return out
}

// markManaged gives a living ClusterProfile the cleanup finalizer and the label
// naming its Work namespace (placementv1alpha1.WorkNamespaceLabel), in one patch
// when either is missing.
func (r *Reconciler) markManaged(ctx context.Context, profile *cpv1alpha1.ClusterProfile) error {
	ns := names.ClusterNamespace(profile.Name)
	if controllerutil.ContainsFinalizer(profile, placementv1alpha1.ClusterCleanupFinalizer) && profile.Labels[placementv1alpha1.WorkNamespaceLabel] == ns {
		return nil
	}
	base := profile.DeepCopy()
	controllerutil.AddFinalizer(profile, placementv1alpha1.ClusterCleanupFinalizer)
	if profile.Labels == nil {
		profile.Labels = map[string]string{}
	}
	profile.Labels[placementv1alpha1.WorkNamespaceLabel] = ns
	if err := r.Client.Patch(ctx, profile, client.MergeFrom(base)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("marking ClusterProfile %s managed: %w", client.ObjectKeyFromObject(profile), err)
	}
	return nil
}
