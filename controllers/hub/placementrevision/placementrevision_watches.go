package placementrevision

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/handlers"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/metrics"
	"github.com/lodestar-dev/lodestar/internal/render"
	"github.com/lodestar-dev/lodestar/internal/selection"
)

// selectObjects returns the objects of the Placement's namespace that its resource
// selectors select, each once, from the cache (watching each kind it lists).
func (r *Reconciler) selectObjects(ctx context.Context, placement *placementv1alpha1.Placement) (selection.Selected, error) {
	src := selection.Source{Mapper: r.Mapper, List: func(ctx context.Context, gvk schema.GroupVersionKind, namespace string, selector labels.Selector) ([]unstructured.Unstructured, error) {
		if err := r.ensureWatch(gvk); err != nil {
			return nil, err
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		// The cache waits for the kind's informer to sync: bounded, so that a
		// kind that cannot be listed holds no worker (docs/tenancy.md).
		lctx, cancel := context.WithTimeout(ctx, selection.ReadTimeout)
		defer cancel()
		if err := r.Client.List(lctx, list, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
			if lctx.Err() != nil && ctx.Err() == nil {
				return nil, &selection.UnreadableKindError{Kind: gvk, Err: err}
			}
			return nil, err
		}
		return list.Items, nil
	}}
	if r.kinds != nil {
		src.Kinds, src.Serves = r.kinds.Get, r.kinds.Serves
	}
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: placement.Namespace}, ns); err != nil {
		return selection.Selected{}, fmt.Errorf("reading namespace %s: %w", placement.Namespace, err)
	}
	src.Forbidden = selection.ForbiddenKinds(ns)
	// A Secret, selected or followed, is placed only when the Placement's
	// last writer may get it.
	src.MayFollowSecret = lookup.WriterMayGetSecret(r.Client)
	if placement.Spec.Dependencies == placementv1alpha1.DependenciesFollow {
		set, err := lookup.Interpretations(ctx, r.Client, r.Interpretations)
		if err != nil {
			return selection.Selected{}, err
		}
		src.Interpretations = set
		if src.NewReference, err = r.newReferences(ctx, placement); err != nil {
			return selection.Selected{}, err
		}
	}
	return selection.SelectObjects(ctx, placement, src)
}

// placementsFollowing maps a change of a ResourceInterpretation to the
// Placements that follow dependencies: what its kind depends on may change.
func (r *Reconciler) placementsFollowing(ctx context.Context, _ client.Object) []reconcile.Request {
	list := &placementv1alpha1.PlacementList{}
	if err := r.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing Placements for an interpretation change")
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if list.Items[i].Spec.Dependencies == placementv1alpha1.DependenciesFollow {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

// placementsSelecting maps a change of an object of kind gvk to the Placements
// that may select it: those of its namespace that select that kind, by name or by
// labels alone, or follow dependencies (it may be one); for a cluster-scoped
// object, the ClusterPlacements' that name its kind; for a namespaced one, also
// the ClusterPlacements' that place whole namespaces.
func (r *Reconciler) placementsSelecting(gvk schema.GroupVersionKind) func(ctx context.Context, obj client.Object) []reconcile.Request {
	byLabels := render.SelectableByLabels(gvk.GroupKind())
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		// The revisions' own data Secrets are never selected: writing one
		// (every new revision of a Placement holding Secrets does) concerns
		// only the Placement that owns it (which writes it again if someone
		// changed it), however many select every Secret of the namespace.
		if u, ok := obj.(*unstructured.Unstructured); ok && selection.IsRevisionData(u) {
			return ownerPlacement(u)
		}
		var reqs []reconcile.Request
		add := func(namespace string, selects func(placementv1alpha1.ResourceSelector) bool) {
			list := &placementv1alpha1.PlacementList{}
			if err := r.Client.List(ctx, list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "Listing Placements for an object change", "object", klog.KObj(obj))
				return
			}
			for i := range list.Items {
				follows := namespace != placementv1alpha1.ClusterPlacementNamespace && list.Items[i].Spec.Dependencies == placementv1alpha1.DependenciesFollow
				if follows || slices.ContainsFunc(list.Items[i].Spec.ResourceSelectors, selects) {
					reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
				}
			}
		}
		sameKind := func(sel placementv1alpha1.ResourceSelector) bool {
			return sel.Group == gvk.Group && sel.Kind == gvk.Kind
		}
		ns := obj.GetNamespace()
		if ns == "" {
			add(placementv1alpha1.ClusterPlacementNamespace, sameKind)
			return reqs
		}
		add(ns, func(sel placementv1alpha1.ResourceSelector) bool {
			return sameKind(sel) || (sel.Kind == "" && byLabels)
		})
		if byLabels && !placementv1alpha1.IsReservedNamespace(ns) {
			add(placementv1alpha1.ClusterPlacementNamespace, func(sel placementv1alpha1.ResourceSelector) bool {
				return sel.Group == "" && sel.Kind == "Namespace"
			})
		}
		return reqs
	}
}

// ownerPlacement is the request of the Placement that owns obj, if any.
func ownerPlacement(obj client.Object) []reconcile.Request {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Kind == "Placement" && strings.HasPrefix(ref.APIVersion, placementv1alpha1.GroupVersion.Group+"/") {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: ref.Name}}}
		}
	}
	return nil
}

// placementsByLabels maps a CRD change to every Placement with a selector
// without kind, or naming a kind of the CRD's group, after forgetting the
// discovered kinds: a kind added later is picked up without a restart (its
// watch uses kube.RecheckingHandler, as discovery lags the CRD), and a kind
// removed is noticed by the Placements that name it.
func (r *Reconciler) placementsByLabels(ctx context.Context, crd client.Object) []reconcile.Request {
	if r.kinds != nil {
		r.kinds.Invalidate()
	}
	if !crd.GetDeletionTimestamp().IsZero() {
		// A CRD going (its cleanup finalizer holds it until its objects are
		// gone): its kind's watch, if any, stops once discovery drops the kind.
		r.Watches.Check()
	}
	list := &placementv1alpha1.PlacementList{}
	if err := r.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing Placements for a CRD change")
		return nil
	}
	_, group, _ := strings.Cut(crd.GetName(), ".")
	namesGroup := func(sel placementv1alpha1.ResourceSelector) bool { return sel.Kind != "" && sel.Group == group }
	var reqs []reconcile.Request
	for i := range list.Items {
		if selection.SelectsByLabels(&list.Items[i]) || slices.ContainsFunc(list.Items[i].Spec.ResourceSelectors, namesGroup) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

// ensureWatch starts watching gvk on the hub the first time a Placement selects it.
func (r *Reconciler) ensureWatch(gvk schema.GroupVersionKind) error {
	if !r.Watches.Add(gvk) {
		return nil
	}
	err := r.controller.Watch(source.Kind[client.Object](r.Cache, UnstructuredObject(gvk), handlers.Fair(r.placementsSelecting(gvk), r.budget())))
	if err != nil {
		r.Watches.Forget(gvk)
		return fmt.Errorf("watching %s: %w", gvk, err)
	}
	metrics.WatchedKinds.WithLabelValues(gvk.Group, gvk.Kind).Inc()
	return nil
}

// UnstructuredObject is the object the hub's watches of a selected kind are made for.
func UnstructuredObject(gvk schema.GroupVersionKind) client.Object {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	return obj
}

// newReferences is the selection's NewReference for a Placement that follows
// dependencies: a Secret the current revision does not place is followed only
// when the Placement's spec was written since the newest generation that
// rendered to that revision (its last writer, who may read the Secret, wrote
// it after the reference was there); a reference someone else adds
// afterwards waits for the next write of the spec. Revisions made before they
// recorded the generation follow as before.
func (r *Reconciler) newReferences(ctx context.Context, placement *placementv1alpha1.Placement) (func(namespace, name string) string, error) {
	if placement.Status.Revision == "" {
		return nil, nil
	}
	current := &placementv1alpha1.PlacementRevision{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: placement.Namespace, Name: placement.Status.Revision}, current); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	// A revision made before revisions recorded it has no generation.
	rendered, known := renderedGeneration(current)
	if !known || placement.Generation > rendered {
		return nil, nil
	}
	manifests, err := render.RevisionManifests(&current.Spec)
	if err != nil {
		return nil, err
	}
	placed := map[string]bool{}
	for _, m := range manifests {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(m.Raw); err == nil && u.GetAPIVersion() == "v1" && u.GetKind() == "Secret" {
			placed[u.GetNamespace()+"/"+u.GetName()] = true
		}
	}
	writer := placement.Annotations[placementv1alpha1.LastWriterAnnotation]
	return func(namespace, name string) string {
		if placed[namespace+"/"+name] {
			return ""
		}
		return fmt.Sprintf("referenced after %s last changed the Placement's spec (generation %d): "+
			"followed once someone who may read it changes the spec again", cmp.Or(writer, "its last writer"), placement.Generation)
	}, nil
}

// renderedGeneration is the newest Placement generation that rendered to rev,
// if it says.
func renderedGeneration(rev *placementv1alpha1.PlacementRevision) (int64, bool) {
	n, err := strconv.ParseInt(rev.Annotations[placementv1alpha1.RevisionGenerationAnnotation], 10, 64)
	return n, err == nil
}

// Object changes of one namespace wake at most changeBurst of its Placements
// at once and changeRate a second at once; past that they wait
// changeDeferral, behind the other namespaces' (handlers.NamespaceBudget).
const (
	changeRate     = 10
	changeBurst    = 20
	changeDeferral = time.Second
)

// budget is the revision maker's NamespaceBudget, made once.
func (r *Reconciler) budget() *handlers.NamespaceBudget {
	r.budgetOnce.Do(func() {
		r.changeBudget = &handlers.NamespaceBudget{Rate: changeRate, Burst: changeBurst, Over: changeDeferral}
	})
	return r.changeBudget
}
