package work

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/workapply"
)

// DefaultUnservedKindGracePeriod is how long cleanup waits for the member to serve
// a recorded object's kind again (an aggregated API that is down, say) before it
// releases the record and leaves the object, if it is there, alone.
const DefaultUnservedKindGracePeriod = 10 * time.Minute

// removeStale deletes (or, as the deletion policy says, releases) the recorded
// objects that desired does not name and returns the records still to be answered for, and
// what holds the removal of the others. A nil desired means the wanted objects are
// not known, and nothing is removed. An object is deleted only while it has the
// recorded UID and the AppliedWork among its owners; one that other owners also
// hold is released instead of deleted, and one that another Work waits for passes
// to that Work. An object the Work took over is released unless the policy is
// DeleteTakenOver.
func (r *Reconciler) removeStale(ctx context.Context, records []lodestarworkv1alpha1.AppliedResource, desired map[string]bool, applied *lodestarworkv1alpha1.AppliedWork, policy lodestarworkv1alpha1.DeletionPolicy) ([]lodestarworkv1alpha1.AppliedResource, []workapply.Held, error) {
	if desired == nil {
		return records, nil, nil
	}
	kept := make([]lodestarworkv1alpha1.AppliedResource, 0, len(records))
	var blocked []workapply.Held
	waiting := &waitingWorks{}
	for i, rec := range records {
		if desired[workapply.RecordKey(rec)] {
			kept = append(kept, rec)
			continue
		}
		h, err := r.removeOne(ctx, rec, applied, policy, waiting)
		if err != nil {
			return append(kept, records[i:]...), blocked, err
		}
		if h != nil {
			kept = append(kept, rec)
			blocked = append(blocked, *h)
		}
	}
	if len(blocked) > 0 {
		return kept, blocked, fmt.Errorf("waiting for %s to be removed from the member", message.Count(len(blocked), "object"))
	}
	return kept, nil, nil
}

// removeOne deletes, releases or passes on one recorded object, and returns what
// holds it when the agent is not done with it. With the Orphan policy it only
// releases; an object taken over is released too, unless the policy is
// DeleteTakenOver.
func (r *Reconciler) removeOne(ctx context.Context, rec lodestarworkv1alpha1.AppliedResource, applied *lodestarworkv1alpha1.AppliedWork, policy lodestarworkv1alpha1.DeletionPolicy, waiting *waitingWorks) (*workapply.Held, error) {
	orphan := policy == lodestarworkv1alpha1.DeletionOrphan
	retained := isClaim(rec) && workapply.RecordedClaims(applied) == lodestarworkv1alpha1.ClaimsRetain
	release := orphan || retained || rec.TakenOver && policy != lodestarworkv1alpha1.DeletionDeleteTakenOver
	log := ctrl.LoggerFrom(ctx).WithValues("kind", rec.Kind, "object", klog.KRef(rec.Namespace, rec.Name))
	ctx = ctrl.LoggerInto(ctx, log)
	r.onMember().ForgetWritten(workapply.RecordKey(rec))
	obj, err := r.readRecorded(ctx, rec)
	if h, done, err := r.judgeRecorded(ctx, rec, obj, err, applied, release); done {
		return h, err
	}
	if release || len(obj.GetOwnerReferences()) > 1 {
		if workapply.OwnedBy(obj, applied) {
			if err := r.onMember().SetOwner(ctx, obj, applied, nil); err != nil {
				return nil, fmt.Errorf("releasing %s %s: %w", rec.Kind, klog.KRef(rec.Namespace, rec.Name), err)
			}
		}
		switch {
		case orphan:
			log.Info("Orphaned an object: it stays on the member, released by the Work")
		case retained:
			log.Info("Retained a claim: it stays on the member with its data, released by the Work (claims: Retain)")
		case release:
			log.Info("Released an object the Work took over: it was on the member before, and stays")
		default:
			log.Info("Released an object that other owners still hold")
		}
		return nil, nil
	}
	return r.passOrDelete(ctx, rec, obj, applied, waiting)
}

// isClaim tells whether a record is of a PersistentVolumeClaim.
func isClaim(rec lodestarworkv1alpha1.AppliedResource) bool {
	return rec.Group == "" && rec.Kind == "PersistentVolumeClaim"
}

// readRecorded reads a recorded object from the member, in a version the
// member serves when the recorded one is not (the agent's view of the member's
// API may lag).
func (r *Reconciler) readRecorded(ctx context.Context, rec lodestarworkv1alpha1.AppliedResource) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(metav1.GroupVersion{Group: rec.Group, Version: rec.Version}.String())
	obj.SetKind(rec.Kind)
	err := r.Member.Get(ctx, client.ObjectKey{Namespace: rec.Namespace, Name: rec.Name}, obj)
	if !meta.IsNoMatchError(err) && (!apierrors.IsNotFound(err) || objectNotFound(err)) {
		return obj, err
	}
	version, verr := r.servedVersion(ctx, rec)
	switch {
	case verr != nil:
		return obj, verr
	case version == "":
		return obj, &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: rec.Group, Kind: rec.Kind}, SearchedVersions: []string{rec.Version}}
	}
	obj.SetAPIVersion(metav1.GroupVersion{Group: rec.Group, Version: version}.String())
	return obj, r.Member.Get(ctx, client.ObjectKey{Namespace: rec.Namespace, Name: rec.Name}, obj)
}

// judgeRecorded decides, from reading a recorded object (obj, err), the cases in
// which the agent does nothing to it: it is gone, not found in a served kind,
// not the one recorded, another Work's, only waited for, or being deleted.
// done is false when the object is the Work's to release, pass on or delete.
func (r *Reconciler) judgeRecorded(ctx context.Context, rec lodestarworkv1alpha1.AppliedResource, obj *unstructured.Unstructured, err error,
	applied *lodestarworkv1alpha1.AppliedWork, release bool) (h *workapply.Held, done bool, _ error) {
	log := ctrl.LoggerFrom(ctx)
	switch {
	case apierrors.IsNotFound(err):
		return nil, true, nil
	case meta.IsNoMatchError(err) && release:
		return nil, true, nil // Left on the member, whatever it is.
	case meta.IsNoMatchError(err):
		return r.unservedKind(ctx, rec, applied), true, nil
	case err != nil:
		return nil, true, fmt.Errorf("reading %s %s: %w", rec.Kind, klog.KRef(rec.Namespace, rec.Name), err)
	case obj.GetUID() != rec.UID:
		log.Info("Not deleting an object recreated by someone else", "uid", obj.GetUID())
		return nil, true, nil
	case !workapply.OwnedBy(obj, applied) && workapply.OtherWork(obj) != "":
		log.Info("Not deleting an object that another Work placed")
		return nil, true, nil
	case rec.WaitingFor != "" && !workapply.OwnedBy(obj, applied):
		// Waited for, never placed by this Work (its holder orphaned it, say).
		log.Info("Not deleting an object this Work only waited for")
		return nil, true, nil
	case !obj.GetDeletionTimestamp().IsZero() && !release:
		return &workapply.Held{What: deletionHolder(rec, obj), Reason: lodestarworkv1alpha1.ReasonWaitingOnMember}, true, nil
	}
	return nil, false, nil
}

// passOrDelete passes an object the Work alone holds to another Work waiting
// for it, or deletes it, and returns what holds its deletion on the member.
func (r *Reconciler) passOrDelete(ctx context.Context, rec lodestarworkv1alpha1.AppliedResource, obj *unstructured.Unstructured,
	applied *lodestarworkv1alpha1.AppliedWork, waiting *waitingWorks) (*workapply.Held, error) {
	log := ctrl.LoggerFrom(ctx)
	ref := klog.KRef(rec.Namespace, rec.Name)
	next, err := waiting.next(ctx, r.Member, rec, applied)
	if err != nil {
		return nil, err
	}
	if next != nil {
		if err := r.onMember().SetOwner(ctx, obj, applied, next); err != nil {
			return nil, fmt.Errorf("passing %s %s to AppliedWork %s: %w", rec.Kind, ref, next.Name, err)
		}
		log.Info("Passed an object to another Work that places it, without deleting it", "appliedWork", next.Name)
		return nil, nil
	}
	err = r.onMember().DeleteObject(ctx, obj, rec.UID)
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
	return &workapply.Held{What: deletionHolder(rec, obj), Reason: lodestarworkv1alpha1.ReasonWaitingOnMember}, nil
}

// objectNotFound tells a NotFound answer about the object itself from one about
// its API path: the API server answers a version it does not serve with a bare
// 404 page, which the client reports as an unexpected server response.
func objectNotFound(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	if d := status.Status().Details; d != nil {
		for _, c := range d.Causes {
			if c.Type == metav1.CauseTypeUnexpectedServerResponse {
				return false
			}
		}
	}
	return true
}

// servedVersion returns a version of rec's kind the member serves: for a kind of
// a CustomResourceDefinition, read from the definition (the authority; the
// agent's discovery may lag), preferring the stored version; for other kinds,
// from discovery. It returns "" when no version is served, or the definition is
// gone.
func (r *Reconciler) servedVersion(ctx context.Context, rec lodestarworkv1alpha1.AppliedResource) (string, error) {
	if rec.Group != "" && rec.Resource != "" {
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(workapply.CRDKind.WithVersion("v1"))
		err := r.Member.Get(ctx, client.ObjectKey{Name: rec.Resource + "." + rec.Group}, crd)
		switch {
		case err == nil:
			versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
			served := ""
			for _, v := range versions {
				m, _ := v.(map[string]any)
				name, _ := m["name"].(string)
				if ok, _ := m["served"].(bool); !ok {
					continue
				}
				if storage, _ := m["storage"].(bool); storage || served == "" {
					served = name
				}
			}
			return served, nil
		case apierrors.IsNotFound(err):
			return "", nil
		case !meta.IsNoMatchError(err):
			return "", fmt.Errorf("reading the CustomResourceDefinition of %s: %w", rec.Kind, err)
		}
	}
	mapping, err := r.Member.RESTMapper().RESTMapping(schema.GroupKind{Group: rec.Group, Kind: rec.Kind})
	switch {
	case meta.IsNoMatchError(err):
		return "", nil // Served in no version.
	case err != nil:
		return "", fmt.Errorf("looking up the versions of %s: %w", rec.Kind, err)
	}
	return mapping.GroupVersionKind.Version, nil
}

// unservedKind judges a recorded object whose kind the member serves in no
// version. When the kind came from a CustomResourceDefinition that is gone, so is
// the object (the API server deletes a CRD's objects with it). Otherwise (an
// aggregated API that is down, a CRD that serves no version) the object may still
// be there and is held, the Work says so and until when: after
// UnservedKindGracePeriod the record is released, so that cleanup cannot be stuck
// for ever on what the agent cannot look up.
func (r *Reconciler) unservedKind(ctx context.Context, rec lodestarworkv1alpha1.AppliedResource, applied *lodestarworkv1alpha1.AppliedWork) *workapply.Held {
	what := rec.Kind + " " + klog.KRef(rec.Namespace, rec.Name).String()
	gv := metav1.GroupVersion{Group: rec.Group, Version: rec.Version}.String()
	if rec.Group != "" && rec.Resource != "" {
		crd := &metav1.PartialObjectMetadata{}
		crd.SetGroupVersionKind(workapply.CRDKind.WithVersion("v1"))
		err := r.Member.Get(ctx, client.ObjectKey{Name: rec.Resource + "." + rec.Group}, crd)
		if apierrors.IsNotFound(err) {
			ctrl.LoggerFrom(ctx).Info("Forgetting an object whose CustomResourceDefinition is gone from the member", "kind", rec.Kind, "object", klog.KRef(rec.Namespace, rec.Name))
			return nil
		}
	}
	grace := r.UnservedKindGracePeriod
	if grace <= 0 {
		grace = DefaultUnservedKindGracePeriod
	}
	first, _ := r.unserved.LoadOrStore(string(applied.UID)+"/"+workapply.RecordKey(rec), time.Now())
	until := first.(time.Time).Add(grace)
	if !time.Now().Before(until) {
		ctrl.LoggerFrom(ctx).Info("Releasing the record of an object whose kind the member has not served for the grace period; the object, if it is there, is left alone",
			"kind", rec.Kind, "object", klog.KRef(rec.Namespace, rec.Name), "apiVersion", gv, "gracePeriod", grace)
		return nil
	}
	return &workapply.Held{What: what + " (the member does not serve " + gv + "; the agent cannot look it up; the record is released at " +
		until.UTC().Format(time.RFC3339) + " if it stays so)", Reason: lodestarworkv1alpha1.ReasonKindNotServed}
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
		if err := c.List(ctx, list, client.MatchingLabels{lodestarworkv1alpha1.HubLabel: applied.Labels[lodestarworkv1alpha1.HubLabel]}); err != nil {
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
					k := workapply.RecordKey(r) + "/" + string(r.UID)
					w.byKey[k] = append(w.byKey[k], waiter{applied: aw, holder: r.WaitingFor})
				}
			}
		}
		w.loaded = true
	}
	for _, cand := range w.byKey[workapply.RecordKey(rec)+"/"+string(rec.UID)] {
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
