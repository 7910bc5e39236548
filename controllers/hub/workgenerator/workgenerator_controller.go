// Package workgenerator renders the objects a Placement selects into one Work per
// selected cluster, in that cluster's namespace on the hub.
package workgenerator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/hub/lookup"
	"github.com/lodestar-dev/lodestar/controllers/hub/placementref"
	"github.com/lodestar-dev/lodestar/internal/feedback"
	"github.com/lodestar-dev/lodestar/internal/kube"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/render"
)

// Name is the work generator's field owner and event source.
const Name = "lodestar-workgenerator"

// workWriters is how many Works of one Placement are written at once.
const workWriters = 16

// Reconciler generates Works.
type Reconciler struct {
	Client   client.Client
	Cache    cache.Cache
	Mapper   meta.RESTMapper
	Recorder events.EventRecorder
	// Workers is how many Placements are reconciled at once.
	Workers int
	// DefaultClusterSets are the cluster sets of namespaces that name none
	// (placementv1alpha1.ClusterSetsAnnotation).
	DefaultClusterSets []string

	controller controller.Controller
	watched    sync.Map // schema.GroupVersionKind → struct{}
}

// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=placements,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=placements/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=placementdecisions,verbs=get;list;watch
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=works,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=*,resources=*,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings the Works of one Placement in line with its selected objects and
// its PlacementDecisions.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	placement := &placementv1alpha1.Placement{}
	if err := r.Client.Get(ctx, req.NamespacedName, placement); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	log := ctrl.LoggerFrom(ctx).WithValues("placement", klog.KObj(placement))
	ctx = ctrl.LoggerInto(ctx, log)

	st := &status{}
	defer func() {
		if err := r.applyStatus(ctx, placement, st); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()

	if !placement.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, placement, st)
	}
	if err := kube.SetFinalizer(ctx, r.Client, placement, placementv1alpha1.PlacementFinalizer, true); err != nil {
		return ctrl.Result{}, err
	}

	objs, err := r.selectObjects(ctx, placement)
	if err != nil {
		var invalid *invalidSelectorError
		if errors.As(err, &invalid) {
			st.set(metav1.ConditionFalse, placementv1alpha1.ReasonInvalidResourceSelector, "%s", invalid.Error())
			r.Recorder.Eventf(placement, nil, "Warning", placementv1alpha1.ReasonInvalidResourceSelector, "SelectResources", "%s", invalid.Error())
			return ctrl.Result{}, reconcile.TerminalError(err)
		}
		return ctrl.Result{}, err
	}
	annotations, err := applyAnnotations(placement)
	if err != nil {
		st.set(metav1.ConditionFalse, placementv1alpha1.ReasonInvalidStatusFeedback, "%v", err)
		r.Recorder.Eventf(placement, nil, "Warning", placementv1alpha1.ReasonInvalidStatusFeedback, "Render", "%v", err)
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	manifests, revision, err := render.Manifests(objs)
	if tooLarge := (*render.TooLargeError)(nil); errors.As(err, &tooLarge) {
		// Nothing is written: the Works keep what they carry.
		st.set(metav1.ConditionFalse, placementv1alpha1.ReasonWorkTooLarge, "%v", tooLarge)
		r.Recorder.Eventf(placement, nil, corev1.EventTypeWarning, placementv1alpha1.ReasonWorkTooLarge, "Render", "%v", tooLarge)
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	if err != nil {
		st.set(metav1.ConditionFalse, placementv1alpha1.ReasonRenderFailed, "rendering the selected objects: %v", err)
		return ctrl.Result{}, reconcile.TerminalError(err)
	}

	decided, err := placementref.DecidedIn(ctx, r.Client, placement, r.DefaultClusterSets)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(decided.Rejected) > 0 {
		log.Info("Ignoring PlacementDecisions that may not send Works", "rejected", decided.Rejected)
		r.Recorder.Eventf(placement, nil, corev1.EventTypeWarning, placementv1alpha1.ReasonDecisionRejected, "Decide",
			"ignored: %s", rejectedSummary(decided.Rejected))
	}
	clusters := decided.Clusters
	if !decided.Found {
		// Without decisions we know nothing new about where the objects belong:
		// existing Works stay as they are.
		st.set(metav1.ConditionFalse, placementv1alpha1.ReasonWaitingForDecisions, "no PlacementDecision names this Placement yet")
		return ctrl.Result{}, nil
	}

	// Works already up to date are skipped without a copy or a patch: after a
	// restart, or on each event of a large fan-out, most are.
	current, err := lookup.Works(ctx, r.Client, placement, client.UnsafeDisableDeepCopy)
	if err != nil {
		return ctrl.Result{}, err
	}
	upToDate := map[string]bool{}
	for i := range current {
		if workUpToDate(&current[i], placement, manifests, revision, annotations) {
			upToDate[current[i].Namespace] = true
		}
	}

	// Works are written concurrently: a Placement may fan out to thousands.
	var eg errgroup.Group
	eg.SetLimit(workWriters)
	for _, cluster := range clusters {
		if upToDate[names.ClusterNamespace(cluster)] {
			continue
		}
		eg.Go(func() error {
			if err := r.writeWork(ctx, placement, cluster, manifests, revision, annotations); err != nil {
				return fmt.Errorf("writing the Work for cluster %s: %w", cluster, err)
			}
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		st.set(metav1.ConditionFalse, placementv1alpha1.ReasonWorkFailed, "%v", err)
		return ctrl.Result{}, err
	}
	if !decided.Consistent {
		// The slices are being rewritten: a cluster missing now may be moving from
		// one slice to another. Works are removed once every slice agrees.
		st.set(metav1.ConditionFalse, placementv1alpha1.ReasonWaitingForDecisions,
			"the PlacementDecision slices are being updated; Works of clusters no longer chosen are removed when they agree")
		return ctrl.Result{}, nil
	}
	if err := r.deleteWorks(ctx, current, clusters); err != nil {
		return ctrl.Result{}, err
	}
	st.set(metav1.ConditionTrue, placementv1alpha1.ReasonWorkSynchronized,
		"%d objects at revision %s in the Works of %d clusters", len(objs), revision, len(clusters))
	return ctrl.Result{}, nil
}

// rejectedSummary joins the first few rejections for an event.
func rejectedSummary(rejected []string) string {
	const shown = 5
	if len(rejected) <= shown {
		return strings.Join(rejected, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(rejected[:shown], "; "), len(rejected)-shown)
}

// applyAnnotations returns the Work annotations that carry the Placement's apply
// strategy and status feedback rules to the agents. Feedback rules whose CEL or
// JSONPath do not compile are an error.
func applyAnnotations(placement *placementv1alpha1.Placement) (map[string]string, error) {
	out := map[string]string{}
	if s := placement.Spec.ApplyStrategy; s != nil {
		b, err := json.Marshal(s.Defaulted())
		if err != nil {
			return nil, err
		}
		out[lodestarworkv1alpha1.ApplyStrategyAnnotation] = string(b)
	}
	if rules := placement.Spec.StatusFeedback; len(rules) > 0 {
		if _, err := feedback.Compile(rules); err != nil {
			return nil, fmt.Errorf("spec.%w", err)
		}
		b, err := json.Marshal(rules)
		if err != nil {
			return nil, err
		}
		out[lodestarworkv1alpha1.StatusFeedbackAnnotation] = string(b)
	}
	return out, nil
}

// reconcileDelete deletes every Work of the Placement and releases the Placement
// once they are gone, which is when each member has removed what it applied.
func (r *Reconciler) reconcileDelete(ctx context.Context, placement *placementv1alpha1.Placement, st *status) error {
	remaining, err := lookup.Works(ctx, r.Client, placement, client.UnsafeDisableDeepCopy)
	if err != nil {
		return err
	}
	if err := r.deleteWorks(ctx, remaining, nil); err != nil {
		return err
	}
	if len(remaining) > 0 {
		st.set(metav1.ConditionFalse, placementv1alpha1.ReasonDeleting, "waiting for %d clusters to remove the placed objects", len(remaining))
		return nil // Work deletions trigger the next reconcile.
	}
	return kube.SetFinalizer(ctx, r.Client, placement, placementv1alpha1.PlacementFinalizer, false)
}

// invalidSelectorError is a resource selector that can never select anything.
type invalidSelectorError struct{ msg string }

func (e *invalidSelectorError) Error() string { return e.msg }

// selectObjects returns the objects of the Placement's namespace that its resource
// selectors select, each once.
func (r *Reconciler) selectObjects(ctx context.Context, placement *placementv1alpha1.Placement) ([]*unstructured.Unstructured, error) {
	seen := map[string]bool{}
	var out []*unstructured.Unstructured
	for i, sel := range placement.Spec.ResourceSelectors {
		gvk := schema.GroupVersionKind{Group: sel.Group, Version: sel.Version, Kind: sel.Kind}
		mapping, err := r.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			return nil, &invalidSelectorError{fmt.Sprintf("spec.resourceSelectors[%d]: the hub does not serve kind %s", i, gvk)}
		}
		if err != nil {
			return nil, fmt.Errorf("mapping %s: %w", gvk, err)
		}
		if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
			return nil, &invalidSelectorError{fmt.Sprintf("spec.resourceSelectors[%d]: %s is cluster-scoped; a Placement places only namespaced kinds", i, gvk)}
		}
		if why := render.HubOnlyKind(gvk.GroupKind()); why != "" {
			return nil, &invalidSelectorError{fmt.Sprintf("spec.resourceSelectors[%d]: %s are never placed: %s", i, gvk.Kind, why)}
		}
		if gvk.GroupKind() == (schema.GroupKind{Kind: "Secret"}) && sel.Name == "" {
			return nil, &invalidSelectorError{fmt.Sprintf("spec.resourceSelectors[%d]: Secrets are placed only when selected by name", i)}
		}
		selector := labels.Everything()
		if sel.LabelSelector != nil {
			if selector, err = metav1.LabelSelectorAsSelector(sel.LabelSelector); err != nil {
				return nil, &invalidSelectorError{fmt.Sprintf("spec.resourceSelectors[%d].labelSelector: %v", i, err)}
			}
		}
		if err := r.ensureWatch(gvk); err != nil {
			return nil, err
		}

		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := r.Client.List(ctx, list, client.InNamespace(placement.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
			return nil, fmt.Errorf("listing %s in %s: %w", gvk, placement.Namespace, err)
		}
		for j := range list.Items {
			obj := &list.Items[j]
			if sel.Name != "" && obj.GetName() != sel.Name {
				continue
			}
			if !obj.GetDeletionTimestamp().IsZero() {
				continue
			}
			obj.SetGroupVersionKind(gvk)
			if why := render.HubOwned(obj); why != "" {
				ctrl.LoggerFrom(ctx).V(1).Info("Not placing an object that belongs to the hub", "kind", gvk.Kind, "object", klog.KObj(obj), "why", why)
				continue
			}
			key := gvk.GroupKind().String() + "/" + obj.GetName()
			if seen[key] {
				continue
			}
			seen[key] = true
			obj.SetGroupVersionKind(gvk)
			out = append(out, obj)
		}
	}
	return out, nil
}

// writeWork creates or updates the Work that carries the manifests to cluster.
func (r *Reconciler) writeWork(ctx context.Context, placement *placementv1alpha1.Placement, cluster string, manifests []runtime.RawExtension, revision string, annotations map[string]string) error {
	work := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{
		Name:      names.Work(placement.Namespace, placement.Name),
		Namespace: names.ClusterNamespace(cluster),
	}}
	_, err := controllerutil.CreateOrPatch(ctx, r.Client, work, func() error {
		if work.Labels == nil {
			work.Labels = map[string]string{}
		}
		for k, v := range placementref.WorkLabels(placement) {
			work.Labels[k] = v
		}
		work.Labels[placementv1alpha1.ClusterLabel] = names.LabelValue(cluster)
		if work.Annotations == nil {
			work.Annotations = map[string]string{}
		}
		work.Annotations[placementv1alpha1.RevisionAnnotation] = revision
		for _, k := range []string{lodestarworkv1alpha1.ApplyStrategyAnnotation, lodestarworkv1alpha1.StatusFeedbackAnnotation} {
			if v, ok := annotations[k]; ok {
				work.Annotations[k] = v
			} else {
				delete(work.Annotations, k)
			}
		}
		controllerutil.AddFinalizer(work, lodestarworkv1alpha1.WorkFinalizer)
		work.Spec.Workload.Manifests = make([]workv1alpha1.Manifest, 0, len(manifests))
		for _, m := range manifests {
			work.Spec.Workload.Manifests = append(work.Spec.Workload.Manifests, workv1alpha1.Manifest{RawExtension: m})
		}
		return nil
	})
	return err
}

// workUpToDate tells whether w (a read-only cache object) already is what
// writeWork would make it: labels, annotations, finalizer and the same manifest
// bytes. When in doubt (the API server re-encoded a manifest, say) it says no, and
// writeWork compares properly.
func workUpToDate(w *workv1alpha1.Work, placement *placementv1alpha1.Placement, manifests []runtime.RawExtension, revision string, annotations map[string]string) bool {
	if !w.DeletionTimestamp.IsZero() || !controllerutil.ContainsFinalizer(w, lodestarworkv1alpha1.WorkFinalizer) ||
		w.Annotations[placementv1alpha1.RevisionAnnotation] != revision || len(w.Spec.Workload.Manifests) != len(manifests) {
		return false
	}
	for k, v := range placementref.WorkLabels(placement) {
		if w.Labels[k] != v {
			return false
		}
	}
	cluster, ok := names.ClusterFromNamespace(w.Namespace)
	if !ok || w.Labels[placementv1alpha1.ClusterLabel] != names.LabelValue(cluster) {
		return false
	}
	for _, k := range []string{lodestarworkv1alpha1.ApplyStrategyAnnotation, lodestarworkv1alpha1.StatusFeedbackAnnotation} {
		got, has := w.Annotations[k]
		want, wanted := annotations[k]
		if has != wanted || got != want {
			return false
		}
	}
	for i := range manifests {
		if !bytes.Equal(w.Spec.Workload.Manifests[i].Raw, manifests[i].Raw) {
			return false
		}
	}
	return true
}

// deleteWorks deletes those of the Placement's Works (a read-only view of the
// cache: each deletion gets an object of its own) on clusters other than keep.
func (r *Reconciler) deleteWorks(ctx context.Context, works []workv1alpha1.Work, keep []string) error {
	keepNS := map[string]bool{}
	for _, c := range keep {
		keepNS[names.ClusterNamespace(c)] = true
	}
	for i := range works {
		w := &works[i]
		if keepNS[w.Namespace] || !w.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.Client.Delete(ctx, &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: w.Namespace}}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting Work %s: %w", klog.KObj(w), err)
		}
		ctrl.LoggerFrom(ctx).Info("Deleted Work of a cluster the Placement no longer selects", "work", klog.KObj(w))
	}
	return nil
}

// SetupWithManager registers the work generator. Watches on the kinds that
// Placements select are added as Placements name them.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named("workgenerator").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		For(&placementv1alpha1.Placement{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&cpv1alpha1.PlacementDecision{}, handler.EnqueueRequestsFromMapFunc(placementref.FromLabels(mgr.GetClient(), cpv1alpha1.PlacementKeyLabel, ""))).
		// Status reports do not concern the generator; edits and deletions of its Works do.
		Watches(&workv1alpha1.Work{}, handler.EnqueueRequestsFromMapFunc(placementref.FromLabels(mgr.GetClient(), placementv1alpha1.PlacementNameLabel, placementv1alpha1.PlacementNamespaceLabel)),
			builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Build(r)
	r.controller = c
	return err
}

// ensureWatch starts watching gvk on the hub the first time a Placement selects it.
func (r *Reconciler) ensureWatch(gvk schema.GroupVersionKind) error {
	if _, loaded := r.watched.LoadOrStore(gvk, struct{}{}); loaded {
		return nil
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	err := r.controller.Watch(source.Kind[client.Object](r.Cache, obj, handler.EnqueueRequestsFromMapFunc(r.placementsSelecting(gvk))))
	if err != nil {
		r.watched.Delete(gvk)
		return fmt.Errorf("watching %s: %w", gvk, err)
	}
	return nil
}

// placementsSelecting maps a change of an object of kind gvk to the Placements of
// its namespace that select that kind.
func (r *Reconciler) placementsSelecting(gvk schema.GroupVersionKind) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		list := &placementv1alpha1.PlacementList{}
		if err := r.Client.List(ctx, list, client.InNamespace(obj.GetNamespace()), client.UnsafeDisableDeepCopy); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing Placements for an object change", "object", klog.KObj(obj))
			return nil
		}
		var reqs []reconcile.Request
		for _, p := range list.Items {
			for _, sel := range p.Spec.ResourceSelectors {
				if sel.Group == gvk.Group && sel.Kind == gvk.Kind {
					reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
					break
				}
			}
		}
		return reqs
	}
}
