package selection

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/dependencies"
	"github.com/lodestar-dev/lodestar/internal/render"
)

// MaxFollowed bounds how many objects one Placement follows: past it, the
// others are named as not followed (a namespace of ten thousand ConfigMaps a
// tenant's workloads all reference holds no worker long).
const MaxFollowed = 1000

// follower follows the references of the selected objects (Follow).
type follower struct {
	placement *placementv1alpha1.Placement
	src       Source
	// lists are the objects of a kind in a namespace, listed once.
	lists map[string]map[string]*unstructured.Unstructured
	// considered are the references already looked at.
	considered map[string]bool
}

// follow adds to the selection, as if selected, what the selected objects
// reference in their namespace, and what those reference in turn; it records
// each reference that is not followed and why.
func (s *selection) follow(ctx context.Context, placement *placementv1alpha1.Placement, src Source) error {
	f := &follower{placement: placement, src: src, lists: map[string]map[string]*unstructured.Unstructured{}, considered: map[string]bool{}}
	for i := 0; i < len(s.out); i++ {
		obj := s.out[i]
		if obj.GetNamespace() == "" {
			continue
		}
		var kinds dependencies.Kinds
		if src.Interpretations != nil {
			kinds = src.Interpretations
		}
		refs, err := dependencies.Of(obj, kinds)
		if err != nil {
			s.notFollowed = append(s.notFollowed, fmt.Sprintf("the references of %s: %v", describe(obj), err))
			continue
		}
		for _, ref := range refs {
			why, err := f.ref(ctx, s, obj, ref)
			if err != nil {
				return err
			}
			if why != "" {
				s.notFollowed = append(s.notFollowed, fmt.Sprintf("%s (referenced by %s): %s", ref, describe(obj), why))
			}
		}
	}
	return nil
}

// ref follows one reference of obj: it adds the object to the selection, or
// says why it is not followed ("" for a reference followed, already selected,
// or to what every namespace has). An error is one the selection cannot go on
// from.
func (f *follower) ref(ctx context.Context, s *selection, obj *unstructured.Unstructured, ref dependencies.Ref) (string, error) {
	ns, gk := obj.GetNamespace(), dependencies.GroupKind(ref)
	key := gk.String() + "/" + ns + "/" + ref.Name
	if s.seen[key] || f.considered[key] {
		return "", nil
	}
	f.considered[key] = true
	stub := &unstructured.Unstructured{}
	stub.SetGroupVersionKind(gk.WithVersion("v1"))
	stub.SetName(ref.Name)
	if render.HubOwned(stub) != "" {
		// The default ServiceAccount, the CA bundle: each member has its own.
		return "", nil
	}
	if why := render.HubOnlyKind(gk); why != "" {
		return why, nil
	}
	if f.src.Forbidden != nil && ns == f.placement.Namespace && f.src.Forbidden(gk) {
		return fmt.Sprintf("the namespace's platform admin forbids placing %s (annotation %s)", gk, placementv1alpha1.ForbiddenKindsAnnotation), nil
	}
	mapping, err := f.src.Mapper.RESTMapping(gk)
	if meta.IsNoMatchError(err) {
		return "the hub serves no such kind", nil
	}
	if err != nil {
		return "", err
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		return "a cluster-scoped kind is never followed", nil
	}
	found, err := f.get(ctx, mapping.GroupVersionKind, ns, ref.Name)
	if apierrors.IsForbidden(err) {
		// Render as a user who may not list the kind; the hub manager reads
		// every kind.
		return fmt.Sprintf("%s may not be listed on the hub by whoever renders", gk), nil
	}
	if err != nil || found == nil {
		return "not found on the hub", err
	}
	if why := render.HubOwned(found); why != "" {
		return why, nil
	}
	if !found.GetDeletionTimestamp().IsZero() {
		return "being deleted on the hub", nil
	}
	if len(s.followed) >= MaxFollowed {
		return fmt.Sprintf("the Placement already follows %d objects, the most it may", MaxFollowed), nil
	}
	if gk == dependencies.Secret && f.src.MayFollowSecret != nil {
		why, err := f.src.MayFollowSecret(ctx, f.placement, ns, ref.Name)
		if err != nil || why != "" {
			return why, err
		}
	}
	if gk == dependencies.Secret && f.src.NewReference != nil {
		if why := f.src.NewReference(ns, ref.Name); why != "" {
			return why, nil
		}
	}
	s.seen[key] = true
	s.out = append(s.out, found)
	s.followed = append(s.followed, ref.String())
	return "", nil
}

// get is the object of kind gvk called name in ns, or nil, from one list of
// the kind in ns.
func (f *follower) get(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, error) {
	listKey := gvk.String() + "/" + ns
	byName, ok := f.lists[listKey]
	if !ok {
		items, err := f.src.List(ctx, gvk, ns, labels.Everything())
		if err != nil {
			return nil, fmt.Errorf("listing %s in %s: %w", gvk, ns, err)
		}
		byName = make(map[string]*unstructured.Unstructured, len(items))
		for i := range items {
			items[i].SetGroupVersionKind(gvk)
			byName[items[i].GetName()] = &items[i]
		}
		f.lists[listKey] = byName
	}
	return byName[name], nil
}

// describe names an object for a message: its kind and name.
func describe(obj *unstructured.Unstructured) string {
	return obj.GetKind() + " " + obj.GetName()
}

// FollowedMessage says in one line what a Placement follows and what it does
// not: the DependenciesFollowed condition's message.
func (s Selected) FollowedMessage() string {
	var b strings.Builder
	if n := len(s.Followed); n == 0 {
		b.WriteString("no referenced object to follow")
	} else {
		fmt.Fprintf(&b, "%d referenced %s followed: %s", n, plural(n, "object", "objects"), list(s.Followed, 20))
	}
	if len(s.NotFollowed) > 0 {
		fmt.Fprintf(&b, "; not followed: %s", list(s.NotFollowed, 20))
	}
	return b.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// list joins the first max items and says how many more there are.
func list(items []string, max int) string {
	if len(items) <= max {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:max], ", "), len(items)-max)
}
