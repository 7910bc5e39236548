package workgenerator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/kube"
	"github.com/lodestar-dev/lodestar/internal/render"
)

// InvalidSelectorError is a resource selector that can never select anything.
type InvalidSelectorError struct{ msg string }

func (e *InvalidSelectorError) Error() string { return e.msg }

// Lister lists the objects of a kind in a namespace whose labels match.
type Lister func(ctx context.Context, gvk schema.GroupVersionKind, namespace string, selector labels.Selector) ([]unstructured.Unstructured, error)

// Source is where the selection reads from.
type Source struct {
	// Mapper maps the kinds selectors name.
	Mapper meta.RESTMapper
	// List lists the objects of a kind.
	List Lister
	// Kinds returns the namespaced kinds the hub serves, for selectors without
	// kind; nil when the caller cannot discover them.
	Kinds func(ctx context.Context) ([]schema.GroupVersionKind, error)
	// Forbidden are the kinds the namespace's platform admin forbids
	// (ForbiddenKinds); nil forbids none.
	Forbidden func(schema.GroupKind) bool
}

// ForbiddenKinds reads a namespace's placementv1alpha1.ForbiddenKindsAnnotation:
// it tells whether a kind is forbidden there.
func ForbiddenKinds(ns *corev1.Namespace) func(schema.GroupKind) bool {
	var rules []schema.GroupKind
	for _, s := range strings.Split(ns.Annotations[placementv1alpha1.ForbiddenKindsAnnotation], ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		group, kind, found := strings.Cut(s, "/")
		if !found {
			group, kind = "", s
		}
		rules = append(rules, schema.GroupKind{Group: group, Kind: kind})
	}
	return func(gk schema.GroupKind) bool {
		return slices.ContainsFunc(rules, func(r schema.GroupKind) bool {
			return r.Group == gk.Group && (r.Kind == "*" || r.Kind == gk.Kind)
		})
	}
}

// SelectObjects returns the objects that the Placement's resource selectors select
// in its namespace, each once: the work generator's selection, also used by
// `kubectl lodestar render`. A selector that can never select anything is an
// *InvalidSelectorError.
func SelectObjects(ctx context.Context, placement *placementv1alpha1.Placement, src Source) ([]*unstructured.Unstructured, error) {
	s := &selection{seen: map[string]bool{}}
	if _, ok := placement.Annotations[placementv1alpha1.ClusterPlacementAnnotation]; ok && placement.Namespace == placementv1alpha1.ClusterPlacementNamespace {
		if err := s.clusterScoped(ctx, placement, src); err != nil {
			return nil, err
		}
		return s.out, nil
	}
	if err := s.namespaced(ctx, placement, src); err != nil {
		return nil, err
	}
	return s.out, nil
}

// selection gathers selected objects, each once.
type selection struct {
	seen map[string]bool
	out  []*unstructured.Unstructured
}

// add takes the items of kind gvk (only the one called name, when set) that are
// not going and do not belong to the hub.
func (s *selection) add(ctx context.Context, gvk schema.GroupVersionKind, items []unstructured.Unstructured, name string) {
	for j := range items {
		obj := &items[j]
		if name != "" && obj.GetName() != name {
			continue
		}
		if !obj.GetDeletionTimestamp().IsZero() {
			continue
		}
		obj.SetGroupVersionKind(gvk)
		if why := render.HubOwned(obj); why != "" {
			ctrl.LoggerFrom(ctx).V(4).Info("Not placing an object that belongs to the hub", "kind", gvk.Kind, "object", klog.KObj(obj), "why", why)
			continue
		}
		key := gvk.GroupKind().String() + "/" + obj.GetNamespace() + "/" + obj.GetName()
		if s.seen[key] {
			continue
		}
		s.seen[key] = true
		s.out = append(s.out, obj)
	}
}

// namespaced is the selection of a Placement: objects of its own namespace.
func (s *selection) namespaced(ctx context.Context, placement *placementv1alpha1.Placement, src Source) error {
	for i, sel := range placement.Spec.ResourceSelectors {
		selector, err := labelSelector(sel, i)
		if err != nil {
			return err
		}
		if sel.Kind == "" {
			if err := s.everyKind(ctx, src, placement.Namespace, selector); err != nil {
				return err
			}
			continue
		}
		gvk := schema.GroupVersionKind{Group: sel.Group, Version: sel.Version, Kind: sel.Kind}
		if err := checkKind(src.Mapper, gvk, i); err != nil {
			return err
		}
		if src.Forbidden != nil && src.Forbidden(gvk.GroupKind()) {
			return &InvalidSelectorError{fmt.Sprintf("spec.resourceSelectors[%d]: the namespace's platform admin forbids placing %s (annotation %s)",
				i, gvk.GroupKind(), placementv1alpha1.ForbiddenKindsAnnotation)}
		}
		items, err := src.List(ctx, gvk, placement.Namespace, selector)
		if err != nil {
			return fmt.Errorf("listing %s in %s: %w", gvk, placement.Namespace, err)
		}
		s.add(ctx, gvk, items, sel.Name)
	}
	return nil
}

// everyKind adds the objects of namespace whose labels match, of every kind a
// selector without kind may select there.
func (s *selection) everyKind(ctx context.Context, src Source, namespace string, selector labels.Selector) error {
	kinds, err := selectableKinds(ctx, src)
	if err != nil {
		return err
	}
	for _, gvk := range kinds {
		if src.Forbidden != nil && src.Forbidden(gvk.GroupKind()) {
			continue
		}
		items, err := src.List(ctx, gvk, namespace, selector)
		if err != nil {
			return fmt.Errorf("listing %s in %s: %w", gvk, namespace, err)
		}
		s.add(ctx, gvk, items, "")
	}
	return nil
}

// clusterScoped is the selection of a ClusterPlacement (carried out by
// placement): cluster-scoped objects, and whole namespaces, a selected Namespace
// with every namespaced object in it that a selector without kind may select.
// The namespaces of Kubernetes and of Lodestar are never placed whole.
func (s *selection) clusterScoped(ctx context.Context, placement *placementv1alpha1.Placement, src Source) error {
	for i, sel := range placement.Spec.ResourceSelectors {
		selector, err := labelSelector(sel, i)
		if err != nil {
			return err
		}
		if sel.Kind == "" {
			return &InvalidSelectorError{fmt.Sprintf("spec.resourceSelectors[%d]: a ClusterPlacement's selectors name a kind", i)}
		}
		gvk := schema.GroupVersionKind{Group: sel.Group, Version: sel.Version, Kind: sel.Kind}
		namespaced, err := served(src.Mapper, gvk, i)
		if err != nil {
			return err
		}
		if namespaced {
			return &InvalidSelectorError{fmt.Sprintf("spec.resourceSelectors[%d]: %s is namespaced; a ClusterPlacement places cluster-scoped kinds and whole namespaces (kind Namespace)", i, gvk)}
		}
		items, err := src.List(ctx, gvk, "", selector)
		if err != nil {
			return fmt.Errorf("listing %s: %w", gvk, err)
		}
		if gvk.GroupKind() != (schema.GroupKind{Kind: "Namespace"}) {
			s.add(ctx, gvk, items, sel.Name)
			continue
		}
		for j := range items {
			ns := items[j].GetName()
			if (sel.Name != "" && ns != sel.Name) || systemNamespace(ns) {
				continue
			}
			s.add(ctx, gvk, items[j:j+1], "")
			if err := s.everyKind(ctx, src, ns, labels.Everything()); err != nil {
				return err
			}
		}
	}
	return nil
}

// systemNamespace tells whether ns is Kubernetes' or Lodestar's own.
func systemNamespace(ns string) bool {
	return strings.HasPrefix(ns, "kube-") || strings.HasPrefix(ns, "lodestar-")
}

// labelSelector parses selector i's label selector (everything without one).
func labelSelector(sel placementv1alpha1.ResourceSelector, i int) (labels.Selector, error) {
	if sel.LabelSelector == nil {
		return labels.Everything(), nil
	}
	selector, err := metav1.LabelSelectorAsSelector(sel.LabelSelector)
	if err != nil {
		return nil, &InvalidSelectorError{fmt.Sprintf("spec.resourceSelectors[%d].labelSelector: %v", i, err)}
	}
	return selector, nil
}

// checkKind says, as an *InvalidSelectorError, why selector i's kind can never be
// placed by a Placement: the hub does not serve it, it is cluster-scoped, or it
// belongs to the hub.
func checkKind(mapper meta.RESTMapper, gvk schema.GroupVersionKind, i int) error {
	namespaced, err := served(mapper, gvk, i)
	if err != nil {
		return err
	}
	if !namespaced {
		return &InvalidSelectorError{fmt.Sprintf("spec.resourceSelectors[%d]: %s is cluster-scoped; a Placement places only namespaced kinds", i, gvk)}
	}
	if why := render.HubOnlyKind(gvk.GroupKind()); why != "" {
		return &InvalidSelectorError{fmt.Sprintf("spec.resourceSelectors[%d]: %s are never placed: %s", i, gvk.Kind, why)}
	}
	return nil
}

// served tells whether selector i's kind is namespaced; a kind the hub does not
// serve is an *InvalidSelectorError.
func served(mapper meta.RESTMapper, gvk schema.GroupVersionKind, i int) (namespaced bool, err error) {
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return false, &InvalidSelectorError{fmt.Sprintf("spec.resourceSelectors[%d]: the hub does not serve kind %s", i, gvk)}
	}
	if err != nil {
		return false, fmt.Errorf("mapping %s: %w", gvk, err)
	}
	return mapping.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

// selectableKinds are the kinds a selector without kind looks through.
func selectableKinds(ctx context.Context, src Source) ([]schema.GroupVersionKind, error) {
	if src.Kinds == nil {
		return nil, errors.New("a resource selector without kind needs the hub's discovery")
	}
	all, err := src.Kinds(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]schema.GroupVersionKind, 0, len(all))
	for _, gvk := range all {
		if render.SelectableByLabels(gvk.GroupKind()) {
			out = append(out, gvk)
		}
	}
	return out, nil
}

// selectsByLabels tells whether a Placement has a selector without kind.
func selectsByLabels(p *placementv1alpha1.Placement) bool {
	for _, sel := range p.Spec.ResourceSelectors {
		if sel.Kind == "" {
			return true
		}
	}
	return false
}

// kindsMaxAge is how long the discovered kinds are used before they are
// discovered again; a CRD change discovers them again at once. The API server
// lists a new CRD's kind in discovery a moment after the CRD is established
// (longer when it is busy), so for kindsSettle after a CRD change the kinds are
// discovered anew each time, and the Placements concerned are looked at again
// after kindsRecheck and kindsSettle.
const (
	kindsMaxAge  = time.Minute
	kindsRecheck = 2 * time.Second
	kindsSettle  = 10 * time.Second
)

// servedKinds caches the hub's namespaced kinds for selectors without kind.
type servedKinds struct {
	discovery discovery.DiscoveryInterface
	mu        sync.Mutex
	kinds     []schema.GroupVersionKind
	// at is when kinds were discovered, changed when a CRD last changed.
	at, changed time.Time
}

// get returns the kinds, discovered again when they are older than kindsMaxAge,
// were invalidated, or were discovered within kindsSettle of a CRD change. A
// group that cannot be discovered is logged and left out.
func (s *servedKinds) get(ctx context.Context) ([]schema.GroupVersionKind, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kinds != nil && time.Since(s.at) < kindsMaxAge && s.at.Sub(s.changed) >= kindsSettle {
		return s.kinds, nil
	}
	kinds, err := kube.NamespacedKinds(s.discovery)
	if kinds == nil && err != nil {
		return nil, err
	}
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Some API groups could not be discovered; selectors without kind skip them")
	}
	s.kinds, s.at = kinds, time.Now()
	return kinds, nil
}

// invalidate makes the next get discover again.
func (s *servedKinds) invalidate() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kinds, s.changed = nil, time.Now()
}

// selectObjects returns the objects of the Placement's namespace that its resource
// selectors select, each once, from the cache (watching each kind it lists).
func (r *Reconciler) selectObjects(ctx context.Context, placement *placementv1alpha1.Placement) ([]*unstructured.Unstructured, error) {
	src := Source{Mapper: r.Mapper, List: func(ctx context.Context, gvk schema.GroupVersionKind, namespace string, selector labels.Selector) ([]unstructured.Unstructured, error) {
		if err := r.ensureWatch(gvk); err != nil {
			return nil, err
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := r.Client.List(ctx, list, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
			return nil, err
		}
		return list.Items, nil
	}}
	if r.kinds != nil {
		src.Kinds = r.kinds.get
	}
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: placement.Namespace}, ns); err != nil {
		return nil, fmt.Errorf("reading namespace %s: %w", placement.Namespace, err)
	}
	src.Forbidden = ForbiddenKinds(ns)
	return SelectObjects(ctx, placement, src)
}

// placementsSelecting maps a change of an object of kind gvk to the Placements
// that may select it: those of its namespace that select that kind, by name or by
// labels alone; for a cluster-scoped object, the ClusterPlacements' that name its
// kind; for a namespaced one, also the ClusterPlacements' that place whole
// namespaces.
func (r *Reconciler) placementsSelecting(gvk schema.GroupVersionKind) func(ctx context.Context, obj client.Object) []reconcile.Request {
	byLabels := render.SelectableByLabels(gvk.GroupKind())
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		var reqs []reconcile.Request
		add := func(namespace string, selects func(placementv1alpha1.ResourceSelector) bool) {
			list := &placementv1alpha1.PlacementList{}
			if err := r.Client.List(ctx, list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "Listing Placements for an object change", "object", klog.KObj(obj))
				return
			}
			for i := range list.Items {
				if slices.ContainsFunc(list.Items[i].Spec.ResourceSelectors, selects) {
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
		if byLabels && !systemNamespace(ns) {
			add(placementv1alpha1.ClusterPlacementNamespace, func(sel placementv1alpha1.ResourceSelector) bool {
				return sel.Group == "" && sel.Kind == "Namespace"
			})
		}
		return reqs
	}
}

// placementsByLabels maps a CRD change to every Placement with a selector
// without kind, after forgetting the discovered kinds: a kind added later is
// picked up without a restart (its watch uses kube.RecheckingHandler, as
// discovery lags the CRD).
func (r *Reconciler) placementsByLabels(ctx context.Context, crd client.Object) []reconcile.Request {
	if r.kinds != nil {
		r.kinds.invalidate()
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
	var reqs []reconcile.Request
	for i := range list.Items {
		if selectsByLabels(&list.Items[i]) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}
