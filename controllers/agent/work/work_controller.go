// Package work is the agent's Work controller: it applies the manifests of the
// Works in its cluster's namespace on the hub to the member cluster, records what it
// created in an AppliedWork, reports per-manifest conditions back on the Work, and
// removes exactly what it created when a manifest or the Work goes away.
package work

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/health"
	"github.com/lodestar-dev/lodestar/internal/kube"
	"github.com/lodestar-dev/lodestar/internal/policy"
)

// FieldManager is the agent's server-side apply field manager on members and its
// field owner of Work status on the hub.
const FieldManager = "lodestar-agent"

// Reconciler applies Works of one cluster.
type Reconciler struct {
	// Hub reads Works in the cluster's namespace and writes their status.
	Hub client.Client
	// Member writes the member cluster.
	Member client.Client
	// MemberCache, when set, is used to watch the placed objects on the member, so
	// that a change of their status is reported promptly.
	MemberCache cache.Cache
	// Readiness decides whether placed objects are available.
	Readiness *health.Checker
	// Policy, when set, is the member's own limit on what is applied.
	Policy *policy.Checker
	// Watch, set by SetupWithManager, starts watching a kind on the member.
	Watch func(schema.GroupVersionKind) error
}

// Requeue intervals: while something is on its way (a CRD being established, an
// object not yet available), and otherwise as a resync.
const (
	requeueWaiting  = 2 * time.Second
	requeuePending  = 30 * time.Second
	requeueResync   = 10 * time.Minute
	requeueJitterBy = 0.2
)

// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=works,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=works/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile applies one Work to the member, or cleans it up when it is deleted.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	work := &workv1alpha1.Work{}
	if err := r.Hub.Get(ctx, req.NamespacedName, work); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("work", klog.KObj(work)))

	if !work.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, work)
	}
	if err := kube.SetFinalizer(ctx, r.Hub, work, lodestarworkv1alpha1.WorkFinalizer, true); err != nil {
		return ctrl.Result{}, err
	}

	p, err := planFor(work)
	if err != nil {
		// Not knowing how to write, write nothing; a new Work generation is needed.
		return ctrl.Result{}, errors.Join(reconcile.TerminalError(err), r.applyWorkStatus(ctx, work, invalidStrategyStatus(work, err)))
	}
	applied, err := r.appliedWork(ctx, work)
	if err != nil {
		return ctrl.Result{}, err
	}

	results := r.applyAll(ctx, work, applied, p)
	st := newWorkStatus(work, results, p, r.Readiness)
	defer func() {
		if err := r.applyWorkStatus(ctx, work, st); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()

	// Record what was applied, then remove what the Work no longer asks for.
	records := mergeRecords(applied.Status.AppliedResources, results)
	kept, cleanupErr := r.removeStale(ctx, records, desiredKeys(results), applied, orphans(work))
	if err := r.writeRecords(ctx, applied, kept); err != nil {
		return ctrl.Result{}, errors.Join(cleanupErr, err)
	}
	if err := errors.Join(cleanupErr, transientErrors(results)); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: requeueAfter(results, st, p)}, nil
}

// requeueAfter says when to look at the Work again without an event: soon while a
// CRD of the Work is being established, regularly while objects are not available
// or only reported on (whose changes no watch reports), and otherwise as a resync.
func requeueAfter(results []result, st workv1alpha1.WorkStatus, p plan) time.Duration {
	d := requeueResync
	for _, res := range results {
		if res.waiting {
			d = requeueWaiting
		}
	}
	if d == requeueResync && (!meta.IsStatusConditionTrue(st.Conditions, ConditionAvailable) || p.strategy.Type == lodestarworkv1alpha1.ApplyReportOnly) {
		d = requeuePending
	}
	return wait.Jitter(d, requeueJitterBy)
}

// orphans tells whether the Work's deletion policy leaves its objects on the member.
func orphans(work *workv1alpha1.Work) bool {
	return work.Annotations[lodestarworkv1alpha1.DeletionPolicyAnnotation] == lodestarworkv1alpha1.DeletionPolicyOrphan
}

// reconcileDelete removes everything the agent created for the Work, then the
// AppliedWork, then releases the Work on the hub.
func (r *Reconciler) reconcileDelete(ctx context.Context, work *workv1alpha1.Work) error {
	if !controllerutil.ContainsFinalizer(work, lodestarworkv1alpha1.WorkFinalizer) {
		return nil
	}
	applied := &lodestarworkv1alpha1.AppliedWork{}
	err := r.Member.Get(ctx, client.ObjectKey{Name: appliedWorkName(work)}, applied)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading AppliedWork: %w", err)
	default:
		kept, cleanupErr := r.removeStale(ctx, applied.Status.AppliedResources, map[string]bool{}, applied, orphans(work))
		if err := r.writeRecords(ctx, applied, kept); err != nil || cleanupErr != nil {
			return errors.Join(cleanupErr, err)
		}
		if len(kept) > 0 {
			return fmt.Errorf("waiting for %d objects to be deleted from the member", len(kept))
		}
		if err := r.Member.Delete(ctx, applied, client.Preconditions{UID: &applied.UID}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting AppliedWork: %w", err)
		}
	}
	if err := kube.SetFinalizer(ctx, r.Hub, work, lodestarworkv1alpha1.WorkFinalizer, false); err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("Removed the Work's objects from the member")
	return nil
}

// appliedWork returns the member's AppliedWork for the Work, creating it if needed.
func (r *Reconciler) appliedWork(ctx context.Context, work *workv1alpha1.Work) (*lodestarworkv1alpha1.AppliedWork, error) {
	applied := &lodestarworkv1alpha1.AppliedWork{}
	err := r.Member.Get(ctx, client.ObjectKey{Name: appliedWorkName(work)}, applied)
	if err == nil {
		return applied, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading AppliedWork: %w", err)
	}
	applied = &lodestarworkv1alpha1.AppliedWork{
		ObjectMeta: metav1.ObjectMeta{Name: appliedWorkName(work)},
		Spec:       lodestarworkv1alpha1.AppliedWorkSpec{WorkNamespace: work.Namespace, WorkName: work.Name},
	}
	if err := r.Member.Create(ctx, applied); err != nil {
		return nil, fmt.Errorf("creating AppliedWork: %w", err)
	}
	return applied, nil
}

// writeRecords stores the list of objects the agent answers for, when it changed.
func (r *Reconciler) writeRecords(ctx context.Context, applied *lodestarworkv1alpha1.AppliedWork, records []lodestarworkv1alpha1.AppliedResource) error {
	if equalRecords(applied.Status.AppliedResources, records) {
		return nil
	}
	base := applied.DeepCopy()
	applied.Status.AppliedResources = records
	if err := r.Member.Status().Patch(ctx, applied, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("recording applied objects: %w", err)
	}
	return nil
}

// appliedWorkName is the name of a Work's AppliedWork on the member. The agent
// serves one hub namespace, so the Work's name is unique.
func appliedWorkName(work *workv1alpha1.Work) string { return work.Name }

// Changed passes the Work events the agent acts on: changes of the spec (and
// deletion), labels and annotations (apply strategy, feedback rules); not its own
// status writes.
func Changed() predicate.Predicate {
	return predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{})
}

// SetupWithManager registers the controller on the hub manager, whose cache holds
// only the cluster's own namespace. The Work's annotations (apply strategy, feedback
// rules) are part of what it applies. When MemberCache is set, each kind the agent
// places is watched on the member (metadata only), and a change of an object the
// agent created brings its Work back.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workNamespace string) error {
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named("work").
		For(&workv1alpha1.Work{}, builder.WithPredicates(Changed())).
		Build(r)
	if err != nil || r.MemberCache == nil {
		return err
	}
	var watched sync.Map
	toWork := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		var reqs []reconcile.Request
		for _, ref := range obj.GetOwnerReferences() {
			if ref.Kind == "AppliedWork" && ref.APIVersion == lodestarworkv1alpha1.GroupVersion.String() {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: workNamespace, Name: ref.Name}})
			}
		}
		return reqs
	})
	r.Watch = func(gvk schema.GroupVersionKind) error {
		if _, loaded := watched.LoadOrStore(gvk, struct{}{}); loaded {
			return nil
		}
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(gvk)
		if err := c.Watch(source.Kind[client.Object](r.MemberCache, obj, toWork)); err != nil {
			watched.Delete(gvk)
			return err
		}
		return nil
	}
	return nil
}
