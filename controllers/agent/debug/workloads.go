package debug

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/clusterworks"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// objectKey names an object of one namespace by group, kind and name.
type objectKey struct{ group, kind, name string }

// workloads are a Placement's objects in one namespace of the member and the
// controllers between them and their pods: a pod belongs to the Placement
// when it, its controller, or its controller's controller (a Deployment's
// ReplicaSet, a CronJob's Job) is one of the placed objects.
type workloads struct {
	placed map[objectKey]bool
	// controllers are the controller references of the namespace's
	// ReplicaSets and Jobs, by kind and name.
	controllers map[objectKey]*metav1.OwnerReference
}

// placedWorkloads reads the Placement's objects in namespace from its Works
// on the hub, and the namespace's ReplicaSets and Jobs from the member.
func placedWorkloads(ctx context.Context, hub, member client.Reader, clusterNamespace, namespace, placement string) (*workloads, error) {
	works := &workv1alpha1.WorkList{}
	if err := hub.List(ctx, works, client.InNamespace(clusterNamespace), client.MatchingLabels{
		placementv1alpha1.PlacementNameLabel: names.LabelValue(placement), placementv1alpha1.PlacementNamespaceLabel: namespace,
	}); err != nil {
		return nil, fmt.Errorf("reading the Placement's Works: %w", err)
	}
	w := &workloads{placed: map[objectKey]bool{}, controllers: map[objectKey]*metav1.OwnerReference{}}
	for i := range works.Items {
		for _, id := range clusterworks.ManifestIDs(&works.Items[i]) {
			if id.Kind != "" && id.Namespace == namespace {
				w.placed[objectKey{id.Group, id.Kind, id.Name}] = true
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
		w.controllers[objectKey{appsv1.GroupName, "ReplicaSet", sets.Items[i].Name}] = metav1.GetControllerOf(&sets.Items[i])
	}
	jobs := &batchv1.JobList{}
	if err := member.List(ctx, jobs, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("reading the namespace's Jobs: %w", err)
	}
	for i := range jobs.Items {
		w.controllers[objectKey{batchv1.GroupName, "Job", jobs.Items[i].Name}] = metav1.GetControllerOf(&jobs.Items[i])
	}
	return w, nil
}

// empty says whether the Placement places nothing in the namespace.
func (w *workloads) empty() bool { return len(w.placed) == 0 }

// owns says whether the object (group, kind, name) with controller ref belongs to
// the Placement: it is placed, or a controller up to two levels above it is.
func (w *workloads) owns(group, kind, name string, ref *metav1.OwnerReference) bool {
	key := objectKey{group, kind, name}
	for range 3 {
		if w.placed[key] {
			return true
		}
		if ref == nil {
			return false
		}
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil {
			return false
		}
		key = objectKey{gv.Group, ref.Kind, ref.Name}
		ref = w.controllers[key]
	}
	return false
}

// ownsPod says whether the pod belongs to the Placement.
func (w *workloads) ownsPod(pod *corev1.Pod) bool {
	return w.owns("", "Pod", pod.Name, metav1.GetControllerOf(pod))
}

// ownsEvent says whether the event is about the Placement's objects, their
// ReplicaSets and Jobs, or their pods (by pods, the namespace's pods by name).
func (w *workloads) ownsEvent(ev *corev1.Event, pods map[string]*corev1.Pod) bool {
	ref := ev.InvolvedObject
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return false
	}
	if ref.Kind == "Pod" && gv.Group == "" {
		pod := pods[ref.Name]
		return pod != nil && pod.UID == ref.UID && w.ownsPod(pod)
	}
	return w.owns(gv.Group, ref.Kind, ref.Name, w.controllers[objectKey{gv.Group, ref.Kind, ref.Name}])
}
