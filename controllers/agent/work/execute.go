package work

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	"github.com/lodestar-dev/lodestar/internal/claims"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/diff"
)

// maxDiffPaths caps how many differing fields a message names.
const maxDiffPaths = 10

// msgApplied is the Applied message of a manifest applied as it is.
const msgApplied = "applied with server-side apply"

// result is what applying one manifest came to.
type result struct {
	id        workv1alpha1.ResourceIdentifier
	key       string // group/kind/namespace/name; empty when the manifest is not valid
	record    *lodestarworkv1alpha1.AppliedResource
	condition metav1.Condition
	// live is the object on the member after this step, when there is one.
	live *unstructured.Unstructured
	// transient is set when a retry with backoff may succeed.
	transient error
	// waiting is set when the manifest waits for something that arrives soon
	// (a CRD of the same Work).
	waiting bool
	// drift are the fields in which the member's object differs from the manifest,
	// left so (whenDrifted: Report); "(deleted)" when it was deleted.
	drift []string
	// corrected are the fields of the member's object that someone else had
	// changed and the agent set back.
	corrected []string
	// ranOnce is set for a Job that ran and is gone from the member.
	ranOnce bool
	// blocker names what holds back the pods of an object that is not available.
	blocker string
	// claims are the state of the object's claims: a placed claim's, or those a
	// placed StatefulSet made on the member.
	claims *claims.Report
	// passedFrom names the AppliedWork that placed the object before and let it
	// go to this Work, undeleted.
	passedFrom string
}

// fail sets res's Applied condition False with a message naming the manifest, and
// returns res.
func (res *result) fail(reason, format string, args ...any) result {
	res.condition = appliedCondition(metav1.ConditionFalse, reason, fmt.Sprintf("manifest %d (%s): ", res.id.Ordinal, describe(res.id))+fmt.Sprintf(format, args...))
	return *res
}

// succeed sets res's Applied condition True, and returns res.
func (res *result) succeed(reason, format string, args ...any) result {
	res.condition = appliedCondition(metav1.ConditionTrue, reason, fmt.Sprintf(format, args...))
	return *res
}

// applyAll applies every manifest of the Work: Namespaces first, then
// CustomResourceDefinitions, then the rest in the Work's order. A manifest that
// fails fails only itself.
func (r *Reconciler) applyAll(ctx context.Context, work *workv1alpha1.Work, applied *lodestarworkv1alpha1.AppliedWork, p plan) []result {
	order := make([]int, len(work.Spec.Workload.Manifests))
	prio := make([]int, len(order))
	for i, m := range work.Spec.Workload.Manifests {
		order[i] = i
		prio[i] = applyPriority(m.Raw)
	}
	sort.SliceStable(order, func(a, b int) bool { return prio[order[a]] < prio[order[b]] })

	results := make([]result, len(order))
	pass := &applyPass{seen: map[string]int{}, records: recordIndex(applied)}
	for _, i := range order {
		results[i] = r.applyOne(ctx, i, work.Spec.Workload.Manifests[i].Raw, applied, p, pass)
	}
	return results
}

// applyOne applies one manifest: prepare it, read what the member has, decide
// what to do, and do it.
func (r *Reconciler) applyOne(ctx context.Context, ordinal int, raw []byte, applied *lodestarworkv1alpha1.AppliedWork, p plan, pass *applyPass) result {
	res := &result{id: workv1alpha1.ResourceIdentifier{Ordinal: ordinal}}
	m, ok := r.prepare(ctx, res, raw, p, pass)
	if !ok {
		return *res
	}
	existing := &unstructured.Unstructured{}
	existing.SetGroupVersionKind(m.gvk)
	if err := r.Member.Get(ctx, client.ObjectKeyFromObject(m.obj), existing); apierrors.IsNotFound(err) {
		existing = nil
	} else if err != nil {
		res.transient = err
		return res.fail(lodestarworkv1alpha1.ReasonApplyFailed, "reading the object on the member: %s", errorMessage(err, m.isSecret))
	}
	s := situation{
		owner:        ownership(existing, applied, m.prev),
		beingDeleted: existing != nil && !existing.GetDeletionTimestamp().IsZero(),
		sameManifest: m.prev != nil && m.prev.ManifestHash == m.hash,
		runsOnce:     runsOnce(m.gvk.GroupKind()),
		strategy:     p.strategy,
	}
	return r.execute(ctx, res, decide(s), m, existing, applied)
}

// execute carries out the action decide chose for a manifest.
func (r *Reconciler) execute(ctx context.Context, res *result, a action, m manifest, existing *unstructured.Unstructured, applied *lodestarworkv1alpha1.AppliedWork) result {
	// keep records what the agent answers for when it writes nothing now.
	keep := func(live *unstructured.Unstructured) {
		if m.prev != nil {
			res.record = m.prev.DeepCopy()
			if live != nil {
				res.record.UID = live.GetUID()
			}
		}
	}
	switch a {
	case actWaitForDeletion:
		// Nothing is written to it. Once it is gone the Work is looked at again, as
		// for an object deleted on the member.
		keep(existing)
		res.live, res.waiting = existing, true
		return res.succeed(lodestarworkv1alpha1.ReasonApplied, "applied; being deleted on the member, looked at again once it is gone")
	case actRanOnce:
		keep(nil)
		res.ranOnce = true
		return res.succeed(lodestarworkv1alpha1.ReasonRanOnce, "the %s ran and is gone from the member (finished and removed, or deleted there); it is created again only when its manifest changes", m.gvk.Kind)
	case actLeaveDeleted:
		keep(nil)
		res.drift = []string{"(deleted)"}
		return res.succeed(lodestarworkv1alpha1.ReasonApplied, "applied; deleted on the member since, and left so (whenDrifted: Report)")
	case actReportMissing:
		return res.fail(lodestarworkv1alpha1.ReasonNotFound, "ReportOnly: the object does not exist on the member")
	case actCreate, actRecreate:
		if ns := m.obj.GetNamespace(); ns != "" {
			if err := r.ensureNamespace(ctx, ns); err != nil {
				res.transient = err
				return res.fail(lodestarworkv1alpha1.ReasonApplyFailed, "creating namespace %s: %v", ns, err)
			}
		}
		if res.live, res.transient = r.apply(ctx, m.obj, applied); res.transient != nil {
			return res.fail(lodestarworkv1alpha1.ReasonApplyFailed, "%s", errorMessage(res.transient, m.isSecret))
		}
		res.record = record(res.live, res.id, m.hash)
		r.rememberWritten(res.key, sentID(m, nil, applied), res.live)
		if by := createdBy(res.live); by != "" {
			// Someone else created the object between the agent's read and its
			// apply, which then patched theirs: it is not the agent's to delete.
			res.record.TakenOver = true
			ctrl.LoggerFrom(ctx).Info("Another writer created the object the agent was creating; recorded as taken over, never deleted as created", "manifest", describe(res.id), "writer", by)
			return res.succeed(lodestarworkv1alpha1.ReasonApplied, "applied to an object %s created at the same moment; recorded as taken over, so it is released rather than deleted", by)
		}
		if a == actRecreate {
			res.corrected = []string{"(deleted)"}
			return res.succeed(lodestarworkv1alpha1.ReasonApplied, "created again with server-side apply: it had been deleted on the member")
		}
		// Said as every later reconcile says it, so that the reconcile the new
		// object's own watch event brings writes no status.
		return res.succeed(lodestarworkv1alpha1.ReasonApplied, msgApplied)
	case actConflictOtherWork:
		// Recorded as waiting: when the other Work lets the object go, it passes it
		// to this one instead of deleting it.
		holder := otherWork(existing)
		res.record = &lodestarworkv1alpha1.AppliedResource{
			Group: res.id.Group, Version: res.id.Version, Kind: res.id.Kind, Resource: res.id.Resource,
			Namespace: existing.GetNamespace(), Name: existing.GetName(), UID: existing.GetUID(), WaitingFor: holder,
		}
		return res.fail(lodestarworkv1alpha1.ReasonOtherWork, "the object is already placed by another Work (AppliedWork %s); it is left to that Work, and passes to this one when that Work no longer places it", holder)
	case actReport:
		return r.report(ctx, res, withIgnored(m.obj, existing, m.ignored), existing, m.isSecret)
	case actKeep:
		res.live, res.record = existing, record(existing, res.id, m.hash)
		return res.succeed(lodestarworkv1alpha1.ReasonCreateOnlyKept, "CreateOnly: the object exists and is not updated")
	case actUpdate:
		return r.update(ctx, res, applied, m, existing)
	case actConflictNotOwned:
		return res.fail(lodestarworkv1alpha1.ReasonNotOwned, "the object exists on the member and was not created by this Work; it is left untouched (takeover: Never)")
	}
	return r.takeOver(ctx, res, m, existing, applied)
}

// takeOver makes an object nobody placed this Work's, as the takeover policy allows.
func (r *Reconciler) takeOver(ctx context.Context, res *result, m manifest, existing *unstructured.Unstructured, applied *lodestarworkv1alpha1.AppliedWork) result {
	strategy := m.strategy
	desired := at(withIgnored(m.obj, existing, m.ignored), existing)
	if strategy.Takeover == lodestarworkv1alpha1.TakeoverIfNoDiff && m.isSecret {
		// Whether it would be taken over would tell the hub whether a guessed value
		// matches the member's Secret.
		return res.fail(lodestarworkv1alpha1.ReasonNotOwned, "the Secret exists on the member and was not created by this Work; it is left untouched: takeover IfNoDiff never compares Secrets (use takeover Always to take it over)")
	}
	if strategy.Takeover == lodestarworkv1alpha1.TakeoverIfNoDiff {
		paths, err := r.dryRunDiff(ctx, desired, existing)
		if err != nil {
			res.transient = err
			return res.fail(lodestarworkv1alpha1.ReasonApplyFailed, "comparing with the member's object: %s", errorMessage(err, m.isSecret))
		}
		if len(paths) > 0 {
			return res.fail(lodestarworkv1alpha1.ReasonTakeoverDiff, "the object exists on the member and differs from the manifest at %s; it is left untouched (takeover: IfNoDiff)", strings.Join(paths, ", "))
		}
	}
	if strategy.Type == lodestarworkv1alpha1.ApplyCreateOnly {
		res.live, res.transient = r.adopt(ctx, existing, applied)
	} else {
		res.live, res.transient = r.apply(ctx, desired, applied)
	}
	if res.transient != nil {
		return res.fail(lodestarworkv1alpha1.ReasonApplyFailed, "taking over: %s", errorMessage(res.transient, m.isSecret))
	}
	res.record = record(res.live, res.id, m.hash)
	res.record.TakenOver = true
	return res.succeed(lodestarworkv1alpha1.ReasonApplied, "taken over (takeover: %s)", strategy.Takeover)
}

// update brings an object this Work created in line with its manifest. A manifest
// that changed on the hub is applied whatever the drift policy. Otherwise any
// difference is drift, made on the member: with whenDrifted Report it is reported
// and left; with Correct the manifest is applied again, and what that set back is
// reported as corrected. Every write is made at the resourceVersion that was read,
// so that what is reported (and the ignored fields) match what was written; when
// the object changed in between, it is read again.
func (r *Reconciler) update(ctx context.Context, res *result, applied *lodestarworkv1alpha1.AppliedWork, m manifest, existing *unstructured.Unstructured) result {
	obj, prev, hash, ignored, strategy := m.obj, m.prev, m.hash, m.ignored, m.strategy
	changedOnHub := prev == nil || prev.ManifestHash != hash
	failed := func(what string, err error) result {
		res.transient = err
		return res.fail(lodestarworkv1alpha1.ReasonApplyFailed, "%s%s", what, errorMessage(err, m.isSecret))
	}
	if prev != nil && prev.WaitingFor != "" {
		// Another Work placed it and let it go to this one: it was not deleted.
		res.passedFrom = prev.WaitingFor
	}
	if !changedOnHub && strategy.WhenDrifted == lodestarworkv1alpha1.DriftCorrect && r.unchangedSinceWritten(res.key, sentID(m, existing, applied), existing) {
		// Applying again would write nothing: the object is read, not written.
		res.live, res.record = existing, record(existing, res.id, hash)
		res.condition = appliedCondition(metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied, msgApplied)
		return *res
	}
	var desired *unstructured.Unstructured
	for attempt := 1; ; attempt++ {
		desired = at(withIgnored(obj, existing, ignored), existing)
		var err error
		if !changedOnHub && strategy.WhenDrifted == lodestarworkv1alpha1.DriftReport {
			var paths []string
			if paths, err = r.dryRunDiff(ctx, withOwner(desired, applied), existing); err == nil {
				// Nothing is written: the object is left as it is.
				res.live, res.drift, res.record = existing, paths, prev.DeepCopy()
				msg := msgApplied
				if len(res.drift) > 0 {
					msg = "applied; changed on the member since, and left so (whenDrifted: Report)"
				}
				res.condition = appliedCondition(metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied, msg)
				return *res
			}
		} else if res.live, err = r.apply(ctx, desired, applied); err == nil {
			break
		}
		if !apierrors.IsConflict(err) || attempt == 3 {
			return failed("", err)
		}
		// Changed on the member since it was read: read it again.
		fresh := &unstructured.Unstructured{}
		fresh.SetGroupVersionKind(existing.GroupVersionKind())
		if err := r.Member.Get(ctx, client.ObjectKeyFromObject(existing), fresh); err != nil {
			// Deleted since it was read: the next reconcile decides afresh.
			return failed("reading the object on the member: ", err)
		}
		existing = fresh
	}
	res.record = record(res.live, res.id, hash)
	r.rememberWritten(res.key, sentID(m, existing, applied), res.live)
	if !changedOnHub && res.live.GetResourceVersion() != existing.GetResourceVersion() {
		res.corrected = diff.PathsWithin(withOwner(desired, applied).Object, existing.Object, res.live.Object, maxDiffPaths)
	}
	msg := msgApplied
	if len(res.corrected) > 0 {
		msg = "applied with server-side apply; set back what was changed on the member at " + strings.Join(res.corrected, ", ")
	}
	res.condition = appliedCondition(metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied, msg)
	return *res
}

// at returns a copy of obj that is written only over existing: its
// resourceVersion, and its UID, without which an apply to an object deleted
// since it was read would create it again (a finished Job deleted on the
// member would run again). The API server refuses such a write as a conflict.
func at(obj, existing *unstructured.Unstructured) *unstructured.Unstructured {
	out := obj.DeepCopy()
	out.SetResourceVersion(existing.GetResourceVersion())
	out.SetUID(existing.GetUID())
	return out
}

// report compares the member's object with the manifest and writes nothing.
func (r *Reconciler) report(ctx context.Context, res *result, obj, existing *unstructured.Unstructured, isSecret bool) result {
	res.live = existing
	if isSecret {
		// Comparing would tell the hub whether a guessed value matches.
		res.condition = appliedCondition(metav1.ConditionTrue, lodestarworkv1alpha1.ReasonNotCompared, "ReportOnly: the Secret exists on the member; Secrets are never compared, so that the hub cannot learn their values")
		return *res
	}
	paths, err := r.dryRunDiff(ctx, obj, existing)
	switch {
	case err != nil:
		res.transient = err
		res.condition = appliedCondition(metav1.ConditionFalse, lodestarworkv1alpha1.ReasonApplyFailed,
			fmt.Sprintf("manifest %d (%s): comparing with the member's object: %s", res.id.Ordinal, describe(res.id), errorMessage(err, isSecret)))
	case len(paths) > 0:
		res.condition = appliedCondition(metav1.ConditionFalse, lodestarworkv1alpha1.ReasonOutOfSync,
			fmt.Sprintf("manifest %d (%s): ReportOnly: the member's object differs at %s", res.id.Ordinal, describe(res.id), strings.Join(paths, ", ")))
	default:
		res.condition = appliedCondition(metav1.ConditionTrue, lodestarworkv1alpha1.ReasonInSync, "ReportOnly: the member's object matches the manifest")
	}
	return *res
}

// transientErrors joins the errors of manifests that a retry may fix.
func transientErrors(results []result) error {
	var errs []error
	for _, res := range results {
		if res.transient != nil {
			errs = append(errs, fmt.Errorf("manifest %d (%s): %w", res.id.Ordinal, describe(res.id), res.transient))
		}
	}
	return errors.Join(errs...)
}
