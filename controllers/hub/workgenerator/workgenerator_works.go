package workgenerator

import (
	"context"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/clusterworks"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/rollout"
	"github.com/lodestar-dev/lodestar/internal/workshape"
)

// workWriters is how many clusters' Works of one Placement are written at once.
const workWriters = 16

// writeWorks gives each selected cluster's Works what the gate says they
// carry; WorkSynchronized says when that fails.
func (r *Reconciler) writeWorks(ctx context.Context, s *scope) (ctrl.Result, error) {
	err := r.writeAll(ctx, s)
	if err != nil {
		s.st.set(metav1.ConditionFalse, placementv1alpha1.ReasonWorkFailed, "%v", err)
	}
	return ctrl.Result{}, err
}

func (r *Reconciler) writeAll(ctx context.Context, s *scope) error {
	var eg errgroup.Group
	eg.SetLimit(workWriters)
	for _, cluster := range s.decided.Clusters {
		c, ok, err := s.contentFor(cluster)
		if err != nil {
			return err
		}
		if !ok {
			continue // waits for the gate
		}
		parts := s.works[cluster]
		since := s.now.UTC().Format(time.RFC3339)
		rev, _ := clusterworks.Revision(parts)
		if rev == c.Hash {
			since = parts[0].Annotations[placementv1alpha1.RevisionSinceAnnotation]
		}
		desired := workshape.Desired(s.placement, cluster, c, since, s.annotations, r.Scope.ManagerName())
		eg.Go(func() error {
			wrote, err := r.writeCluster(ctx, s.placement, parts, desired)
			if err != nil {
				return fmt.Errorf("writing the Works of cluster %s: %w", cluster, err)
			}
			if wrote {
				s.wroteTo(cluster)
			}
			if wrote && rev != c.Hash {
				e := rollout.Expectation{Revision: c.Hash, Since: rollout.ParseTime(since, s.now)}
				r.expected.Store(expectationKey(s.placement, cluster), e, e.Since)
			}
			if wrote && c.Shares != "" && (len(parts) == 0 || parts[0].Annotations[placementv1alpha1.SharesAnnotation] != c.Shares) {
				r.sharesWritten.Store(expectationKey(s.placement, cluster), c.Shares, s.now)
			}
			return nil
		})
	}
	return eg.Wait()
}

// writeCluster brings a cluster's Works (parts, read-only cache objects) to
// desired, and removes the parts beyond the desired ones once those report
// their objects applied. It tells whether it wrote.
func (r *Reconciler) writeCluster(ctx context.Context, placement *placementv1alpha1.Placement, parts, desired []*workv1alpha1.Work) (bool, error) {
	wrote := false
	for _, d := range desired {
		i := slices.IndexFunc(parts, func(w *workv1alpha1.Work) bool { return w.Name == d.Name })
		if i < 0 {
			// Already there means written by an earlier reconcile that the
			// cache does not show yet (its event brings the next one), or
			// without this manager's label, which the cache does not show.
			if err := r.Client.Create(ctx, d); apierrors.IsAlreadyExists(err) {
				if err := r.adopt(ctx, placement, d); err != nil {
					return wrote, err
				}
			} else if err != nil {
				return wrote, err
			}
			wrote = true
			continue
		}
		cur := parts[i]
		if cur.Labels[placementv1alpha1.PlacementNamespaceLabel] != placement.Namespace || cur.Labels[placementv1alpha1.PlacementNameLabel] != names.LabelValue(placement.Name) {
			return wrote, fmt.Errorf("the Work %s belongs to another Placement", klog.KObj(cur))
		}
		if workshape.Holds(cur, d) {
			continue
		}
		if err := r.Client.Patch(ctx, workshape.Merged(cur, d), client.MergeFrom(cur)); err != nil {
			return wrote, err
		}
		wrote = true
	}
	extra := slices.DeleteFunc(slices.Clone(parts), func(w *workv1alpha1.Work) bool { return clusterworks.Part(w) < len(desired) })
	if len(extra) == 0 || wrote || clusterworks.Applied(parts) != metav1.ConditionTrue {
		return wrote, nil // the parts beyond go once the others report their objects applied
	}
	for _, w := range extra {
		if err := r.deleteWork(ctx, w); err != nil {
			return wrote, err
		}
	}
	return true, nil
}

// adopt labels with this manager's name the Work of d's name that exists
// without a manager's label: one an older hub manager wrote (LabelWorks labels
// those there are when the manager starts; an older replica may write more
// until it hands over). A Work of another Placement or another manager is an
// error.
func (r *Reconciler) adopt(ctx context.Context, placement *placementv1alpha1.Placement, d *workv1alpha1.Work) error {
	cur := &metav1.PartialObjectMetadata{}
	cur.SetGroupVersionKind(workv1alpha1.SchemeGroupVersion.WithKind("Work"))
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(d), cur); err != nil {
		return client.IgnoreNotFound(err)
	}
	manager, labelled := cur.Labels[placementv1alpha1.HubManagerLabel]
	switch {
	case cur.Labels[placementv1alpha1.PlacementNamespaceLabel] != placement.Namespace || cur.Labels[placementv1alpha1.PlacementNameLabel] != names.LabelValue(placement.Name):
		return fmt.Errorf("the Work %s belongs to another Placement", klog.KObj(cur))
	case labelled && manager != r.Scope.ManagerName():
		return fmt.Errorf("the Work %s belongs to hub manager %q (label %s)", klog.KObj(cur), manager, placementv1alpha1.HubManagerLabel)
	case labelled:
		return nil // written, and not in the cache yet
	}
	body := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, placementv1alpha1.HubManagerLabel, r.Scope.ManagerName())
	if err := r.Client.Patch(ctx, cur, client.RawPatch(types.MergePatchType, body)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("labelling Work %s with its hub manager: %w", klog.KObj(cur), err)
	}
	return nil
}

// removeLeft carries out what rollout.Depart decides of the clusters the
// Placement left: withdraws the endpoints of those whose traffic moves, and
// removes the Works of those that may go.
func (r *Reconciler) removeLeft(ctx context.Context, s *scope) (ctrl.Result, error) {
	leaving, selected := rollout.ByObject(s.leaving, s.clusters, s.works, s.renderer.Surging())
	s.removal = rollout.Depart(leaving, selected, s.strategy, s.now)
	for _, cluster := range s.removal.Withdraw {
		if err := r.withdraw(ctx, s, cluster); err != nil {
			return ctrl.Result{}, err
		}
	}
	for _, cluster := range s.removal.Remove {
		forced := slices.Contains(s.removal.Forced, cluster)
		ctrl.LoggerFrom(ctx).Info("Removing the Works of a cluster the Placement left", "cluster", cluster, "forced", forced, "sets", s.decided.Sets)
		for _, w := range s.works[cluster] {
			if err := r.deleteWork(ctx, w); err != nil {
				return ctrl.Result{}, err
			}
			if kept := r.noteRetainedClaims(s.placement, w); len(kept) > 0 {
				if s.retained == nil {
					s.retained = map[string][]string{}
				}
				s.retained[cluster] = append(s.retained[cluster], kept...)
			}
		}
		if forced {
			r.Recorder.Eventf(s.placement, nil, corev1.EventTypeWarning, placementv1alpha1.ReasonProgressDeadlineExceeded, "Remove",
				"removed the Works of cluster %s, which the Placement left, before the clusters added were Available (progress deadline %s)", cluster, s.strategy.Deadline)
		}
		if why, ok := s.removal.Overruled[cluster]; ok {
			r.Recorder.Eventf(s.placement, nil, corev1.EventTypeWarning, placementv1alpha1.ReasonDrainOverruled, "Remove",
				"removed the Works of cluster %s, which a forced drain overruled spec.strategy.disruptionBudget for: %s", cluster, why)
		}
	}
	return ctrl.Result{}, nil
}

// deleteWork deletes a Work of the Placement (a read-only cache object) that is
// not being deleted yet.
func (r *Reconciler) deleteWork(ctx context.Context, w *workv1alpha1.Work) error {
	if !w.DeletionTimestamp.IsZero() {
		return nil
	}
	if err := r.Client.Delete(ctx, &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: w.Namespace}}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting Work %s: %w", klog.KObj(w), err)
	}
	ctrl.LoggerFrom(ctx).Info("Deleted Work", "work", klog.KObj(w))
	return nil
}

// leavingNamed is the cluster left of that name, nil when there is none.
func (s *scope) leavingNamed(cluster string) *rollout.Leaving {
	if i := slices.IndexFunc(s.leaving, func(l rollout.Leaving) bool { return l.Name == cluster }); i >= 0 {
		return &s.leaving[i]
	}
	return nil
}
