package work

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	"github.com/lodestar-dev/lodestar/internal/patch"
	"github.com/lodestar-dev/lodestar/internal/workapply"
)

// applyWorkStatus writes the Work's status on the hub; the agent is its only writer.
func (r *Reconciler) applyWorkStatus(ctx context.Context, work *workv1alpha1.Work, st workv1alpha1.WorkStatus) error {
	if equality.Semantic.DeepEqual(work.Status, st) {
		return nil // Nothing would change: no write to the hub.
	}
	// The agent alone writes a Work's status: it is replaced whole with a merge
	// patch, which costs the hub less than an apply.
	desired := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: work.Name, Namespace: work.Namespace}, Status: st}
	return patch.ReplaceStatus(ctx, r.Hub, work, desired, FieldManager, workapply.WithOrdinals)
}
