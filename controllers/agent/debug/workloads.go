package debug

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// workloads are what a Placement's Works made in one namespace of the member,
// by UID, and the controllers between them and their pods: a pod belongs to
// the Placement when it, its controller, or its controller's controller (a
// Deployment's ReplicaSet, a CronJob's Job) is one the agent applied for the
// Placement. Ownership goes by the UIDs in the AppliedWorks, never by names:
// a member-local object that shares a placed object's name (a namesake of a
// ReportOnly manifest, one the member policy refused, one made anew by
// someone else) is not the Placement's.
type workloads struct {
	placed map[types.UID]bool
	// controllers are the controller references of the namespace's
	// ReplicaSets and Jobs, by their UID.
	controllers map[types.UID]*metav1.OwnerReference
}

// placedWorkloads reads the Placement's Works on the hub, what the agent
// applied for them in namespace (their AppliedWorks, named with hubID), and
// the namespace's ReplicaSets and Jobs from the member.
func placedWorkloads(ctx context.Context, hub, member client.Reader, hubID, clusterNamespace, namespace, placement string) (*workloads, error) {
	works := &workv1alpha1.WorkList{}
	if err := hub.List(ctx, works, client.InNamespace(clusterNamespace), client.MatchingLabels{
		placementv1alpha1.PlacementNameLabel: names.LabelValue(placement), placementv1alpha1.PlacementNamespaceLabel: namespace,
	}); err != nil {
		return nil, fmt.Errorf("reading the Placement's Works: %w", err)
	}
	w := &workloads{placed: map[types.UID]bool{}, controllers: map[types.UID]*metav1.OwnerReference{}}
	for i := range works.Items {
		applied := &lodestarworkv1alpha1.AppliedWork{}
		err := member.Get(ctx, client.ObjectKey{Name: names.AppliedWork(hubID, clusterNamespace, works.Items[i].Name)}, applied)
		if apierrors.IsNotFound(err) {
			continue // nothing applied yet
		}
		if err != nil {
			return nil, fmt.Errorf("reading what the agent applied for Work %s: %w", works.Items[i].Name, err)
		}
		for _, r := range applied.Status.AppliedResources {
			if r.Namespace == namespace && r.WaitingFor == "" {
				w.placed[r.UID] = true
			}
		}
	}
	if len(w.placed) == 0 {
		return w, nil
	}
	sets := &appsv1.ReplicaSetList{}
	if err := member.List(ctx, sets, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("reading the namespace's ReplicaSets: %w", err)
	}
	for i := range sets.Items {
		w.controllers[sets.Items[i].UID] = metav1.GetControllerOf(&sets.Items[i])
	}
	jobs := &batchv1.JobList{}
	if err := member.List(ctx, jobs, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("reading the namespace's Jobs: %w", err)
	}
	for i := range jobs.Items {
		w.controllers[jobs.Items[i].UID] = metav1.GetControllerOf(&jobs.Items[i])
	}
	return w, nil
}

// empty says whether the agent applied nothing of the Placement in the
// namespace.
func (w *workloads) empty() bool { return len(w.placed) == 0 }

// owns says whether the object of uid, with controller ref, belongs to the
// Placement: the agent applied it, or a controller up to two levels above it
// (by the UIDs of the controller references).
func (w *workloads) owns(uid types.UID, ref *metav1.OwnerReference) bool {
	for range 3 {
		if w.placed[uid] {
			return true
		}
		if ref == nil {
			return false
		}
		uid = ref.UID
		ref = w.controllers[uid]
	}
	return false
}

// ownsPod says whether the pod belongs to the Placement.
func (w *workloads) ownsPod(pod *corev1.Pod) bool {
	return w.owns(pod.UID, metav1.GetControllerOf(pod))
}

// ownsEvent says whether the event is about the Placement's objects, their
// ReplicaSets and Jobs, or their pods (pods, the namespace's pods by UID).
func (w *workloads) ownsEvent(ev *corev1.Event, pods map[types.UID]*corev1.Pod) bool {
	ref := ev.InvolvedObject
	if ref.Kind == "Pod" && ref.APIVersion == "v1" {
		pod := pods[ref.UID]
		return pod != nil && w.ownsPod(pod)
	}
	return w.owns(ref.UID, w.controllers[ref.UID])
}
