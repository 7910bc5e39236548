package work

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/diff"
	"github.com/lodestar-dev/lodestar/internal/member"
	"github.com/lodestar-dev/lodestar/internal/workapply"
)

// applyAll applies every manifest of the Work: Namespaces first, then
// CustomResourceDefinitions, then the rest in the Work's order. A manifest that
// fails fails only itself.
func (r *Reconciler) applyAll(ctx context.Context, work *workv1alpha1.Work, applied *lodestarworkv1alpha1.AppliedWork, p workapply.Plan) []workapply.Result {
	order := make([]int, len(work.Spec.Workload.Manifests))
	prio := make([]int, len(order))
	for i, m := range work.Spec.Workload.Manifests {
		order[i] = i
		prio[i] = workapply.ApplyPriority(m.Raw)
	}
	sort.SliceStable(order, func(a, b int) bool { return prio[order[a]] < prio[order[b]] })

	results := make([]workapply.Result, len(order))
	pass := &applyPass{seen: map[string]int{}, records: workapply.RecordIndex(applied)}
	for _, i := range order {
		results[i] = r.applyOne(ctx, i, work.Spec.Workload.Manifests[i].Raw, applied, p, pass)
	}
	return results
}

// applyOne applies one manifest: prepare it, read what the member has, decide
// what to do, and do it.
func (r *Reconciler) applyOne(ctx context.Context, ordinal int, raw []byte, applied *lodestarworkv1alpha1.AppliedWork, p workapply.Plan, pass *applyPass) workapply.Result {
	res := &workapply.Result{ID: workv1alpha1.ResourceIdentifier{Ordinal: ordinal}}
	m, ok := r.prepare(ctx, res, raw, p, pass)
	if !ok {
		return *res
	}
	existing := &unstructured.Unstructured{}
	existing.SetGroupVersionKind(m.gvk)
	if err := r.Member.Get(ctx, client.ObjectKeyFromObject(m.obj), existing); apierrors.IsNotFound(err) {
		existing = nil
	} else if err != nil {
		res.Transient = err
		return res.Fail(lodestarworkv1alpha1.ReasonApplyFailed, "reading the object on the member: %s", workapply.ErrorMessage(err, m.isSecret))
	}
	s := workapply.Situation{
		Owner:        workapply.Ownership(existing, applied, m.prev),
		BeingDeleted: existing != nil && !existing.GetDeletionTimestamp().IsZero(),
		SameManifest: m.prev != nil && m.prev.ManifestHash == m.hash,
		RunsOnce:     workapply.RunsOnce(m.gvk.GroupKind()),
		Strategy:     p.Strategy,
	}
	return r.execute(ctx, res, workapply.Decide(s), m, existing, applied)
}

// execute carries out the action decide chose for a manifest.
func (r *Reconciler) execute(ctx context.Context, res *workapply.Result, a workapply.Action, m manifest, existing *unstructured.Unstructured, applied *lodestarworkv1alpha1.AppliedWork) workapply.Result {
	// keep records what the agent answers for when it writes nothing now.
	keep := func(live *unstructured.Unstructured) {
		if m.prev != nil {
			res.Record = m.prev.DeepCopy()
			if live != nil {
				res.Record.UID = live.GetUID()
			}
		}
	}
	switch a {
	case workapply.ActWaitForDeletion:
		// Nothing is written to it. Once it is gone the Work is looked at again, as
		// for an object deleted on the member.
		keep(existing)
		res.Live, res.Waiting = existing, true
		return res.Succeed(lodestarworkv1alpha1.ReasonApplied, "applied; being deleted on the member, looked at again once it is gone")
	case workapply.ActRanOnce:
		keep(nil)
		res.RanOnce = true
		return res.Succeed(lodestarworkv1alpha1.ReasonRanOnce, "the %s ran and is gone from the member (finished and removed, or deleted there); it is created again only when its manifest changes", m.gvk.Kind)
	case workapply.ActLeaveDeleted:
		keep(nil)
		res.Drift = []string{"(deleted)"}
		return res.Succeed(lodestarworkv1alpha1.ReasonApplied, "applied; deleted on the member since, and left so (whenDrifted: Report)")
	case workapply.ActReportMissing:
		return res.Fail(lodestarworkv1alpha1.ReasonNotFound, "ReportOnly: the object does not exist on the member")
	case workapply.ActCreate, workapply.ActRecreate:
		if ns := m.obj.GetNamespace(); ns != "" {
			if err := r.onMember().EnsureNamespace(ctx, ns); err != nil {
				res.Transient = err
				return res.Fail(lodestarworkv1alpha1.ReasonApplyFailed, "creating namespace %s: %v", ns, err)
			}
		}
		if res.Live, res.Transient = r.onMember().Apply(ctx, m.obj, applied); res.Transient != nil {
			return res.Fail(lodestarworkv1alpha1.ReasonApplyFailed, "%s", workapply.ErrorMessage(res.Transient, m.isSecret))
		}
		res.Record = workapply.NewRecord(res.Live, res.ID, m.hash)
		r.onMember().RememberWritten(res.Key, sentID(m, nil, applied), res.Live)
		if by := member.CreatedBy(res.Live); by != "" {
			// Someone else created the object between the agent's read and its
			// apply, which then patched theirs: it is not the agent's to delete.
			res.Record.TakenOver = true
			ctrl.LoggerFrom(ctx).Info("Another writer created the object the agent was creating; recorded as taken over, never deleted as created", "manifest", workapply.Describe(res.ID), "writer", by)
			return res.Succeed(lodestarworkv1alpha1.ReasonApplied, "applied to an object %s created at the same moment; recorded as taken over, so it is released rather than deleted", by)
		}
		if a == workapply.ActRecreate {
			res.Corrected = []string{"(deleted)"}
			return res.Succeed(lodestarworkv1alpha1.ReasonApplied, "created again with server-side apply: it had been deleted on the member")
		}
		// Said as every later reconcile says it, so that the reconcile the new
		// object's own watch event brings writes no status.
		return res.Succeed(lodestarworkv1alpha1.ReasonApplied, workapply.MsgApplied)
	case workapply.ActConflictOtherWork:
		// Recorded as waiting: when the other Work lets the object go, it passes it
		// to this one instead of deleting it.
		holder := workapply.OtherWork(existing)
		res.Record = &lodestarworkv1alpha1.AppliedResource{
			Group: res.ID.Group, Version: res.ID.Version, Kind: res.ID.Kind, Resource: res.ID.Resource,
			Namespace: existing.GetNamespace(), Name: existing.GetName(), UID: existing.GetUID(), WaitingFor: holder,
		}
		return res.Fail(lodestarworkv1alpha1.ReasonOtherWork, "the object is already placed by another Work (AppliedWork %s); it is left to that Work, and passes to this one when that Work no longer places it", holder)
	case workapply.ActReport:
		return r.report(ctx, res, workapply.WithIgnored(m.obj, existing, m.ignored), existing, m.isSecret)
	case workapply.ActKeep:
		res.Live, res.Record = existing, workapply.NewRecord(existing, res.ID, m.hash)
		return res.Succeed(lodestarworkv1alpha1.ReasonCreateOnlyKept, "CreateOnly: the object exists and is not updated")
	case workapply.ActUpdate:
		return r.update(ctx, res, applied, m, existing)
	case workapply.ActConflictNotOwned:
		return res.Fail(lodestarworkv1alpha1.ReasonNotOwned, "the object exists on the member and was not created by this Work; it is left untouched (takeover: Never)")
	}
	return r.takeOver(ctx, res, m, existing, applied)
}

// takeOver makes an object nobody placed this Work's, as the takeover policy allows.
func (r *Reconciler) takeOver(ctx context.Context, res *workapply.Result, m manifest, existing *unstructured.Unstructured, applied *lodestarworkv1alpha1.AppliedWork) workapply.Result {
	strategy := m.strategy
	desired := workapply.At(workapply.WithIgnored(m.obj, existing, m.ignored), existing)
	if strategy.Takeover == lodestarworkv1alpha1.TakeoverIfNoDiff && m.isSecret {
		// Whether it would be taken over would tell the hub whether a guessed value
		// matches the member's Secret.
		return res.Fail(lodestarworkv1alpha1.ReasonNotOwned, "the Secret exists on the member and was not created by this Work; it is left untouched: takeover IfNoDiff never compares Secrets (use takeover Always to take it over)")
	}
	if strategy.Takeover == lodestarworkv1alpha1.TakeoverIfNoDiff {
		paths, err := r.onMember().DryRunDiff(ctx, desired, existing)
		if err != nil {
			res.Transient = err
			return res.Fail(lodestarworkv1alpha1.ReasonApplyFailed, "comparing with the member's object: %s", workapply.ErrorMessage(err, m.isSecret))
		}
		if len(paths) > 0 {
			return res.Fail(lodestarworkv1alpha1.ReasonTakeoverDiff, "the object exists on the member and differs from the manifest at %s; it is left untouched (takeover: IfNoDiff)", strings.Join(paths, ", "))
		}
	}
	if strategy.Type == lodestarworkv1alpha1.ApplyCreateOnly {
		res.Live, res.Transient = r.onMember().Adopt(ctx, existing, applied)
	} else {
		res.Live, res.Transient = r.onMember().Apply(ctx, desired, applied)
	}
	if res.Transient != nil {
		return res.Fail(lodestarworkv1alpha1.ReasonApplyFailed, "taking over: %s", workapply.ErrorMessage(res.Transient, m.isSecret))
	}
	res.Record = workapply.NewRecord(res.Live, res.ID, m.hash)
	res.Record.TakenOver = true
	return res.Succeed(lodestarworkv1alpha1.ReasonApplied, "taken over (takeover: %s)", strategy.Takeover)
}

// applyAttempts is how many times update writes an object that keeps changing
// on the member between its read and the write (a Deployment whose controller
// writes its status during a rollout, on a busy member) before it reports the
// conflict as a failure: three were not always enough under load, and a
// failure reported stops a `helm upgrade --wait` on the hub.
const applyAttempts = 8

// update brings an object this Work created in line with its manifest. A manifest
// that changed on the hub is applied whatever the drift policy. Otherwise any
// difference is drift, made on the member: with whenDrifted Report it is reported
// and left; with Correct the manifest is applied again, and what that set back is
// reported as corrected. Every write is made at the resourceVersion that was read,
// so that what is reported (and the ignored fields) match what was written; when
// the object changed in between, it is read again.
func (r *Reconciler) update(ctx context.Context, res *workapply.Result, applied *lodestarworkv1alpha1.AppliedWork, m manifest, existing *unstructured.Unstructured) workapply.Result {
	obj, prev, hash, ignored, strategy := m.obj, m.prev, m.hash, m.ignored, m.strategy
	changedOnHub := prev == nil || prev.ManifestHash != hash
	failed := func(what string, err error) workapply.Result {
		res.Transient = err
		return res.Fail(lodestarworkv1alpha1.ReasonApplyFailed, "%s%s", what, workapply.ErrorMessage(err, m.isSecret))
	}
	if prev != nil && prev.WaitingFor != "" {
		// Another Work placed it and let it go to this one: it was not deleted.
		res.PassedFrom = prev.WaitingFor
	}
	if !changedOnHub && strategy.WhenDrifted == lodestarworkv1alpha1.DriftCorrect && r.onMember().UnchangedSinceWritten(res.Key, sentID(m, existing, applied), existing) {
		// Applying again would write nothing: the object is read, not written.
		res.Live, res.Record = existing, workapply.NewRecord(existing, res.ID, hash)
		res.Condition = workapply.AppliedCondition(metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied, workapply.MsgApplied)
		return *res
	}
	var desired *unstructured.Unstructured
	for attempt := 1; ; attempt++ {
		desired = workapply.At(workapply.WithIgnored(obj, existing, ignored), existing)
		var err error
		if !changedOnHub && strategy.WhenDrifted == lodestarworkv1alpha1.DriftReport {
			var paths []string
			if paths, err = r.onMember().DryRunDiff(ctx, member.WithOwner(desired, applied), existing); err == nil {
				// Nothing is written: the object is left as it is.
				res.Live, res.Drift, res.Record = existing, paths, prev.DeepCopy()
				msg := workapply.MsgApplied
				if len(res.Drift) > 0 {
					msg = "applied; changed on the member since, and left so (whenDrifted: Report)"
				}
				res.Condition = workapply.AppliedCondition(metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied, msg)
				return *res
			}
		} else if res.Live, err = r.onMember().Apply(ctx, desired, applied); err == nil {
			break
		}
		if !apierrors.IsConflict(err) || attempt == applyAttempts {
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
	res.Record = workapply.NewRecord(res.Live, res.ID, hash)
	r.onMember().RememberWritten(res.Key, sentID(m, existing, applied), res.Live)
	if !changedOnHub && res.Live.GetResourceVersion() != existing.GetResourceVersion() {
		res.Corrected = diff.PathsWithin(member.WithOwner(desired, applied).Object, existing.Object, res.Live.Object, workapply.MaxDiffPaths)
	}
	msg := workapply.MsgApplied
	if len(res.Corrected) > 0 {
		msg = "applied with server-side apply; set back what was changed on the member at " + strings.Join(res.Corrected, ", ")
	}
	res.Condition = workapply.AppliedCondition(metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied, msg)
	return *res
}

// report compares the member's object with the manifest and writes nothing.
func (r *Reconciler) report(ctx context.Context, res *workapply.Result, obj, existing *unstructured.Unstructured, isSecret bool) workapply.Result {
	res.Live = existing
	if isSecret {
		// Comparing would tell the hub whether a guessed value matches.
		res.Condition = workapply.AppliedCondition(metav1.ConditionTrue, lodestarworkv1alpha1.ReasonNotCompared, "ReportOnly: the Secret exists on the member; Secrets are never compared, so that the hub cannot learn their values")
		return *res
	}
	paths, err := r.onMember().DryRunDiff(ctx, obj, existing)
	switch {
	case err != nil:
		res.Transient = err
		res.Condition = workapply.AppliedCondition(metav1.ConditionFalse, lodestarworkv1alpha1.ReasonApplyFailed,
			fmt.Sprintf("manifest %d (%s): comparing with the member's object: %s", res.ID.Ordinal, workapply.Describe(res.ID), workapply.ErrorMessage(err, isSecret)))
	case len(paths) > 0:
		res.Condition = workapply.AppliedCondition(metav1.ConditionFalse, lodestarworkv1alpha1.ReasonOutOfSync,
			fmt.Sprintf("manifest %d (%s): ReportOnly: the member's object differs at %s", res.ID.Ordinal, workapply.Describe(res.ID), strings.Join(paths, ", ")))
	default:
		res.Condition = workapply.AppliedCondition(metav1.ConditionTrue, lodestarworkv1alpha1.ReasonInSync, "ReportOnly: the member's object matches the manifest")
	}
	return *res
}
