package placementrevision

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/render"
	"github.com/lodestar-dev/lodestar/internal/sealed"
)

// revisionWindow gathers rapid edits: a new PlacementRevision is made at most
// once per window per Placement; the edits in between land in the next one.
const revisionWindow = time.Second

// cacheWait bounds how long a reconcile waits for the cache to show the
// revision it made, so that the next reconcile of the Placement numbers from it
// and the work generator finds it where status.revision names it.
const cacheWait = 10 * time.Second

// revision returns the PlacementRevision of the rendering: the one of its hash,
// made when new. Within revisionWindow of the newest one, a new rendering waits
// (the returned duration) and the revision status.revision names stays.
func (r *Reconciler) revision(ctx context.Context, placement *placementv1alpha1.Placement, rd rendering) (*placementv1alpha1.PlacementRevision, time.Duration, error) {
	revs, err := lookup.Revisions(ctx, r.Client, placement)
	if err != nil {
		return nil, 0, err
	}
	// The revision holds its Secrets without their values; those are in the
	// revision's data Secret, written first (and again, should it have been
	// changed or deleted).
	sealedManifests, data, err := sealed.Seal(rd.manifests)
	if err != nil {
		return nil, 0, err
	}
	if err := r.writeRevisionData(ctx, placement, rd.hash, data); err != nil {
		return nil, 0, err
	}
	if i := slices.IndexFunc(revs, func(rv placementv1alpha1.PlacementRevision) bool { return rv.Spec.Hash == rd.hash }); i >= 0 {
		return &revs[i], 0, r.renderedAt(ctx, &revs[i], placement.Generation)
	}
	var previous *placementv1alpha1.PlacementRevision
	var number int64
	if len(revs) > 0 {
		previous, number = &revs[0], revs[0].Spec.Revision
		if wait := time.Until(previous.CreationTimestamp.Add(revisionWindow)); wait > 0 {
			if i := slices.IndexFunc(revs, func(rv placementv1alpha1.PlacementRevision) bool { return rv.Name == placement.Status.Revision }); i >= 0 {
				return &revs[i], wait, nil
			}
			return previous, wait, nil
		}
	}
	if ro := placement.Status.Rollout; ro != nil {
		number = max(number, ro.TargetRevisionNumber)
	}
	rev := &placementv1alpha1.PlacementRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name: names.Revision(placement.Name, rd.hash), Namespace: placement.Namespace,
			Annotations: map[string]string{placementv1alpha1.RevisionGenerationAnnotation: strconv.FormatInt(placement.Generation, 10)},
			Labels: map[string]string{
				placementv1alpha1.PlacementNameLabel: names.LabelValue(placement.Name),
				placementv1alpha1.RevisionHashLabel:  rd.hash,
			},
		},
		Spec: placementv1alpha1.PlacementRevisionSpec{
			Placement: placement.Name, Revision: number + 1, Hash: rd.hash,
			ChangeCause: changeCause(placement, previous, rendering{manifests: sealedManifests, overrides: rd.overrides, division: rd.division}), Overrides: rd.overrides, Division: rd.division,
		},
	}
	if err := render.SetRevisionManifests(&rev.Spec, sealedManifests); err != nil {
		return nil, 0, err
	}
	if err := controllerutil.SetControllerReference(placement, rev, r.Client.Scheme()); err != nil {
		return nil, 0, err
	}
	if err := r.Client.Create(ctx, rev); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, 0, fmt.Errorf("creating PlacementRevision %s: %w", rev.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("New revision", "revision", rev.Spec.Revision, "hash", rd.hash, "cause", rev.Spec.ChangeCause)
	return rev, 0, r.awaitCached(ctx, rev)
}

// renderedAt records on a revision that the Placement's generation rendered
// to it (RevisionGenerationAnnotation), when that is newer than what it says.
func (r *Reconciler) renderedAt(ctx context.Context, rev *placementv1alpha1.PlacementRevision, generation int64) error {
	if was, known := renderedGeneration(rev); known && was >= generation {
		return nil
	}
	body := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, placementv1alpha1.RevisionGenerationAnnotation, strconv.FormatInt(generation, 10))
	if err := r.Client.Patch(ctx, rev, client.RawPatch(types.MergePatchType, body)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("recording generation %d on PlacementRevision %s: %w", generation, rev.Name, err)
	}
	return nil
}

// awaitCached waits until the cache shows rev (made by this reconcile, or by an
// earlier one when it already existed): the Placement's next reconcile numbers
// from it, and the work generator, which shares the cache, finds it.
func (r *Reconciler) awaitCached(ctx context.Context, rev *placementv1alpha1.PlacementRevision) error {
	key := client.ObjectKeyFromObject(rev)
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, cacheWait, true, func(ctx context.Context) (bool, error) {
		got := &placementv1alpha1.PlacementRevision{}
		if err := r.Client.Get(ctx, key, got); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		*rev = *got
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for PlacementRevision %s in the cache: %w", key.Name, err)
	}
	return nil
}

// changeCause is the Placement's change-cause annotation, or what changed since
// the previous revision.
func changeCause(placement *placementv1alpha1.Placement, previous *placementv1alpha1.PlacementRevision, rd rendering) string {
	if cause := placement.Annotations[placementv1alpha1.ChangeCauseAnnotation]; cause != "" {
		return message.Truncate(cause, 1024)
	}
	if previous == nil {
		return "first revision: " + message.Count(len(rd.manifests), "object")
	}
	before := map[string][]byte{}
	if manifests, err := render.RevisionManifests(&previous.Spec); err == nil {
		for _, m := range manifests {
			before[manifestKey(m.Raw)] = m.Raw
		}
	}
	var added, changed []string
	for _, m := range rd.manifests {
		k := manifestKey(m.Raw)
		old, ok := before[k]
		switch {
		case !ok:
			added = append(added, k)
		case !bytes.Equal(old, m.Raw):
			changed = append(changed, k)
		}
		delete(before, k)
	}
	removed := slices.Sorted(func(yield func(string) bool) {
		for k := range before {
			if !yield(k) {
				return
			}
		}
	})
	var parts []string
	if !equality.Semantic.DeepEqual(previous.Spec.Overrides, rd.overrides) {
		parts = append(parts, "changed overrides")
	}
	if !equality.Semantic.DeepEqual(previous.Spec.Division, rd.division) {
		parts = append(parts, "changed the division of replicas")
	}
	for _, p := range []struct {
		verb string
		keys []string
	}{{"changed", changed}, {"added", added}, {"removed", removed}} {
		if len(p.keys) > 0 {
			parts = append(parts, p.verb+" "+message.List(p.keys, 5, ", "))
		}
	}
	return message.Truncate(strings.Join(parts, "; "), 1024)
}

// manifestKey is Kind/name of a rendered manifest.
func manifestKey(raw []byte) string {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		return "?"
	}
	return u.GetKind() + "/" + u.GetName()
}

// historyBytes bounds the manifests a Placement's kept revisions carry: past it,
// older revisions are pruned whatever revisionHistoryLimit says. With the
// revision window it bounds what edits of one Placement can store in etcd.
const historyBytes = 8 << 20

// revisionBytes is about what a revision takes in etcd.
func revisionBytes(rv *placementv1alpha1.PlacementRevision) int {
	n := len(rv.Spec.CompressedManifests)
	for _, m := range rv.Spec.Manifests {
		n += len(m.Raw)
	}
	return n
}

// historyLength is how many of revs (newest first) are kept: at most limit, and
// no more than fit in historyBytes (the newest always).
func historyLength(revs []placementv1alpha1.PlacementRevision, limit int) int {
	used := 0
	for i := range revs {
		if used += revisionBytes(&revs[i]); i >= limit || (i > 0 && used > historyBytes) {
			return i
		}
	}
	return len(revs)
}

// prune deletes the revisions beyond spec.revisionHistoryLimit (and the byte
// budget) that no Work holds and the rollout does not name (its target and
// stable revisions), nor status.revision.
func (r *Reconciler) prune(ctx context.Context, placement *placementv1alpha1.Placement, current string) error {
	limit := 10
	if l := placement.Spec.RevisionHistoryLimit; l != nil {
		limit = int(*l)
	}
	revs, err := lookup.Revisions(ctx, r.Client, placement)
	if err != nil {
		return err
	}
	if limit = historyLength(revs, limit); len(revs) <= limit {
		return nil
	}
	works, err := lookup.Works(ctx, r.Client, placement, client.UnsafeDisableDeepCopy)
	if err != nil {
		return err
	}
	keep := map[string]bool{current: true}
	for i := range works {
		keep[works[i].Annotations[placementv1alpha1.RevisionAnnotation]] = true
	}
	if ro := placement.Status.Rollout; ro != nil {
		keep[ro.TargetRevision], keep[ro.StableRevision] = true, true
	}
	for i := range revs[limit:] {
		rv := &revs[limit+i]
		if keep[rv.Spec.Hash] || keep[rv.Name] {
			continue
		}
		if err := r.Client.Delete(ctx, rv); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting PlacementRevision %s: %w", rv.Name, err)
		}
		data := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: placement.Namespace, Name: names.RevisionData(placement.Name, rv.Spec.Hash)}}
		if err := r.Client.Delete(ctx, data); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the data Secret of PlacementRevision %s: %w", rv.Name, err)
		}
		ctrl.LoggerFrom(ctx).V(1).Info("Pruned revision", "revision", rv.Spec.Revision)
	}
	return nil
}

// maxRevisionData is the most Secret values a revision keeps: what one hub
// Secret holds (1 MiB), less room for its metadata.
const maxRevisionData = 1<<20 - 16<<10

// writeRevisionData makes the revision's data Secret (the values of the
// Secrets it holds, sealed.Seal's data) what data says: created, or written
// again when it differs. Owned by the Placement, it goes with it; pruning a
// revision deletes it.
func (r *Reconciler) writeRevisionData(ctx context.Context, placement *placementv1alpha1.Placement, hash string, data map[string][]byte) error {
	if len(data) == 0 {
		return nil
	}
	size := 0
	for k, v := range data {
		size += len(k) + len(v)
	}
	if size > maxRevisionData {
		return &invalidError{placementv1alpha1.ReasonWorkTooLarge, fmt.Errorf(
			"the selected Secrets hold %d bytes of values, more than the %d a revision keeps (in one hub Secret); place the largest of them with a Placement of their own", size, maxRevisionData)}
	}
	name := names.RevisionData(placement.Name, hash)
	current, resourceVersion, err := lookup.RevisionData(ctx, r.Client, placement.Namespace, name)
	if err == nil && maps.EqualFunc(current, data, bytes.Equal) {
		return nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: placement.Namespace, Labels: map[string]string{
			placementv1alpha1.PlacementNameLabel: names.LabelValue(placement.Name),
			placementv1alpha1.RevisionDataLabel:  names.Revision(placement.Name, hash),
		}},
		Type: placementv1alpha1.RevisionDataSecretType,
		Data: data,
	}
	if err := controllerutil.SetControllerReference(placement, secret, r.Client.Scheme()); err != nil {
		return err
	}
	if apierrors.IsNotFound(err) {
		if err := r.Client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the revision's data Secret %s: %w", name, err)
		}
		return nil
	}
	// Changed by someone else: ours again (the revision's digests say which
	// values are ours).
	secret.ResourceVersion = resourceVersion
	if err := r.Client.Update(ctx, secret); err != nil {
		return fmt.Errorf("writing the revision's data Secret %s again: %w", name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Wrote a revision's data Secret again: it had been changed", "secret", name)
	return nil
}
