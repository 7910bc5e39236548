// Package placementrevision is the revision maker: it turns a Placement and the
// objects it selects into PlacementRevisions (selection, rendering, the hash of
// the rendering with the overrides, coalescing of rapid edits, the change
// cause, pruning), names the current one in the Placement's status.revision and
// writes the Rendered condition. The work generator rolls the revision out.
package placementrevision

import (
	"context"
	"errors"
	"fmt"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/division"
	"github.com/lodestar-dev/lodestar/internal/feedback"
	"github.com/lodestar-dev/lodestar/internal/handlers"
	"github.com/lodestar-dev/lodestar/internal/interpretation"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/metrics"
	"github.com/lodestar-dev/lodestar/internal/overrides"
	"github.com/lodestar-dev/lodestar/internal/render"
	"github.com/lodestar-dev/lodestar/internal/selection"
	"github.com/lodestar-dev/lodestar/internal/watches"
)

// Name is the revision maker's field owner and event source.
const Name = "lodestar-placementrevision"

// Reconciler makes the PlacementRevisions of Placements.
type Reconciler struct {
	Client client.Client
	Cache  cache.Cache
	Mapper meta.RESTMapper
	// Discovery lists the kinds the hub serves, for selectors without kind.
	Discovery discovery.DiscoveryInterface
	Recorder  events.EventRecorder
	// Workers is how many Placements are reconciled at once.
	Workers int
	// Watches, when set, tracks the selected kinds watched on the hub and stops
	// the watch of a kind the hub no longer serves; its Object must make
	// unstructured objects.
	Watches *watches.Set
	// Scope is what this hub manager takes (docs/scale.md).
	Scope lookup.Scope

	// changeBudget bounds what one namespace's object changes ask of it.
	changeBudget *handlers.NamespaceBudget
	budgetOnce   sync.Once
	// Interpretations are the hub's ResourceInterpretations compiled, for
	// the dependencies of custom kinds; nil compiles its own.
	Interpretations *interpretation.Cache

	controller controller.Controller
	kinds      *watches.ServedKinds
}

// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=placements,verbs=get;list;watch
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=placements/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=placementrevisions,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=works,verbs=get;list;watch
// +kubebuilder:rbac:groups=*,resources=*,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// unreadableRetry is how soon a Placement with a kind the hub could not list
// is looked at again.
const unreadableRetry = 30 * time.Second

// Reconcile renders what a Placement selects into its current PlacementRevision.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	placement := &placementv1alpha1.Placement{}
	if err := r.Client.Get(ctx, req.NamespacedName, placement); apierrors.IsNotFound(err) {
		// Its revisions go with it (the garbage collector's work, and ours on
		// a hub without one); while it is being deleted they stay, for the
		// work generator to take back its reflected status.
		return ctrl.Result{}, lookup.DeleteOrphans(ctx, r.Client, &placementv1alpha1.PlacementRevisionList{}, req.Namespace, req.Name, placementv1alpha1.PlacementNameLabel)
	} else if err != nil {
		return ctrl.Result{}, err
	}
	if !placement.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("placement", klog.KObj(placement)))
	st := &status{}
	defer func() { retErr = errors.Join(retErr, r.applyStatus(ctx, placement, st)) }()

	rd, err := r.render(ctx, placement, st)
	if invalid := (*invalidError)(nil); errors.As(err, &invalid) {
		// Nothing new is made: the current revision, and the Works, stay.
		st.rendered.Set(placementv1alpha1.RenderedCondition, metav1.ConditionFalse, invalid.reason, "%v", invalid.err)
		r.warnOnce(placement, st)
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	if unreadable := (*selection.UnreadableKindError)(nil); errors.As(err, &unreadable) {
		// Nothing new is made, nothing is taken away; looked at again later
		// (and at once when a CRD changes).
		st.rendered.Set(placementv1alpha1.RenderedCondition, metav1.ConditionFalse, placementv1alpha1.ReasonInvalidResourceSelector,
			"%v; the current revision stays", unreadable)
		r.warnOnce(placement, st)
		return ctrl.Result{RequeueAfter: wait.Jitter(unreadableRetry, 0.2)}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	rev, wait, err := r.revision(ctx, placement, rd)
	if err != nil {
		return ctrl.Result{}, err
	}
	st.revision = rev.Name
	if len(rd.refused) > 0 {
		// A refused selector takes only its own objects away: the others'
		// roll out, and the condition says which selectors place nothing.
		st.rendered.Set(placementv1alpha1.RenderedCondition, metav1.ConditionFalse, placementv1alpha1.ReasonInvalidResourceSelector,
			"%s; revision %d (%s) holds the other selectors' %s", refusals(rd.refused), rev.Spec.Revision, rev.Spec.Hash, message.Count(len(rd.manifests), "object"))
		r.warnOnce(placement, st)
	} else {
		st.rendered.Set(placementv1alpha1.RenderedCondition, metav1.ConditionTrue, placementv1alpha1.ReasonRendered,
			"%s at revision %d (%s)", message.Count(len(rd.manifests), "object"), rev.Spec.Revision, rev.Spec.Hash)
	}
	if err := r.prune(ctx, placement, rev.Name); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: wait}, nil
}

// warnOnce records a Warning event of the Rendered condition st decided, when
// the Placement does not already carry that condition.
func (r *Reconciler) warnOnce(placement *placementv1alpha1.Placement, st *status) {
	reason, msg := st.rendered.Reason(), st.rendered.Message()
	if c := meta.FindStatusCondition(placement.Status.Conditions, placementv1alpha1.RenderedCondition); c == nil || c.Reason != reason || c.Message != msg {
		r.Recorder.Eventf(placement, nil, corev1.EventTypeWarning, reason, "Render", "%s", msg)
	}
}

// refusals lists refused selectors in one line.
func refusals(refused []error) string {
	msgs := make([]string, len(refused))
	for i, err := range refused {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

// rendering is what a Placement's objects and overrides render to.
type rendering struct {
	// refused are the selectors that select nothing (selection.Selected).
	refused   []error
	manifests []runtime.RawExtension
	overrides []placementv1alpha1.Override
	division  *placementv1alpha1.ReplicaDivision
	// hash is the hash of the manifests, the overrides and the division.
	hash string
}

// invalidError is user input that cannot be rendered, with the Rendered reason.
type invalidError struct {
	reason string
	err    error
}

func (e *invalidError) Error() string { return e.err.Error() }
func (e *invalidError) Unwrap() error { return e.err }

// render selects the Placement's objects and renders them with its overrides,
// deciding the DependenciesFollowed condition once they are selected. What the
// user must fix is an *invalidError.
func (r *Reconciler) render(ctx context.Context, placement *placementv1alpha1.Placement, st *status) (rendering, error) {
	sel, err := r.selectObjects(ctx, placement)
	if err != nil {
		return rendering{}, err
	}
	if len(sel.NotFollowed) > 0 {
		st.followed.Set(placementv1alpha1.DependenciesFollowedCondition, metav1.ConditionFalse, placementv1alpha1.ReasonNotFollowed, "%s", sel.FollowedMessage())
	} else {
		st.followed.Set(placementv1alpha1.DependenciesFollowedCondition, metav1.ConditionTrue, placementv1alpha1.ReasonFollowed, "%s", sel.FollowedMessage())
	}
	if s := placement.Spec.ApplyStrategy; s != nil {
		if err := s.Defaulted().Validate(); err != nil {
			return rendering{}, &invalidError{placementv1alpha1.ReasonInvalidApplyStrategy, fmt.Errorf("spec.applyStrategy: %w", err)}
		}
	}
	if _, err := feedback.Compile(placement.Spec.Reporting.Feedback); err != nil {
		return rendering{}, &invalidError{placementv1alpha1.ReasonInvalidStatusFeedback, fmt.Errorf("spec.reporting.%w", err)}
	}
	if _, err := overrides.Compile(placement.Spec.Overrides); err != nil {
		return rendering{}, &invalidError{placementv1alpha1.ReasonInvalidOverride, err}
	}
	if ps := placement.Spec.Services; ps != nil && ps.Export == placementv1alpha1.ServiceExportAll {
		sel.Objects = render.WithServiceExports(sel.Objects)
	}
	manifests, hash, err := render.Manifests(sel.Objects, placement.Spec.Reporting.Reflection == placementv1alpha1.ReflectionAggregate)
	if tooLarge := (*render.TooLargeError)(nil); errors.As(err, &tooLarge) {
		return rendering{}, &invalidError{placementv1alpha1.ReasonWorkTooLarge, err}
	}
	if err != nil {
		return rendering{}, &invalidError{placementv1alpha1.ReasonRenderFailed, fmt.Errorf("rendering the selected objects: %w", err)}
	}
	if hash, err = overrides.Hash(hash, placement.Spec.Overrides); err != nil {
		return rendering{}, err
	}
	d := placement.Spec.Scheduling.Replicas
	if err := division.Validate(d); err != nil {
		return rendering{}, &invalidError{placementv1alpha1.ReasonInvalidDivision, fmt.Errorf("spec.scheduling.replicas: %w", err)}
	}
	hash = division.Hash(hash, d)
	return rendering{refused: sel.Refused, manifests: manifests, overrides: placement.Spec.Overrides, division: d, hash: hash}, nil
}

// SetupWithManager registers the revision maker. Watches of the kinds that
// Placements select are added as Placements name them.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Discovery != nil {
		r.kinds = &watches.ServedKinds{Discovery: r.Discovery}
	}
	if r.Interpretations == nil {
		r.Interpretations = &interpretation.Cache{}
	}
	if r.Watches == nil {
		r.Watches = &watches.Set{Cache: r.Cache, Discovery: r.Discovery, Object: UnstructuredObject,
			OnStop: func(gvk schema.GroupVersionKind) { metrics.WatchedKinds.WithLabelValues(gvk.Group, gvk.Kind).Dec() }}
		if r.Discovery != nil {
			if err := mgr.Add(r.Watches); err != nil {
				return err
			}
		}
	}
	crds := &metav1.PartialObjectMetadata{}
	crds.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named("placementrevision").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		// A new spec; and a rollout that completes, which may leave revisions
		// beyond the history limit that no Work holds any more.
		For(&placementv1alpha1.Placement{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, handlers.Updates(stableChanged)))).
		// A revision deleted by hand is made again when it is the current one.
		Owns(&placementv1alpha1.PlacementRevision{}, builder.WithPredicates(handlers.Deletions)).
		// A kind added (or removed) may concern the selectors without kind.
		WatchesMetadata(crds, handlers.Rechecking(r.placementsByLabels, watches.KindsRecheck, watches.KindsSettle)).
		// What custom kinds depend on may change what a Placement follows.
		Watches(&placementv1alpha1.ResourceInterpretation{}, handler.EnqueueRequestsFromMapFunc(r.placementsFollowing),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// Kinds a platform admin forbids in a namespace are never placed from it.
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(lookup.InNamespace(mgr.GetClient())),
			builder.WithPredicates(predicate.AnnotationChangedPredicate{})).
		Build(r.Scope.Only(mgr.GetClient(), r))
	r.controller = c
	return err
}

// stableChanged tells whether an update moved the Placement's rollout's stable
// revision.
func stableChanged(old, now *placementv1alpha1.Placement) bool {
	stable := func(p *placementv1alpha1.Placement) string {
		if p.Status.Rollout == nil {
			return ""
		}
		return p.Status.Rollout.StableRevision
	}
	return stable(old) != stable(now)
}
