// Package selection is which objects of the hub a Placement selects: its resource
// selectors read against a source of objects (the hub manager's cache, or the
// hub and local files for `kubectl lodestar render`), each object once, without
// what belongs to the hub and without the kinds its namespace's platform admin
// forbids.
package selection

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/dependencies"
	"github.com/lodestar-dev/lodestar/internal/interpretation"
	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/render"
)

// InvalidSelectorError is a resource selector that can never select anything.
type InvalidSelectorError struct{ msg string }

func (e *InvalidSelectorError) Error() string { return e.msg }

// UnreadableKindError is a kind whose objects the hub could not list in time
// (ReadTimeout): the selection cannot tell what it selects, so nothing is
// made of it (and nothing of the revision it has is taken away).
type UnreadableKindError struct {
	Kind schema.GroupVersionKind
	Err  error
}

func (e *UnreadableKindError) Error() string {
	return fmt.Sprintf("the hub could not list kind %s within %s: %v", e.Kind, ReadTimeout, e.Err)
}

func (e *UnreadableKindError) Unwrap() error { return e.Err }

// ReadTimeout bounds each list of a selected kind: a kind whose informer
// cannot sync (its CRD deleted mid-way, a lagging aggregated API) holds a
// revision maker's worker no longer than that.
const ReadTimeout = 20 * time.Second

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
	// Serves tells whether the hub serves a kind now, by discovery; an error
	// when it cannot tell. nil when the caller cannot discover them.
	Serves func(ctx context.Context, gk schema.GroupKind) (bool, error)
	// Forbidden are the kinds the namespace's platform admin forbids
	// (ForbiddenKinds); nil forbids none.
	Forbidden func(schema.GroupKind) bool
	// Interpretations say what custom kinds depend on, for a Placement that
	// follows dependencies; nil interprets none.
	Interpretations *interpretation.Set
	// MayFollowSecret says why the Placement may not place the Secret called
	// name in namespace, which a selected object references, or "" when it
	// may. nil lets it follow every Secret it finds (render as a user: the
	// user's own reads are the check).
	MayFollowSecret func(ctx context.Context, placement *placementv1alpha1.Placement, namespace, name string) (string, error)
	// NewReference says why a Secret a workload references, which the
	// current revision does not place, is not followed now ("" when it is):
	// the reference came after the Placement's last writer wrote it. nil
	// follows every reference MayFollowSecret allows.
	NewReference func(namespace, name string) string
}

// ForbiddenKinds reads a namespace's placementv1alpha1.ForbiddenKindsAnnotation:
// it tells whether a kind is forbidden there.
func ForbiddenKinds(ns *corev1.Namespace) func(schema.GroupKind) bool {
	return forbiddenKinds(ns.Annotations[placementv1alpha1.ForbiddenKindsAnnotation])
}

// forbiddenKinds reads the value of a ForbiddenKindsAnnotation.
func forbiddenKinds(annotation string) func(schema.GroupKind) bool {
	var rules []schema.GroupKind
	for _, s := range strings.Split(annotation, ",") {
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

// Selected is what a Placement's resource selectors select.
type Selected struct {
	// Objects are the selected objects, each once.
	Objects []*unstructured.Unstructured
	// Followed are the references followed (spec.dependencies: Follow), as
	// Kind/name; their objects are in Objects.
	Followed []string
	// NotFollowed say which references are not followed and why.
	NotFollowed []string
	// Refused are the selectors that select nothing because they cannot: one
	// *InvalidSelectorError each, in selector order. The other selectors'
	// objects are in Objects all the same, so a selector that stops being
	// allowed (its kind forbidden in the namespace, or no longer served by the
	// hub) takes only its own objects away.
	Refused []error
}

// Strict is the selection as one error: nil when no selector is refused.
func (s Selected) Strict() error { return errors.Join(s.Refused...) }

// SelectObjects returns what the Placement's resource selectors select in its
// namespace: the revision maker's selection, also used by `kubectl lodestar
// render`. An error is one the selection cannot go on from (a list failing).
func SelectObjects(ctx context.Context, placement *placementv1alpha1.Placement, src Source) (Selected, error) {
	s := &selection{seen: map[string]bool{}}
	var err error
	if _, ok := placement.Annotations[placementv1alpha1.ClusterPlacementAnnotation]; ok && placement.Namespace == placementv1alpha1.ClusterPlacementNamespace {
		err = s.clusterScoped(ctx, placement, src)
	} else if err = s.namespaced(ctx, placement, src); err == nil {
		err = s.dropUnreadableSecrets(ctx, placement, src)
	}
	if err != nil {
		return Selected{}, err
	}
	if err := s.dropStatefulSetClaims(ctx, src); err != nil {
		return Selected{}, err
	}
	if placement.Spec.Dependencies == placementv1alpha1.DependenciesFollow {
		if err := s.follow(ctx, placement, src); err != nil {
			return Selected{}, err
		}
	}
	s.dropRevisionData()
	return Selected{Objects: s.out, Followed: s.followed, NotFollowed: s.notFollowed, Refused: s.refused}, nil
}

// dropUnreadableSecrets leaves out the selected Secrets that the Placement's
// last writer may not get on the hub (src.MayFollowSecret), each refused with
// the reason: a tenant who may not read a Secret does not place it by naming
// it, any more than by following it.
func (s *selection) dropUnreadableSecrets(ctx context.Context, placement *placementv1alpha1.Placement, src Source) error {
	if src.MayFollowSecret == nil {
		return nil
	}
	kept := s.out[:0]
	for _, obj := range s.out {
		if obj.GroupVersionKind().GroupKind() != dependencies.Secret {
			kept = append(kept, obj)
			continue
		}
		why, err := src.MayFollowSecret(ctx, placement, obj.GetNamespace(), obj.GetName())
		if err != nil {
			return err
		}
		if why != "" {
			s.refused = append(s.refused, &InvalidSelectorError{msg: fmt.Sprintf("Secret %s is not placed: %s", obj.GetName(), why)})
			continue
		}
		kept = append(kept, obj)
	}
	s.out = kept
	return nil
}

// dropRevisionData leaves out the revisions' data Secrets (Lodestar's own,
// the values of the Secrets revisions hold): a selector of every Secret of
// the namespace, or a reference to one, places none of them.
func (s *selection) dropRevisionData() {
	s.out = slices.DeleteFunc(s.out, IsRevisionData)
}

// IsRevisionData tells whether obj is a revision's data Secret: never placed,
// and no reason to look at a Placement again when it changes.
func IsRevisionData(obj *unstructured.Unstructured) bool {
	t, _, _ := unstructured.NestedString(obj.Object, "type")
	return obj.GroupVersionKind().GroupKind() == dependencies.Secret && t == placementv1alpha1.RevisionDataSecretType
}

// statefulSets is the kind whose claims are never placed.
var statefulSets = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}

// dropStatefulSetClaims leaves out the selected claims that a StatefulSet of
// their namespace generates from its volumeClaimTemplates
// (render.StatefulSetClaim): on a hub that runs controllers they are the hub's,
// with the StatefulSet's labels and no owner.
func (s *selection) dropStatefulSetClaims(ctx context.Context, src Source) error {
	sets := map[string][]unstructured.Unstructured{}
	kept := s.out[:0]
	for _, obj := range s.out {
		if obj.GroupVersionKind().GroupKind() != (schema.GroupKind{Kind: "PersistentVolumeClaim"}) {
			kept = append(kept, obj)
			continue
		}
		ns := obj.GetNamespace()
		if _, ok := sets[ns]; !ok {
			items, err := src.List(ctx, statefulSets, ns, labels.Everything())
			if err != nil {
				return fmt.Errorf("listing StatefulSets in %s: %w", ns, err)
			}
			sets[ns] = items
		}
		if sts := render.StatefulSetClaim(obj.GetName(), sets[ns]); sts != "" {
			ctrl.LoggerFrom(ctx).V(4).Info("Not placing a claim of a StatefulSet", "claim", klog.KObj(obj), "statefulSet", sts)
			continue
		}
		kept = append(kept, obj)
	}
	s.out = kept
	return nil
}

// selection gathers selected objects, each once, and the refused selectors.
type selection struct {
	seen        map[string]bool
	out         []*unstructured.Unstructured
	refused     []error
	followed    []string
	notFollowed []string
}

// refuse takes err as selector's refusal when it is an *InvalidSelectorError
// and returns nil; other errors are returned.
func (s *selection) refuse(err error) error {
	if invalid := (*InvalidSelectorError)(nil); errors.As(err, &invalid) {
		s.refused = append(s.refused, invalid)
		return nil
	}
	return err
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
		if err := s.refuse(s.namespacedSelector(ctx, placement.Namespace, sel, i, src)); err != nil {
			return err
		}
	}
	return nil
}

// namespacedSelector adds what selector i of a Placement in namespace selects.
func (s *selection) namespacedSelector(ctx context.Context, namespace string, sel placementv1alpha1.ResourceSelector, i int, src Source) error {
	selector, err := labelSelector(sel, i)
	if err != nil {
		return err
	}
	if sel.Kind == "" {
		return s.everyKind(ctx, src, namespace, selector, src.Forbidden)
	}
	gvk := schema.GroupVersionKind{Group: sel.Group, Version: sel.Version, Kind: sel.Kind}
	if err := checkKind(src.Mapper, gvk, i); err != nil {
		return withSuggestion(ctx, err, src, gvk)
	}
	if err := stillServed(ctx, src, gvk, i); err != nil {
		return withSuggestion(ctx, err, src, gvk)
	}
	if src.Forbidden != nil && src.Forbidden(gvk.GroupKind()) {
		return &InvalidSelectorError{fmt.Sprintf("spec.resourceSelectors[%d]: the namespace's platform admin forbids placing %s (annotation %s)",
			i, gvk.GroupKind(), placementv1alpha1.ForbiddenKindsAnnotation)}
	}
	items, err := src.List(ctx, gvk, namespace, selector)
	if err != nil {
		return fmt.Errorf("listing %s in %s: %w", gvk, namespace, err)
	}
	s.add(ctx, gvk, items, sel.Name)
	return nil
}

// everyKind adds the objects of namespace whose labels match, of every kind a
// selector without kind may select there.
func (s *selection) everyKind(ctx context.Context, src Source, namespace string, selector labels.Selector, forbidden func(schema.GroupKind) bool) error {
	kinds, err := selectableKinds(ctx, src)
	if err != nil {
		return err
	}
	for _, gvk := range kinds {
		if forbidden != nil && forbidden(gvk.GroupKind()) {
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
// with every namespaced object in it that a selector without kind may select,
// except the kinds that namespace forbids (its own annotation, not the
// ClusterPlacement namespace's). The namespaces of Kubernetes and of Lodestar,
// and default, are never placed whole.
func (s *selection) clusterScoped(ctx context.Context, placement *placementv1alpha1.Placement, src Source) error {
	for i, sel := range placement.Spec.ResourceSelectors {
		if err := s.refuse(s.clusterScopedSelector(ctx, sel, i, src)); err != nil {
			return err
		}
	}
	return nil
}

// clusterScopedSelector adds what selector i of a ClusterPlacement selects.
func (s *selection) clusterScopedSelector(ctx context.Context, sel placementv1alpha1.ResourceSelector, i int, src Source) error {
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
		return nil
	}
	for j := range items {
		ns := items[j].GetName()
		if (sel.Name != "" && ns != sel.Name) || placementv1alpha1.IsReservedNamespace(ns) {
			continue
		}
		s.add(ctx, gvk, items[j:j+1], "")
		forbidden := forbiddenKinds(items[j].GetAnnotations()[placementv1alpha1.ForbiddenKindsAnnotation])
		if err := s.everyKind(ctx, src, ns, labels.Everything(), forbidden); err != nil {
			return err
		}
	}
	return nil
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
	if mapping.GroupVersionKind.Kind != gvk.Kind {
		// Kinds are case-sensitive; a mapper may still match another case.
		return false, &InvalidSelectorError{fmt.Sprintf("spec.resourceSelectors[%d]: the hub does not serve kind %s (kinds are case-sensitive)", i, gvk)}
	}
	return mapping.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

// stillServed checks selector i's kind against what the hub's discovery lists
// now, when the caller discovers it: a kind whose CRD was deleted is still
// mapped by a mapper that learnt it before (and its informer would wait for a
// list that never succeeds), so that the selector would select nothing
// without saying why. A group that discovery cannot read says nothing.
func stillServed(ctx context.Context, src Source, gvk schema.GroupVersionKind, i int) error {
	if src.Serves == nil {
		return nil
	}
	if served, err := src.Serves(ctx, gvk.GroupKind()); err != nil || served {
		return nil //nolint:nilerr // discovery failing is not the selector's fault: the mapping stands
	}
	return &InvalidSelectorError{fmt.Sprintf("spec.resourceSelectors[%d]: the hub does not serve kind %s now (kinds are case-sensitive; a kind that was served has had its CustomResourceDefinition deleted)", i, gvk)}
}

// withSuggestion adds to a selector's "does not serve" error the served kind
// its kind was most likely meant to be (a kind the hub serves in another group
// or version, or one a typo or two away), when the hub's kinds are known.
func withSuggestion(ctx context.Context, err error, src Source, gvk schema.GroupVersionKind) error {
	invalid := (*InvalidSelectorError)(nil)
	if !errors.As(err, &invalid) || !strings.Contains(invalid.msg, "does not serve") || src.Kinds == nil {
		return err
	}
	kinds, kerr := src.Kinds(ctx)
	if kerr != nil {
		return err
	}
	if s := Suggest(kinds, gvk); s != "" {
		return &InvalidSelectorError{invalid.msg + "; did you mean " + s + "?"}
	}
	return err
}

// Suggest names the kind among kinds that want most likely meant, as
// "group/version Kind" (version Kind for the core group); "" when none is close:
// one edit away (a swap of two letters counts one), two for kinds of eight
// letters or more.
func Suggest(kinds []schema.GroupVersionKind, want schema.GroupVersionKind) string {
	best, bestDistance := schema.GroupVersionKind{}, 2
	if len(want.Kind) >= 8 {
		bestDistance = 3
	}
	for _, k := range kinds {
		d := message.Distance(strings.ToLower(k.Kind), strings.ToLower(want.Kind))
		if d == 0 && k.Group == want.Group && k.Version == want.Version && k.Kind == want.Kind {
			continue
		}
		if d < bestDistance || (d == bestDistance && best.Kind != "" && k.Group == want.Group && best.Group != want.Group) {
			best, bestDistance = k, d
		}
	}
	if best.Kind == "" {
		return ""
	}
	if best.Group == "" {
		return best.Version + " " + best.Kind
	}
	return best.Group + "/" + best.Version + " " + best.Kind
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

// SelectsByLabels tells whether a Placement has a selector without kind.
func SelectsByLabels(p *placementv1alpha1.Placement) bool {
	for _, sel := range p.Spec.ResourceSelectors {
		if sel.Kind == "" {
			return true
		}
	}
	return false
}
