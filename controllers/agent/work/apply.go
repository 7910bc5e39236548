package work

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/diff"
	"github.com/lodestar-dev/lodestar/internal/feedback"
	"github.com/lodestar-dev/lodestar/internal/readiness"
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

// plan is how one Work is applied, from its annotations.
type plan struct {
	strategy lodestarworkv1alpha1.ApplyStrategy
	feedback *feedback.Rules
	// feedbackErr is set when the feedback rules are invalid.
	feedbackErr error
	// crds are the kinds defined by CRDs in the same Work.
	crds map[schema.GroupKind]string
	// ignore are the fields the member's controllers own.
	ignore []ignoreRule
}

// ignoreRule is a parsed IgnoreField.
type ignoreRule struct {
	kind  schema.GroupKind
	name  string
	paths []diff.Pointer
}

// ignored returns the fields of an object that the agent leaves to the member.
func (p plan) ignored(gk schema.GroupKind, name string) []diff.Pointer {
	var out []diff.Pointer
	for _, rule := range p.ignore {
		if rule.kind == gk && (rule.name == "" || rule.name == name) {
			out = append(out, rule.paths...)
		}
	}
	return out
}

// deletionPolicy is what happens to the objects the Work placed when it (or one
// of their manifests) goes: Orphan when the Work's annotation says so (set by
// unjoin --orphan, or by hand to give up a cleanup that waits on a member's
// finalizer), else the Placement's deletion policy.
func (p plan) deletionPolicy(work *workv1alpha1.Work) lodestarworkv1alpha1.DeletionPolicy {
	if orphans(work) {
		return lodestarworkv1alpha1.DeletionOrphan
	}
	return p.strategy.DeletionPolicy
}

// planFor reads the Work's apply strategy and feedback rules. An invalid strategy
// is an error: not knowing how to write, the agent writes nothing.
func planFor(work *workv1alpha1.Work) (plan, error) {
	p := plan{crds: map[schema.GroupKind]string{}}
	if s, ok := work.Annotations[lodestarworkv1alpha1.ApplyStrategyAnnotation]; ok {
		if err := json.Unmarshal([]byte(s), &p.strategy); err != nil {
			return p, fmt.Errorf("annotation %s is not an apply strategy: %w", lodestarworkv1alpha1.ApplyStrategyAnnotation, err)
		}
	}
	p.strategy = p.strategy.Defaulted()
	switch p.strategy.Type {
	case lodestarworkv1alpha1.ApplyServerSide, lodestarworkv1alpha1.ApplyCreateOnly, lodestarworkv1alpha1.ApplyReportOnly:
	default:
		return p, fmt.Errorf("unknown apply strategy type %q", p.strategy.Type)
	}
	switch p.strategy.Takeover {
	case lodestarworkv1alpha1.TakeoverNever, lodestarworkv1alpha1.TakeoverIfNoDiff, lodestarworkv1alpha1.TakeoverAlways:
	default:
		return p, fmt.Errorf("unknown takeover policy %q", p.strategy.Takeover)
	}
	switch p.strategy.WhenDrifted {
	case lodestarworkv1alpha1.DriftCorrect, lodestarworkv1alpha1.DriftReport:
	default:
		return p, fmt.Errorf("unknown drift policy %q", p.strategy.WhenDrifted)
	}
	switch p.strategy.DeletionPolicy {
	case lodestarworkv1alpha1.DeletionDelete, lodestarworkv1alpha1.DeletionDeleteTakenOver, lodestarworkv1alpha1.DeletionOrphan:
	default:
		return p, fmt.Errorf("unknown deletion policy %q", p.strategy.DeletionPolicy)
	}
	for _, f := range p.strategy.IgnoreFields {
		rule := ignoreRule{kind: schema.GroupKind{Group: f.Group, Kind: f.Kind}, name: f.Name}
		for _, path := range f.Paths {
			ptr, err := diff.ParsePointer(path)
			if err != nil {
				return p, fmt.Errorf("ignoreFields of %s: %w", f.Kind, err)
			}
			rule.paths = append(rule.paths, ptr)
		}
		p.ignore = append(p.ignore, rule)
	}
	if s, ok := work.Annotations[lodestarworkv1alpha1.StatusFeedbackAnnotation]; ok {
		var rules []lodestarworkv1alpha1.FeedbackRule
		if err := json.Unmarshal([]byte(s), &rules); err != nil {
			p.feedbackErr = fmt.Errorf("annotation %s is not a list of feedback rules: %w", lodestarworkv1alpha1.StatusFeedbackAnnotation, err)
		} else {
			p.feedback, p.feedbackErr = feedback.Compile(rules)
		}
	}
	for _, m := range work.Spec.Workload.Manifests {
		u := &unstructured.Unstructured{}
		if u.UnmarshalJSON(m.Raw) != nil || u.GroupVersionKind().GroupKind() != crdKind {
			continue
		}
		group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(u.Object, "spec", "names", "kind")
		p.crds[schema.GroupKind{Group: group, Kind: kind}] = u.GetName()
	}
	return p, nil
}

var (
	crdKind       = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
	namespaceKind = schema.GroupKind{Kind: "Namespace"}
	secretKind    = schema.GroupKind{Kind: "Secret"}
	jobKind       = schema.GroupKind{Group: "batch", Kind: "Job"}
)

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

// applyPass is what one pass over a Work's manifests shares: the objects named so
// far (by ordinal) and the AppliedWork's records by object key.
type applyPass struct {
	seen    map[string]int
	records map[string]*lodestarworkv1alpha1.AppliedResource
}

// claim marks res's object as named by its manifest; a second manifest naming the
// same object fails as a duplicate and claims nothing.
func (pass *applyPass) claim(res *result) bool {
	if first, dup := pass.seen[res.key]; dup {
		res.key, res.transient, res.waiting = "", nil, false
		res.fail(lodestarworkv1alpha1.ReasonDuplicate, "the same object as manifest %d", first)
		return false
	}
	pass.seen[res.key] = res.id.Ordinal
	return true
}

// applyPriority orders Namespaces (0) and CRDs (1) before everything else (2).
func applyPriority(raw []byte) int {
	u := &unstructured.Unstructured{}
	if u.UnmarshalJSON(raw) != nil {
		return 2
	}
	switch u.GroupVersionKind().GroupKind() {
	case namespaceKind:
		return 0
	case crdKind:
		return 1
	}
	return 2
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

// manifest is one manifest of a Work made ready for the member: decoded,
// validated, mapped to its resource, and allowed by the member's policy.
type manifest struct {
	// obj is the object to apply, without what must not be sent.
	obj  *unstructured.Unstructured
	gvk  schema.GroupVersionKind
	hash string
	// prev is what the agent recorded for the object before, if anything.
	prev *lodestarworkv1alpha1.AppliedResource
	// ignored are the fields left to the member's controllers.
	ignored  []diff.Pointer
	isSecret bool
	strategy lodestarworkv1alpha1.ApplyStrategy
}

// prepare decodes and checks a manifest. When it cannot be applied, res says why
// and prepare returns false.
func (r *Reconciler) prepare(ctx context.Context, res *result, raw []byte, p plan, pass *applyPass) (manifest, bool) {
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(raw); err != nil {
		res.fail(lodestarworkv1alpha1.ReasonDecodeFailed, "cannot be decoded: %v", err)
		return manifest{}, false
	}
	gvk := obj.GroupVersionKind()
	res.id.Group, res.id.Version, res.id.Kind = gvk.Group, gvk.Version, gvk.Kind
	res.id.Namespace, res.id.Name = obj.GetNamespace(), obj.GetName()
	switch {
	case gvk.Kind == "" || gvk.Version == "":
		res.fail(lodestarworkv1alpha1.ReasonInvalidManifest, "apiVersion and kind are required")
		return manifest{}, false
	case obj.GetName() == "" && obj.GetGenerateName() != "":
		res.fail(lodestarworkv1alpha1.ReasonInvalidManifest, "metadata.generateName is not supported: a placed object needs a fixed metadata.name")
		return manifest{}, false
	case obj.GetName() == "":
		res.fail(lodestarworkv1alpha1.ReasonInvalidManifest, "metadata.name is required")
		return manifest{}, false
	}

	mapping, err := r.Member.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		// The object is still known by its name: what the Work wants is known, so
		// objects of its other, earlier manifests can be cleaned up.
		res.key = objectKey(gvk.Group, gvk.Kind, obj.GetNamespace(), obj.GetName())
		if !pass.claim(res) {
			return manifest{}, false
		}
		// Keep what the agent answers for under this name: the kind may be served
		// again (a CRD being replaced, an API server restarting).
		res.record = pass.records[res.key].DeepCopy()
		switch {
		case !meta.IsNoMatchError(err):
			res.transient = err
			res.fail(lodestarworkv1alpha1.ReasonApplyFailed, "mapping %s: %v", gvk, err)
		case p.crds[gvk.GroupKind()] != "":
			res.waiting = true
			res.fail(lodestarworkv1alpha1.ReasonWaitingForCRD, "waiting for CustomResourceDefinition %s of this Work to be established", p.crds[gvk.GroupKind()])
		default:
			res.transient = err
			res.fail(lodestarworkv1alpha1.ReasonUnknownKind, "the member does not serve %s; retrying with backoff", gvk)
		}
		return manifest{}, false
	}
	res.id.Resource = mapping.Resource.Resource
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			res.fail(lodestarworkv1alpha1.ReasonInvalidManifest, "%s is namespaced and needs metadata.namespace", gvk.Kind)
			return manifest{}, false
		}
	} else {
		obj.SetNamespace("")
		res.id.Namespace = ""
	}
	res.key = objectKey(gvk.Group, gvk.Kind, obj.GetNamespace(), obj.GetName())
	if !pass.claim(res) {
		return manifest{}, false
	}
	if r.Policy != nil {
		// Denied before anything is read or written. The object still counts as
		// wanted, so a tightened policy never deletes what was applied before.
		if why := r.Policy.Denied(gvk, obj.GetNamespace(), obj); why != "" {
			res.fail(lodestarworkv1alpha1.ReasonDeniedByPolicy, "%s", why)
			return manifest{}, false
		}
	}
	if r.Watch != nil {
		if err := r.Watch(gvk); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Watching placed objects on the member", "kind", gvk)
		}
	}
	strip(obj)
	return manifest{
		obj: obj, gvk: gvk, hash: manifestHash(obj), prev: pass.records[res.key],
		ignored: p.ignored(gvk.GroupKind(), obj.GetName()), isSecret: gvk.GroupKind() == secretKind, strategy: p.strategy,
	}, true
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

// apply applies obj with the AppliedWork as an owner and returns the result.
func (r *Reconciler) apply(ctx context.Context, obj *unstructured.Unstructured, applied *lodestarworkv1alpha1.AppliedWork) (*unstructured.Unstructured, error) {
	out := withOwner(obj, applied)
	if err := r.Member.Apply(ctx, client.ApplyConfigurationFromUnstructured(out), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return nil, err
	}
	return out, nil
}

// createdBy names another manager of live, the object an apply meant to create
// returned, or is empty when the agent's apply is its only writer. An apply
// creates the object or patches one that appeared after the agent read: only
// in the second case has anyone else written it.
func createdBy(live *unstructured.Unstructured) string {
	for _, f := range live.GetManagedFields() {
		if f.Manager != FieldManager {
			return f.Manager
		}
	}
	return ""
}

// withOwner returns a copy of obj with the AppliedWork among its owners.
func withOwner(obj *unstructured.Unstructured, applied *lodestarworkv1alpha1.AppliedWork) *unstructured.Unstructured {
	out := obj.DeepCopy()
	out.SetOwnerReferences(append(out.GetOwnerReferences(), ownerReference(applied)))
	return out
}

// adopt makes the AppliedWork an owner of existing without changing anything else.
func (r *Reconciler) adopt(ctx context.Context, existing *unstructured.Unstructured, applied *lodestarworkv1alpha1.AppliedWork) (*unstructured.Unstructured, error) {
	out := &unstructured.Unstructured{}
	out.SetGroupVersionKind(existing.GroupVersionKind())
	out.SetNamespace(existing.GetNamespace())
	out.SetName(existing.GetName())
	out.SetOwnerReferences([]metav1.OwnerReference{ownerReference(applied)})
	if err := r.Member.Apply(ctx, client.ApplyConfigurationFromUnstructured(out), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return nil, err
	}
	return out, nil
}

// dryRunDiff returns the fields that applying obj would change on existing.
func (r *Reconciler) dryRunDiff(ctx context.Context, obj, existing *unstructured.Unstructured) ([]string, error) {
	out := obj.DeepCopy()
	if err := r.Member.Apply(ctx, client.ApplyConfigurationFromUnstructured(out), client.FieldOwner(FieldManager), client.ForceOwnership, client.DryRunAll); err != nil {
		return nil, err
	}
	return diff.PathsWithin(obj.Object, existing.Object, out.Object, maxDiffPaths), nil
}

// strip removes what must not be sent with an apply.
func strip(obj *unstructured.Unstructured) {
	delete(obj.Object, "status")
	for _, f := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink"} {
		unstructured.RemoveNestedField(obj.Object, "metadata", f)
	}
}

func ownerReference(applied *lodestarworkv1alpha1.AppliedWork) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: lodestarworkv1alpha1.GroupVersion.String(),
		Kind:       "AppliedWork",
		Name:       applied.Name,
		UID:        applied.UID,
		// Not a controller, and no blocking: the agent deletes what it created itself.
		Controller:         ptr.To(false),
		BlockOwnerDeletion: ptr.To(false),
	}
}

// manifestHash identifies a manifest's content (after strip): 128 bits of SHA-256
// of its JSON, whose map keys encoding/json sorts.
func manifestHash(obj *unstructured.Unstructured) string {
	b, err := json.Marshal(obj.Object)
	if err != nil {
		return "" // Cannot happen for a decoded manifest; an empty hash never matches.
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// runsOnce tells whether objects of a kind do their job once: a Job that finished
// and was removed (by its TTL, say) must not be created again, which would run it
// again, while its manifest is the same.
func runsOnce(gk schema.GroupKind) bool { return gk == jobKind }

// withIgnored returns obj with the ignored fields set to existing's values (or
// removed when existing has none), so that applying it leaves them as they are
// on the member. Written with at, a member controller's change made between the
// read and the write is never set back.
func withIgnored(obj, existing *unstructured.Unstructured, ignored []diff.Pointer) *unstructured.Unstructured {
	if existing == nil || len(ignored) == 0 {
		return obj
	}
	out := obj.DeepCopy()
	for _, p := range ignored {
		if v, ok := p.Get(existing.Object); ok {
			p.Set(out.Object, runtime.DeepCopyJSONValue(v))
		} else {
			p.Remove(out.Object)
		}
	}
	return out
}

// otherWork names another AppliedWork that owns obj, if any.
func otherWork(obj *unstructured.Unstructured) string {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Kind == "AppliedWork" && ref.APIVersion == lodestarworkv1alpha1.GroupVersion.String() {
			return ref.Name
		}
	}
	return ""
}

// ownedBy tells whether obj carries the AppliedWork as an owner.
func ownedBy(obj client.Object, applied *lodestarworkv1alpha1.AppliedWork) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == applied.UID {
			return true
		}
	}
	return false
}

// errorMessage describes err; for a Secret, only the reason and the field paths
// of the member's answer, never values.
func errorMessage(err error, isSecret bool) string {
	if !isSecret {
		return err.Error()
	}
	msg := "the member refused the Secret: " + string(apierrors.ReasonForError(err))
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Details != nil {
		var fields []string
		for _, c := range status.Status().Details.Causes {
			if c.Field != "" {
				fields = append(fields, c.Field)
			}
		}
		if len(fields) > 0 {
			msg += " (fields " + strings.Join(fields, ", ") + ")"
		}
	}
	return msg
}

// podSecurityEnforceLabel is the Pod Security admission label that enforces a
// standard on a namespace's pods.
const podSecurityEnforceLabel = "pod-security.kubernetes.io/enforce"

// ensureNamespace creates namespace ns when it does not exist.
func (r *Reconciler) ensureNamespace(ctx context.Context, ns string) error {
	err := r.Member.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
	if !apierrors.IsNotFound(err) {
		return err
	}
	created := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{lodestarworkv1alpha1.CreatedNamespaceLabel: "true"}}}
	if level := r.Policy.PodSecurity(); level != "" {
		// The member's policy: pods in namespaces the agent makes meet this
		// Pod Security Standard.
		created.Labels[podSecurityEnforceLabel] = level
	}
	if err := r.Member.Create(ctx, created); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("Created namespace for placed objects", "namespace", ns)
	return nil
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

func objectKey(group, kind, namespace, name string) string {
	return group + "/" + kind + "/" + namespace + "/" + name
}

func describe(id workv1alpha1.ResourceIdentifier) string {
	switch {
	case id.Kind == "":
		return "unknown object"
	case id.Namespace == "":
		return id.Kind + " " + id.Name
	default:
		return id.Kind + " " + id.Namespace + "/" + id.Name
	}
}

func appliedCondition(status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: lodestarworkv1alpha1.ConditionApplied, Status: status, Reason: reason, Message: message}
}

// manifestReadiness is the Available, Progressing and Degraded conditions of a manifest.
func manifestReadiness(checker *readiness.Checker, res result) []metav1.Condition {
	switch {
	case res.ranOnce:
		return []metav1.Condition{{Type: lodestarworkv1alpha1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: lodestarworkv1alpha1.ReasonRanOnce, Message: "the Job ran and is gone from the member"}}
	case res.live == nil && res.condition.Status == metav1.ConditionTrue:
		return []metav1.Condition{{Type: lodestarworkv1alpha1.ConditionAvailable, Status: metav1.ConditionFalse, Reason: lodestarworkv1alpha1.ReasonNotFound, Message: "the object is not on the member"}}
	case res.live == nil || res.condition.Status != metav1.ConditionTrue && res.condition.Reason != lodestarworkv1alpha1.ReasonOutOfSync:
		return []metav1.Condition{{Type: lodestarworkv1alpha1.ConditionAvailable, Status: metav1.ConditionFalse, Reason: lodestarworkv1alpha1.ReasonNotApplied, Message: "the object is not applied"}}
	}
	h := blockerReadiness(checker.Evaluate(res.live), res)
	status := func(b bool) metav1.ConditionStatus {
		if b {
			return metav1.ConditionTrue
		}
		return metav1.ConditionFalse
	}
	return []metav1.Condition{
		{Type: lodestarworkv1alpha1.ConditionAvailable, Status: status(h.Available), Reason: h.Reason, Message: h.Message},
		{Type: lodestarworkv1alpha1.ConditionProgressing, Status: status(h.Progressing), Reason: h.Reason, Message: h.Message},
		{Type: lodestarworkv1alpha1.ConditionDegraded, Status: status(h.Degraded), Reason: h.Reason, Message: h.Message},
	}
}
