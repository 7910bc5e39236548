package work

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
)

// held is an object the agent is removing and cannot be done with yet.
type held struct {
	// what names the object and what holds it.
	what string
	// reason is the CleanupBlocked reason.
	reason string
}

// removeStale deletes (or, with orphan, releases) the recorded objects that
// desired does not name and returns the records still to be answered for, and
// what holds the removal of the others. A nil desired means the wanted objects are
// not known, and nothing is removed. An object is deleted only while it has the
// recorded UID and the AppliedWork among its owners; one that other owners also
// hold is released instead of deleted, and one that another Work waits for passes
// to that Work.
func (r *Reconciler) removeStale(ctx context.Context, records []lodestarworkv1alpha1.AppliedResource, desired map[string]bool, applied *lodestarworkv1alpha1.AppliedWork, orphan bool) ([]lodestarworkv1alpha1.AppliedResource, []held, error) {
	if desired == nil {
		return records, nil, nil
	}
	kept := make([]lodestarworkv1alpha1.AppliedResource, 0, len(records))
	var blocked []held
	waiting := &waitingWorks{}
	for i, rec := range records {
		if desired[recordKey(rec)] {
			kept = append(kept, rec)
			continue
		}
		h, err := r.removeOne(ctx, rec, applied, orphan, waiting)
		if err != nil {
			return append(kept, records[i:]...), blocked, err
		}
		if h != nil {
			kept = append(kept, rec)
			blocked = append(blocked, *h)
		}
	}
	if len(blocked) > 0 {
		return kept, blocked, fmt.Errorf("waiting for %d objects to be removed from the member", len(blocked))
	}
	return kept, nil, nil
}

// removeOne deletes, releases or passes on one recorded object, and returns what
// holds it when the agent is not done with it. With orphan it only releases.
func (r *Reconciler) removeOne(ctx context.Context, rec lodestarworkv1alpha1.AppliedResource, applied *lodestarworkv1alpha1.AppliedWork, orphan bool, waiting *waitingWorks) (*held, error) {
	ref := klog.KRef(rec.Namespace, rec.Name)
	log := ctrl.LoggerFrom(ctx).WithValues("kind", rec.Kind, "object", ref)
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(metav1.GroupVersion{Group: rec.Group, Version: rec.Version}.String())
	obj.SetKind(rec.Kind)
	err := r.Member.Get(ctx, client.ObjectKey{Namespace: rec.Namespace, Name: rec.Name}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case meta.IsNoMatchError(err) && orphan:
		return nil, nil // Left on the member, whatever it is.
	case meta.IsNoMatchError(err):
		return r.unservedKind(ctx, rec)
	case err != nil:
		return nil, fmt.Errorf("reading %s %s: %w", rec.Kind, ref, err)
	case obj.GetUID() != rec.UID:
		log.Info("Not deleting an object recreated by someone else", "uid", obj.GetUID())
		return nil, nil
	case !ownedBy(obj, applied) && otherWork(obj) != "":
		log.Info("Not deleting an object that another Work placed")
		return nil, nil
	case rec.WaitingFor != "" && !ownedBy(obj, applied):
		// Waited for, never placed by this Work (its holder orphaned it, say).
		log.Info("Not deleting an object this Work only waited for")
		return nil, nil
	case !obj.GetDeletionTimestamp().IsZero() && !orphan:
		return &held{what: deletionHolder(rec, obj), reason: lodestarworkv1alpha1.ReasonWaitingOnMember}, nil
	}

	if orphan || len(obj.GetOwnerReferences()) > 1 {
		if ownedBy(obj, applied) {
			if err := r.setOwner(ctx, obj, applied, nil); err != nil {
				return nil, fmt.Errorf("releasing %s %s: %w", rec.Kind, ref, err)
			}
		}
		if orphan {
			log.Info("Orphaned an object: it stays on the member, released by the Work")
		} else {
			log.Info("Released an object that other owners still hold")
		}
		return nil, nil
	}

	next, err := waiting.next(ctx, r.Member, rec, applied)
	if err != nil {
		return nil, err
	}
	if next != nil {
		if err := r.setOwner(ctx, obj, applied, next); err != nil {
			return nil, fmt.Errorf("passing %s %s to AppliedWork %s: %w", rec.Kind, ref, next.Name, err)
		}
		log.Info("Passed an object to another Work that places it, without deleting it", "appliedWork", next.Name)
		return nil, nil
	}

	uid := rec.UID
	err = r.Member.Delete(ctx, obj, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil, nil // Gone, or replaced by another object with the same name.
	}
	if err != nil {
		return nil, fmt.Errorf("deleting %s %s: %w", rec.Kind, ref, err)
	}
	log.Info("Deleted an object the Work no longer places")
	err = r.Member.Get(ctx, client.ObjectKey{Namespace: rec.Namespace, Name: rec.Name}, obj)
	if apierrors.IsNotFound(err) || (err == nil && obj.GetUID() != rec.UID) {
		return nil, nil
	}
	return &held{what: deletionHolder(rec, obj), reason: lodestarworkv1alpha1.ReasonWaitingOnMember}, nil
}

// setOwner replaces the AppliedWork among obj's owners by next (or removes it, for
// a nil next), at the resourceVersion read.
func (r *Reconciler) setOwner(ctx context.Context, obj *unstructured.Unstructured, applied, next *lodestarworkv1alpha1.AppliedWork) error {
	base := obj.DeepCopy()
	refs := slices.DeleteFunc(obj.GetOwnerReferences(), func(ref metav1.OwnerReference) bool { return ref.UID == applied.UID })
	if next != nil {
		refs = append(refs, ownerReference(next))
	}
	obj.SetOwnerReferences(refs)
	return r.Member.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// unservedKind judges a recorded object whose kind the member no longer serves.
// When the kind came from a CustomResourceDefinition that is gone, so is the
// object (the API server deletes a CRD's objects with it). Otherwise (an
// aggregated API that is down, a CRD not established) the object may still be
// there and is held: the Work says so.
func (r *Reconciler) unservedKind(ctx context.Context, rec lodestarworkv1alpha1.AppliedResource) (*held, error) {
	what := rec.Kind + " " + klog.KRef(rec.Namespace, rec.Name).String()
	gv := metav1.GroupVersion{Group: rec.Group, Version: rec.Version}.String()
	if rec.Group != "" && rec.Resource != "" {
		crd := &metav1.PartialObjectMetadata{}
		crd.SetGroupVersionKind(crdKind.WithVersion("v1"))
		err := r.Member.Get(ctx, client.ObjectKey{Name: rec.Resource + "." + rec.Group}, crd)
		if apierrors.IsNotFound(err) {
			ctrl.LoggerFrom(ctx).Info("Forgetting an object whose CustomResourceDefinition is gone from the member", "kind", rec.Kind, "object", klog.KRef(rec.Namespace, rec.Name))
			return nil, nil
		}
	}
	return &held{what: what + " (the member does not serve " + gv + "; the agent cannot look it up)", reason: lodestarworkv1alpha1.ReasonKindNotServed}, nil
}

// waitingWorks finds, once per cleanup pass, the AppliedWorks on the member that
// wait for objects another Work placed.
type waitingWorks struct {
	loaded bool
	// byKey maps an object key and UID to the AppliedWorks waiting for it, in name
	// order, and what they wait for.
	byKey map[string][]waiter
}

type waiter struct {
	applied *lodestarworkv1alpha1.AppliedWork
	holder  string
}

// next returns the AppliedWork that waits for rec's object from applied, if any.
func (w *waitingWorks) next(ctx context.Context, c client.Client, rec lodestarworkv1alpha1.AppliedResource, applied *lodestarworkv1alpha1.AppliedWork) (*lodestarworkv1alpha1.AppliedWork, error) {
	if !w.loaded {
		list := &lodestarworkv1alpha1.AppliedWorkList{}
		if err := c.List(ctx, list); err != nil {
			return nil, fmt.Errorf("listing AppliedWorks for one waiting for an object: %w", err)
		}
		w.byKey = map[string][]waiter{}
		for i := range list.Items {
			aw := &list.Items[i]
			if !aw.DeletionTimestamp.IsZero() {
				continue
			}
			for _, r := range aw.Status.AppliedResources {
				if r.WaitingFor != "" {
					k := recordKey(r) + "/" + string(r.UID)
					w.byKey[k] = append(w.byKey[k], waiter{applied: aw, holder: r.WaitingFor})
				}
			}
		}
		w.loaded = true
	}
	for _, cand := range w.byKey[recordKey(rec)+"/"+string(rec.UID)] {
		if cand.holder == applied.Name && cand.applied.UID != applied.UID {
			return cand.applied, nil
		}
	}
	return nil, nil
}

// deletionHolder says what an object being deleted waits for.
func deletionHolder(rec lodestarworkv1alpha1.AppliedResource, obj *unstructured.Unstructured) string {
	what := rec.Kind + " " + klog.KRef(rec.Namespace, rec.Name).String()
	if f := obj.GetFinalizers(); len(f) > 0 {
		return what + " (finalizers " + strings.Join(f, ", ") + ")"
	}
	return what + " (being deleted)"
}
