// Package work is the agent's Work controller: it applies the manifests of the
// Works in its cluster's namespace on the hub to the member cluster, records what it
// created in an AppliedWork, reports per-manifest conditions back on the Work, and
// removes exactly what it created when a manifest or the Work goes away.
package work

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/kube"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/policy"
	"github.com/lodestar-dev/lodestar/internal/readiness"
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
	Readiness *readiness.Checker
	// Policy, when set, is the member's own limit on what is applied.
	Policy *policy.Checker
	// Recorder, when set, writes events on the hub's Works.
	Recorder events.EventRecorder
	// Watch, set by SetupWithManager, starts watching a kind on the member.
	Watch func(schema.GroupVersionKind) error
	// resync, set by SetupWithManager, brings every Work back (Resync).
	resync chan event.TypedGenericEvent[*workv1alpha1.Work]
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
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
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
	r.recordCorrections(ctx, work, results)

	// Record what was applied, then remove what the Work no longer asks for.
	records := mergeRecords(applied.Status.AppliedResources, results)
	kept, blocked, cleanupErr := r.removeStale(ctx, records, desiredKeys(results), applied, p.orphans(work))
	st := newWorkStatus(work, results, p, r.Readiness, blocked)
	defer func() {
		if err := r.applyWorkStatus(ctx, work, st); err != nil {
			result, retErr = ctrl.Result{}, errors.Join(retErr, err)
		}
	}()
	if err := r.writeRecords(ctx, applied, kept); err != nil {
		return ctrl.Result{}, errors.Join(cleanupErr, err)
	}
	if err := errors.Join(cleanupErr, transientErrors(results)); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: requeueAfter(results, st, p)}, nil
}

// recordCorrections tells, with an event on the Work and in the log, what the agent
// set back on the member.
func (r *Reconciler) recordCorrections(ctx context.Context, work *workv1alpha1.Work, results []result) {
	for _, res := range results {
		if len(res.corrected) == 0 {
			continue
		}
		what := fmt.Sprintf("manifest %d (%s)", res.id.Ordinal, describe(res.id))
		ctrl.LoggerFrom(ctx).Info("Corrected drift on the member", "manifest", what, "fields", res.corrected)
		if r.Recorder != nil {
			r.Recorder.Eventf(work, nil, corev1.EventTypeNormal, lodestarworkv1alpha1.EventDriftCorrected, "Apply",
				"%s was changed on the member at %s; set back to the manifest", what, strings.Join(res.corrected, ", "))
		}
	}
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
	if d == requeueResync && (!meta.IsStatusConditionTrue(st.Conditions, lodestarworkv1alpha1.ConditionAvailable) || p.strategy.Type == lodestarworkv1alpha1.ApplyReportOnly) {
		d = requeuePending
	}
	return wait.Jitter(d, requeueJitterBy)
}

// orphans tells whether the Work's deletion policy leaves its objects on the member.
func orphans(work *workv1alpha1.Work) bool {
	return work.Annotations[lodestarworkv1alpha1.DeletionPolicyAnnotation] == lodestarworkv1alpha1.DeletionPolicyOrphan
}

// reconcileDelete removes everything the agent created for the Work (or releases
// it, when the Work orphans), then the AppliedWork, then releases the Work on the
// hub. While a member's finalizer holds an object, the Work says so in its
// CleanupBlocked condition and keeps its finalizer.
func (r *Reconciler) reconcileDelete(ctx context.Context, work *workv1alpha1.Work) error {
	if !controllerutil.ContainsFinalizer(work, lodestarworkv1alpha1.WorkFinalizer) {
		return nil
	}
	orphan := orphans(work)
	if p, err := planFor(work); err == nil {
		orphan = p.orphans(work)
	}
	applied := &lodestarworkv1alpha1.AppliedWork{}
	err := r.Member.Get(ctx, client.ObjectKey{Name: appliedWorkName(work)}, applied)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading AppliedWork: %w", err)
	default:
		if err := r.forget(ctx, applied, orphan, func(blocked []string) error {
			return r.applyWorkStatus(ctx, work, cleanupBlockedStatus(work, blocked))
		}); err != nil {
			return err
		}
	}
	if err := kube.SetFinalizer(ctx, r.Hub, work, lodestarworkv1alpha1.WorkFinalizer, false); err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("Removed the Work's objects from the member", "orphaned", orphan)
	return nil
}

// forget removes (or with orphan, releases) every object of an AppliedWork, then
// the AppliedWork itself. When objects are held on the member, it tells blocked
// what holds them and returns an error, to be retried.
func (r *Reconciler) forget(ctx context.Context, applied *lodestarworkv1alpha1.AppliedWork, orphan bool, blocked func([]string) error) error {
	kept, holders, cleanupErr := r.removeStale(ctx, applied.Status.AppliedResources, map[string]bool{}, applied, orphan)
	if err := r.writeRecords(ctx, applied, kept); err != nil || cleanupErr != nil {
		if len(holders) > 0 && blocked != nil {
			err = errors.Join(err, blocked(holders))
		}
		return errors.Join(cleanupErr, err)
	}
	if err := kube.SetFinalizer(ctx, r.Member, applied, lodestarworkv1alpha1.AppliedWorkFinalizer, false); err != nil {
		return fmt.Errorf("releasing AppliedWork: %w", err)
	}
	if err := r.Member.Delete(ctx, applied, client.Preconditions{UID: &applied.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting AppliedWork: %w", err)
	}
	return nil
}

// appliedWork returns the member's AppliedWork for the Work, creating it if needed.
func (r *Reconciler) appliedWork(ctx context.Context, work *workv1alpha1.Work) (*lodestarworkv1alpha1.AppliedWork, error) {
	applied := &lodestarworkv1alpha1.AppliedWork{}
	err := r.Member.Get(ctx, client.ObjectKey{Name: appliedWorkName(work)}, applied)
	if err == nil {
		if !applied.DeletionTimestamp.IsZero() {
			// Deleted by hand on the member. The finalizer keeps it, and with it the
			// objects that name it as their owner, while the Work lives.
			ctrl.LoggerFrom(ctx).Info("The AppliedWork was deleted on the member; it is kept while the Work exists")
			if r.Recorder != nil {
				r.Recorder.Eventf(work, nil, corev1.EventTypeWarning, lodestarworkv1alpha1.EventAppliedWorkDeleted, "Apply",
					"the AppliedWork %s was deleted on the member; it is kept (finalizer %s) while this Work exists, so the placed objects stay", applied.Name, lodestarworkv1alpha1.AppliedWorkFinalizer)
			}
		}
		if err := kube.SetFinalizer(ctx, r.Member, applied, lodestarworkv1alpha1.AppliedWorkFinalizer, true); err != nil {
			return nil, fmt.Errorf("protecting AppliedWork: %w", err)
		}
		return applied, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading AppliedWork: %w", err)
	}
	applied = &lodestarworkv1alpha1.AppliedWork{
		ObjectMeta: metav1.ObjectMeta{Name: appliedWorkName(work), Finalizers: []string{lodestarworkv1alpha1.AppliedWorkFinalizer}},
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

// appliedWorkName is the name of a Work's AppliedWork on the member.
func appliedWorkName(work *workv1alpha1.Work) string {
	return names.AppliedWork(work.Namespace, work.Name)
}

// workFor names the Work of an AppliedWork of the agent's hub namespace; false for
// another namespace's.
func (r *Reconciler) workFor(ctx context.Context, workNamespace, appliedName string) (string, bool) {
	if name, ok := strings.CutPrefix(appliedName, workNamespace+"."); ok && names.AppliedWork(workNamespace, name) == appliedName {
		return name, true
	}
	if !names.IsShortened(appliedName) {
		return "", false
	}
	applied := &lodestarworkv1alpha1.AppliedWork{}
	if err := r.Member.Get(ctx, client.ObjectKey{Name: appliedName}, applied); err != nil || applied.Spec.WorkNamespace != workNamespace {
		return "", false
	}
	return applied.Spec.WorkName, true
}

// maxRetryDelay caps the backoff of a failing Work: a status that could not be
// written while the hub was away, or a manifest that failed, is tried again at
// least this often.
const maxRetryDelay = time.Minute

func rateLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, maxRetryDelay),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// Resync brings every Work of the cache back to be reconciled: called when the
// hub is reachable again, so that what the agent could not report meanwhile is
// reported at once rather than at the next retry.
func (r *Reconciler) Resync(ctx context.Context) {
	works := &workv1alpha1.WorkList{}
	if err := r.Hub.List(ctx, works); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing Works to resync")
		return
	}
	go func() {
		for i := range works.Items {
			select {
			case r.resync <- event.TypedGenericEvent[*workv1alpha1.Work]{Object: &works.Items[i]}:
			case <-ctx.Done():
				return
			}
		}
	}()
}

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
	r.resync = make(chan event.TypedGenericEvent[*workv1alpha1.Work])
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named("work").
		For(&workv1alpha1.Work{}, builder.WithPredicates(Changed())).
		WatchesRawSource(source.Channel(r.resync, &handler.TypedEnqueueRequestForObject[*workv1alpha1.Work]{})).
		WithOptions(controller.Options{RateLimiter: rateLimiter()}).
		Build(r)
	if err != nil || r.MemberCache == nil {
		return err
	}
	var watched sync.Map
	toWork := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
		var reqs []reconcile.Request
		for _, ref := range obj.GetOwnerReferences() {
			if ref.Kind != "AppliedWork" || ref.APIVersion != lodestarworkv1alpha1.GroupVersion.String() {
				continue
			}
			if name, ok := r.workFor(ctx, workNamespace, ref.Name); ok {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: workNamespace, Name: name}})
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
