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
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
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
	"github.com/lodestar-dev/lodestar/internal/member"
	"github.com/lodestar-dev/lodestar/internal/metrics"
	"github.com/lodestar-dev/lodestar/internal/patch"
	"github.com/lodestar-dev/lodestar/internal/policy"
	"github.com/lodestar-dev/lodestar/internal/readiness"
	"github.com/lodestar-dev/lodestar/internal/watches"
	"github.com/lodestar-dev/lodestar/internal/workapply"
)

// FieldManager is the agent's server-side apply field manager on members and its
// field owner of Work status on the hub.
const FieldManager = member.FieldManager

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
	// HubID is the hub's identity (names.HubID), part of every AppliedWork's name
	// and its HubLabel.
	HubID string
	// Policy, when set, is the member's own limit on what is applied.
	Policy *policy.Checker
	// Recorder, when set, writes events on the hub's Works.
	Recorder events.EventRecorder
	// Watch, set by SetupWithManager, starts watching a kind on the member.
	Watch func(schema.GroupVersionKind) error
	// UnservedKindGracePeriod bounds how long cleanup waits for a recorded kind the
	// member no longer serves (default DefaultUnservedKindGracePeriod).
	UnservedKindGracePeriod time.Duration
	// unserved remembers when each record was first found of an unserved kind
	// (AppliedWork UID and record key to time.Time).
	unserved sync.Map
	// member is the one writer to the member (onMember), made from Member,
	// Policy and Readiness on first use.
	member     *member.Member
	memberOnce sync.Once
	// resync, set by SetupWithManager, brings every Work back (Resync).
	resync chan event.TypedGenericEvent[*workv1alpha1.Work]
	// Watches, when set, tracks the kinds watched on the member and stops the
	// watch of a kind the member no longer serves; its Object must make
	// metadata-only objects.
	Watches *watches.Set
}

// onMember is the reconciler's one writer to the member.
func (r *Reconciler) onMember() *member.Member {
	r.memberOnce.Do(func() { r.member = &member.Member{Client: r.Member, Policy: r.Policy, Readiness: r.Readiness} })
	return r.member
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
// The Work's status is written in one place, when Reconcile returns.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	work := &workv1alpha1.Work{}
	if err := r.Hub.Get(ctx, req.NamespacedName, work); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("work", klog.KObj(work)))

	// status is what this reconcile found, when it has something to say.
	var status *workv1alpha1.WorkStatus
	defer func() {
		if status == nil {
			return
		}
		if err := r.applyWorkStatus(ctx, work, *status); err != nil {
			result, retErr = ctrl.Result{}, errors.Join(retErr, err)
		}
	}()

	if !work.DeletionTimestamp.IsZero() {
		blocked, err := r.reconcileDelete(ctx, work)
		if len(blocked) > 0 {
			status = ptr.To(workapply.CleanupBlockedStatus(work, blocked))
		}
		return ctrl.Result{}, err
	}
	if err := r.holdWork(ctx, work, true); err != nil {
		return ctrl.Result{}, err
	}

	p, err := workapply.For(work)
	if err != nil {
		// Not knowing how to write, write nothing; a new Work generation is needed.
		status = ptr.To(workapply.InvalidStrategyStatus(work, err))
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	return r.applyWork(ctx, work, p, &status)
}

// applyWork applies the Work's manifests, records what was applied, removes what
// it no longer asks for, and says what the Work's status is (*status).
func (r *Reconciler) applyWork(ctx context.Context, work *workv1alpha1.Work, p workapply.Plan, status **workv1alpha1.WorkStatus) (ctrl.Result, error) {
	applied, err := r.appliedWork(ctx, work)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.onMember().RecordDeletionPolicy(ctx, applied, p.DeletionPolicy(work), p.Strategy.Claims); err != nil {
		return ctrl.Result{}, err
	}

	started := time.Now()
	results := r.applyAll(ctx, work, applied, p)
	metrics.ApplyDuration.Observe(time.Since(started).Seconds())
	r.recordCorrections(ctx, work, results)

	// Record what was applied, then remove what the Work no longer asks for.
	records := workapply.MergeRecords(applied.Status.AppliedResources, results)
	kept, blocked, cleanupErr := r.removeStale(ctx, records, workapply.DesiredKeys(results), applied, p.DeletionPolicy(work))
	r.onMember().NamePodBlockers(ctx, results)
	r.onMember().ReadClaims(ctx, results)
	*status = ptr.To(workapply.NewWorkStatus(work, results, p, r.Readiness.With(p.Health), blocked))
	if err := r.onMember().WriteRecords(ctx, applied, kept); err != nil {
		return ctrl.Result{}, errors.Join(cleanupErr, err)
	}
	if err := errors.Join(cleanupErr, workapply.TransientErrors(results)); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: requeueAfter(results, **status, p)}, nil
}

// recordCorrections tells, with an event on the Work and in the log, what the agent
// set back on the member, and which objects passed to this Work from another; and
// counts the corrections and the manifests that failed for the metrics.
func (r *Reconciler) recordCorrections(ctx context.Context, work *workv1alpha1.Work, results []workapply.Result) {
	for _, res := range results {
		if res.Condition.Status == metav1.ConditionFalse {
			metrics.ApplyErrors.WithLabelValues(res.Condition.Reason).Inc()
		}
		if res.PassedFrom != "" {
			what := fmt.Sprintf("manifest %d (%s)", res.ID.Ordinal, workapply.Describe(res.ID))
			ctrl.LoggerFrom(ctx).Info("Took over an object another Work let go", "manifest", what, "from", res.PassedFrom)
			if r.Recorder != nil {
				r.Recorder.Eventf(work, nil, corev1.EventTypeNormal, lodestarworkv1alpha1.EventOwnershipPassed, "Apply",
					"%s passed to this Work from AppliedWork %s without being deleted", what, res.PassedFrom)
			}
		}
		if len(res.Corrected) == 0 {
			continue
		}
		metrics.DriftCorrections.Inc()
		what := fmt.Sprintf("manifest %d (%s)", res.ID.Ordinal, workapply.Describe(res.ID))
		ctrl.LoggerFrom(ctx).Info("Corrected drift on the member", "manifest", what, "fields", res.Corrected)
		if r.Recorder != nil {
			r.Recorder.Eventf(work, nil, corev1.EventTypeNormal, lodestarworkv1alpha1.EventDriftCorrected, "Apply",
				"%s was changed on the member at %s; set back to the manifest", what, strings.Join(res.Corrected, ", "))
		}
	}
}

// requeueAfter says when to look at the Work again without an event: soon while a
// CRD of the Work is being established, regularly while objects are not available
// or only reported on (whose changes no watch reports), and otherwise as a resync.
func requeueAfter(results []workapply.Result, st workv1alpha1.WorkStatus, p workapply.Plan) time.Duration {
	d := requeueResync
	for _, res := range results {
		if res.Waiting {
			d = requeueWaiting
		}
	}
	if d == requeueResync && (!meta.IsStatusConditionTrue(st.Conditions, lodestarworkv1alpha1.ConditionAvailable) || p.Strategy.Type == lodestarworkv1alpha1.ApplyReportOnly) {
		d = requeuePending
	}
	return wait.Jitter(d, requeueJitterBy)
}

// reconcileDelete removes everything the agent created for the Work (or releases
// it, when the Work orphans), then the AppliedWork, then releases the Work on the
// hub. While objects are held on the member it returns what holds them (for the
// Work's CleanupBlocked condition), and the Work keeps its finalizer.
func (r *Reconciler) reconcileDelete(ctx context.Context, work *workv1alpha1.Work) ([]workapply.Held, error) {
	if !controllerutil.ContainsFinalizer(work, lodestarworkv1alpha1.WorkFinalizer) {
		return nil, nil
	}
	policy := lodestarworkv1alpha1.DeletionDelete
	if workapply.Orphans(work) {
		policy = lodestarworkv1alpha1.DeletionOrphan
	}
	if p, err := workapply.For(work); err == nil {
		policy = p.DeletionPolicy(work)
	}
	applied := &lodestarworkv1alpha1.AppliedWork{}
	err := r.Member.Get(ctx, client.ObjectKey{Name: r.appliedWorkName(work)}, applied)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("reading AppliedWork: %w", err)
	default:
		if blocked, err := r.forget(ctx, applied, policy); err != nil {
			return blocked, err
		}
	}
	if err := r.holdWork(ctx, work, false); err != nil {
		return nil, err
	}
	ctrl.LoggerFrom(ctx).Info("Removed the Work's objects from the member", "deletionPolicy", policy)
	return nil, nil
}

// holdWork adds (held) or removes the Work's finalizer on the hub: the agent
// holds a Work before it applies anything of it, and releases it once it has
// removed (or released) all it applied. The agent is its writer; the work
// generator only creates Works with it, so that holding one costs the hub no
// write, and the cluster cleanup controller removes it only when a deleted
// cluster's agent is gone.
func (r *Reconciler) holdWork(ctx context.Context, work *workv1alpha1.Work, held bool) error {
	return patch.SetFinalizer(ctx, r.Hub, work, lodestarworkv1alpha1.WorkFinalizer, held)
}

// forget removes (or releases, as the deletion policy says) every object of an
// AppliedWork, then the AppliedWork itself. While objects are held on the member,
// it returns what holds them and an error, to be retried.
func (r *Reconciler) forget(ctx context.Context, applied *lodestarworkv1alpha1.AppliedWork, policy lodestarworkv1alpha1.DeletionPolicy) ([]workapply.Held, error) {
	kept, blocked, cleanupErr := r.removeStale(ctx, applied.Status.AppliedResources, map[string]bool{}, applied, policy)
	if err := r.onMember().WriteRecords(ctx, applied, kept); err != nil || cleanupErr != nil {
		return blocked, errors.Join(cleanupErr, err)
	}
	if err := r.onMember().DeleteAppliedWork(ctx, applied); err != nil {
		return nil, err
	}
	return nil, nil
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

// resyncWhenSynced brings every Work back once the new watch of obj's kind has
// listed the member: an object of that kind deleted on the member before the
// list would otherwise send no event, and a Work that is available is looked at
// again only at the next resync.
func (r *Reconciler) resyncWhenSynced(obj client.Object) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	time.AfterFunc(2*time.Minute, cancel)
	inf, err := r.MemberCache.GetInformer(ctx, obj)
	if err != nil || !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return
	}
	r.Resync(ctx)
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
	if r.Watches == nil {
		r.Watches = &watches.Set{Cache: r.MemberCache, Object: MetadataObject}
	}
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
		if !r.Watches.Add(gvk) {
			return nil
		}
		obj := MetadataObject(gvk)
		if err := c.Watch(source.Kind[client.Object](r.MemberCache, obj, toWork)); err != nil {
			r.Watches.Forget(gvk)
			return err
		}
		metrics.AgentWatchedKinds.WithLabelValues(gvk.Group, gvk.Kind).Inc()
		go r.resyncWhenSynced(obj)
		return nil
	}
	return nil
}

// MetadataObject is the metadata-only object the member watches of gvk are made for.
func MetadataObject(gvk schema.GroupVersionKind) client.Object {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	return obj
}
