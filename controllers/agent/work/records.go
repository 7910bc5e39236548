// The record book: each Work's AppliedWork on the member, and in its status the
// objects the agent answers for (created, taken over, or waited for), with their
// UIDs and the hash of the manifest last applied.

package work

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// appliedWork returns the member's AppliedWork for the Work, creating it if needed.
func (r *Reconciler) appliedWork(ctx context.Context, work *workv1alpha1.Work) (*lodestarworkv1alpha1.AppliedWork, error) {
	applied := &lodestarworkv1alpha1.AppliedWork{}
	err := r.Member.Get(ctx, client.ObjectKey{Name: r.appliedWorkName(work)}, applied)
	if err == nil {
		if !applied.DeletionTimestamp.IsZero() {
			// Deleted by hand on the member. The finalizer keeps it, and with it the
			// objects that name it as their owner, while the Work lives.
			ctrl.LoggerFrom(ctx).Info("The AppliedWork was deleted on the member; it is kept while the Work exists")
			if r.Recorder != nil {
				r.Recorder.Eventf(work, nil, corev1.EventTypeWarning, lodestarworkv1alpha1.EventAppliedWorkDeleted, "Apply",
					"the AppliedWork %s was deleted on the member; it is kept (finalizer %s) while this Work exists, so the placed objects stay", applied.Name, lodestarworkv1alpha1.AppliedWorkFinalizer)
			}
		}
		if err := r.onMember().HoldAppliedWork(ctx, applied, true); err != nil {
			return nil, err
		}
		return applied, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading AppliedWork: %w", err)
	}
	applied = &lodestarworkv1alpha1.AppliedWork{
		ObjectMeta: metav1.ObjectMeta{
			Name:   r.appliedWorkName(work),
			Labels: map[string]string{lodestarworkv1alpha1.HubLabel: r.HubID},
		},
		Spec: lodestarworkv1alpha1.AppliedWorkSpec{WorkNamespace: work.Namespace, WorkName: work.Name},
	}
	return applied, r.onMember().CreateAppliedWork(ctx, applied)
}

// appliedWorkName is the name of a Work's AppliedWork on the member.
func (r *Reconciler) appliedWorkName(work *workv1alpha1.Work) string {
	return names.AppliedWork(r.HubID, work.Namespace, work.Name)
}

// workFor names the Work of an AppliedWork of the agent's hub namespace; false for
// another namespace's.
func (r *Reconciler) workFor(ctx context.Context, workNamespace, appliedName string) (string, bool) {
	if name, ok := strings.CutPrefix(appliedName, r.HubID+"."+workNamespace+"."); ok && names.AppliedWork(r.HubID, workNamespace, name) == appliedName {
		return name, true
	}
	if !names.IsShortened(appliedName) {
		return "", false
	}
	applied := &lodestarworkv1alpha1.AppliedWork{}
	if err := r.Member.Get(ctx, client.ObjectKey{Name: appliedName}, applied); err != nil || applied.Spec.WorkNamespace != workNamespace ||
		applied.Labels[lodestarworkv1alpha1.HubLabel] != r.HubID {
		return "", false
	}
	return applied.Spec.WorkName, true
}
