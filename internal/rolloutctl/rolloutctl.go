// Package rolloutctl is what `kubectl lodestar rollout` does on the hub: read a
// Placement's rollout, list its revisions, pause, resume, approve, and undo.
package rolloutctl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementac "github.com/lodestar-dev/lodestar/api/client/applyconfiguration/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/api/client/clientset/versioned"
	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/render"
	"github.com/lodestar-dev/lodestar/internal/sealed"
)

// ErrRolloutFailed is returned when a rollout stopped on a breached progress
// deadline or failure budget.
var ErrRolloutFailed = errors.New("the rollout failed")

// Report is where a Placement's rollout is.
type Report struct {
	// Message is one line for a person.
	Message string
	// Done is set when the rollout is complete.
	Done bool
	// Failed is set when it stopped on its deadline or failure budget.
	Failed bool
}

// Status reads the Placement's rollout.
func Status(ctx context.Context, c client.Client, key client.ObjectKey) (Report, error) {
	p := &placementv1alpha1.Placement{}
	if err := c.Get(ctx, key, p); err != nil {
		return Report{}, err
	}
	cond := meta.FindStatusCondition(p.Status.Conditions, placementv1alpha1.ProgressingCondition)
	if cond == nil || cond.ObservedGeneration != p.Generation {
		return Report{Message: fmt.Sprintf("waiting for the rollout of generation %d to start", p.Generation)}, nil
	}
	r := Report{Message: fmt.Sprintf("%s: %s", cond.Reason, cond.Message)}
	switch cond.Reason {
	case placementv1alpha1.ReasonRolloutComplete, placementv1alpha1.ReasonRolloutCompleteWithFailures:
		r.Done = true
	case placementv1alpha1.ReasonProgressDeadlineExceeded, placementv1alpha1.ReasonFailureBudgetExceeded:
		r.Failed = true
	}
	return r, nil
}

// Wait reports the rollout each time it changes until it is complete (nil), it
// failed (ErrRolloutFailed) or the timeout passes.
func Wait(ctx context.Context, c client.Client, key client.ObjectKey, timeout, poll time.Duration, progress func(string)) error {
	last := ""
	var failed bool
	err := wait.PollUntilContextTimeout(ctx, poll, timeout, true, func(ctx context.Context) (bool, error) {
		r, err := Status(ctx, c, key)
		if err != nil {
			if ctx.Err() != nil {
				// The time ran out during the read (the client's rate
				// limiter says so in its own words): a time-out.
				return false, ctx.Err()
			}
			return false, err
		}
		if r.Message != last {
			progress(r.Message)
			last = r.Message
		}
		failed = r.Failed
		return r.Done || r.Failed, nil
	})
	if failed {
		return ErrRolloutFailed
	}
	if err != nil && wait.Interrupted(err) {
		if last == "" {
			last = "its status was not read in time"
		}
		return fmt.Errorf("timed out: the rollout is not complete after %s: %s", timeout, last)
	}
	return err
}

// History lists the Placement's revisions, oldest first, with the API
// module's typed client.
func History(ctx context.Context, cs versioned.Interface, key client.ObjectKey) ([]placementv1alpha1.PlacementRevision, error) {
	list, err := cs.PlacementV1alpha1().PlacementRevisions(key.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{placementv1alpha1.PlacementNameLabel: names.LabelValue(key.Name)}).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("listing PlacementRevisions: %w", err)
	}
	out := slices.DeleteFunc(list.Items, func(r placementv1alpha1.PlacementRevision) bool { return r.Spec.Placement != key.Name })
	slices.SortFunc(out, func(a, b placementv1alpha1.PlacementRevision) int { return int(a.Spec.Revision - b.Spec.Revision) })
	return out, nil
}

// FieldManager is the CLI's field manager of what it applies.
const FieldManager = "kubectl-lodestar"

// SetPaused sets or clears spec.strategy.paused, applied (server-side) as
// FieldManager with the API module's apply configurations: the field alone,
// whoever wrote the rest.
func SetPaused(ctx context.Context, cs versioned.Interface, key client.ObjectKey, paused bool) error {
	_, err := cs.PlacementV1alpha1().Placements(key.Namespace).Apply(ctx,
		placementac.Placement(key.Name, key.Namespace).WithSpec(placementac.PlacementSpec().WithStrategy(placementac.RolloutStrategy().WithPaused(paused))),
		metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	return err
}

// Approve creates a RolloutApproval of the Placement's target revision for a
// stage, or for clusters. What would approve nothing is an error: a stage the
// strategy does not have or that needs no approval, a stage of a strategy that
// is not Staged, clusters of one that is neither Staged nor External, and a
// rollout that is complete (its target is stable: the next change is not
// rendered yet). wait is how long to wait for a rollout to approve when it is
// complete (0: do not wait), as right after the change that starts it.
func Approve(ctx context.Context, c client.Client, key client.ObjectKey, stage string, clusters []string, wait time.Duration) (*placementv1alpha1.RolloutApproval, error) {
	if (stage == "") == (len(clusters) == 0) {
		return nil, errors.New("name a stage or clusters to approve")
	}
	var p *placementv1alpha1.Placement
	err := pollUntil(ctx, wait, func() (bool, error) {
		var err error
		p, err = approvable(ctx, c, key, stage, len(clusters) > 0)
		var complete *completeError
		return !errors.As(err, &complete), err
	})
	if err != nil {
		return nil, err
	}
	target := p.Status.Rollout.TargetRevision
	what := stage
	if what == "" {
		sorted := slices.Sorted(slices.Values(clusters))
		what = "clusters-" + names.Hash(strings.Join(sorted, ","))[:8]
	}
	a := &placementv1alpha1.RolloutApproval{
		ObjectMeta: metav1.ObjectMeta{Name: names.LabelValue(target + "-" + what), Namespace: key.Namespace},
		Spec:       placementv1alpha1.RolloutApprovalSpec{Placement: key.Name, Revision: target, Stage: stage, Clusters: clusters},
	}
	if err := c.Create(ctx, a); err != nil && !apierrors.IsAlreadyExists(err) {
		if apierrors.IsForbidden(err) {
			return nil, fmt.Errorf("you may not approve rollouts in namespace %s: approving is creating a RolloutApproval, which the ClusterRole lodestar:approver grants "+
				"(a platform admin binds it to whoever approves; tenants may only read approvals): %w", key.Namespace, err)
		}
		return nil, fmt.Errorf("creating RolloutApproval %s: %w", a.Name, err)
	}
	return a, nil
}

// completeError is a rollout with nothing left to approve.
type completeError struct{ msg string }

func (e *completeError) Error() string { return e.msg }

// approvable reads the Placement and says why an approval of stage (or of
// clusters) would approve nothing; a complete rollout is a *completeError.
func approvable(ctx context.Context, c client.Client, key client.ObjectKey, stage string, byCluster bool) (*placementv1alpha1.Placement, error) {
	p := &placementv1alpha1.Placement{}
	if err := c.Get(ctx, key, p); err != nil {
		return nil, err
	}
	st := p.Spec.Strategy
	switch {
	case stage != "" && st.Type != placementv1alpha1.RolloutStaged:
		return nil, fmt.Errorf("placement %s has strategy %s: only a Staged strategy has stages to approve", key, cmp.Or(string(st.Type), string(placementv1alpha1.RolloutAllAtOnce)))
	case stage != "":
		i := slices.IndexFunc(st.Stages, func(s placementv1alpha1.RolloutStage) bool { return s.Name == stage })
		if i < 0 {
			have := make([]string, len(st.Stages))
			for j := range st.Stages {
				have[j] = st.Stages[j].Name
			}
			return nil, fmt.Errorf("placement %s has no stage %q (its stages: %s)", key, stage, strings.Join(have, ", "))
		}
		if st.Stages[i].Approval != placementv1alpha1.ApprovalRequired {
			return nil, fmt.Errorf("stage %q of placement %s needs no approval (approval: %s)", stage, key, cmp.Or(string(st.Stages[i].Approval), string(placementv1alpha1.ApprovalNone)))
		}
	case byCluster && st.Type != placementv1alpha1.RolloutStaged && st.Type != placementv1alpha1.RolloutExternal:
		return nil, fmt.Errorf("placement %s has strategy %s: clusters are approved under an External or Staged strategy", key, cmp.Or(string(st.Type), string(placementv1alpha1.RolloutAllAtOnce)))
	}
	ro := p.Status.Rollout
	if ro == nil || ro.TargetRevision == "" {
		return nil, &completeError{fmt.Sprintf("placement %s has no rollout yet", key)}
	}
	if ro.TargetRevision == ro.StableRevision {
		return nil, &completeError{fmt.Sprintf("the rollout of revision %d of placement %s is complete: nothing waits for an approval "+
			"(right after a change, give it time to be rendered, or pass --wait)", ro.TargetRevisionNumber, key)}
	}
	return p, nil
}

// pollUntil calls f until it is done or fails, every second for at most d (once
// when d is 0).
func pollUntil(ctx context.Context, d time.Duration, f func() (done bool, err error)) error {
	deadline := time.Now().Add(d)
	for {
		done, err := f()
		if done || !time.Now().Before(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// Undo writes the objects of an earlier revision back to the Placement's
// namespace, as `kubectl rollout undo` rewrites a Deployment's template: the hub
// stays the source of truth, and the Placement rolls that revision out through
// its strategy's gates. toRevision 0 is the revision before the target. Objects
// the earlier revision does not have are left as they are.
func Undo(ctx context.Context, c client.Client, cs versioned.Interface, key client.ObjectKey, toRevision int64) (*placementv1alpha1.PlacementRevision, error) {
	p := &placementv1alpha1.Placement{}
	if err := c.Get(ctx, key, p); err != nil {
		return nil, err
	}
	revs, err := History(ctx, cs, key)
	if err != nil {
		return nil, err
	}
	var current int64
	if p.Status.Rollout != nil {
		current = p.Status.Rollout.TargetRevisionNumber
	}
	var to *placementv1alpha1.PlacementRevision
	for i := range revs {
		r := &revs[i]
		if (toRevision > 0 && r.Spec.Revision == toRevision) || (toRevision == 0 && r.Spec.Revision < current) {
			to = r
		}
	}
	if to == nil {
		if toRevision > 0 {
			return nil, fmt.Errorf("placement %s has no revision %d (kept: %s)", key, toRevision, numbers(revs))
		}
		return nil, fmt.Errorf("placement %s has no revision before %d", key, current)
	}
	manifests, err := revisionObjects(ctx, c, key.Namespace, to)
	if err != nil {
		return nil, err
	}
	for _, m := range manifests {
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(m.Raw); err != nil {
			return nil, fmt.Errorf("revision %d holds a manifest that does not decode: %w", to.Spec.Revision, err)
		}
		obj.SetNamespace(key.Namespace)
		if err := replace(ctx, c, obj); err != nil {
			return nil, fmt.Errorf("writing %s %s back: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	// The revision's overrides too, so that the rendering is that revision again.
	if !equality.Semantic.DeepEqual(p.Spec.Overrides, to.Spec.Overrides) {
		patch := client.MergeFrom(p.DeepCopy())
		p.Spec.Overrides = to.Spec.Overrides
		if err := c.Patch(ctx, p, patch); err != nil {
			return nil, fmt.Errorf("writing the overrides of revision %d back: %w", to.Spec.Revision, err)
		}
	}
	return to, nil
}

// revisionObjects are the objects of a revision as they were selected: its
// Secrets with their values, read from the revision's data Secret as the
// user (who must be allowed to read it, as to read the Secrets themselves).
func revisionObjects(ctx context.Context, c client.Client, namespace string, rev *placementv1alpha1.PlacementRevision) ([]runtime.RawExtension, error) {
	manifests, err := render.RevisionManifests(&rev.Spec)
	if err != nil || !sealed.Sealed(manifests) {
		return manifests, err
	}
	name := names.RevisionData(rev.Spec.Placement, rev.Spec.Hash)
	data, _, err := lookup.RevisionData(ctx, c, namespace, name)
	if err != nil {
		return nil, fmt.Errorf("revision %d holds Secrets, whose values are in Secret %s: %w", rev.Spec.Revision, name, err)
	}
	if manifests, err = sealed.Unseal(manifests, data); err != nil {
		return nil, fmt.Errorf("revision %d: %w; nothing was written back", rev.Spec.Revision, err)
	}
	return manifests, nil
}

// replace writes obj over the hub object of its name, keeping what belongs to the
// hub copy (identity, owners, finalizers, status), or creates it.
func replace(ctx context.Context, c client.Client, obj *unstructured.Unstructured) error {
	current := &unstructured.Unstructured{}
	current.SetGroupVersionKind(obj.GroupVersionKind())
	err := c.Get(ctx, client.ObjectKeyFromObject(obj), current)
	if apierrors.IsNotFound(err) {
		return c.Create(ctx, obj)
	}
	if err != nil {
		return err
	}
	obj.SetResourceVersion(current.GetResourceVersion())
	obj.SetUID(current.GetUID())
	obj.SetOwnerReferences(current.GetOwnerReferences())
	obj.SetFinalizers(current.GetFinalizers())
	if status, ok := current.Object["status"]; ok {
		obj.Object["status"] = status
	}
	return c.Update(ctx, obj)
}

func numbers(revs []placementv1alpha1.PlacementRevision) string {
	out := make([]string, 0, len(revs))
	for _, r := range revs {
		out = append(out, fmt.Sprint(r.Spec.Revision))
	}
	return strings.Join(out, ", ")
}
