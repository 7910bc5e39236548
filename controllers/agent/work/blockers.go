package work

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/readiness"
)

// podOwners are the kinds whose readiness is their pods': when one is not
// available, the agent names what holds its pods back.
var podOwners = map[schema.GroupKind]bool{
	{Group: "apps", Kind: "Deployment"}:  true,
	{Group: "apps", Kind: "StatefulSet"}: true,
	{Group: "apps", Kind: "DaemonSet"}:   true,
	{Group: "apps", Kind: "ReplicaSet"}:  true,
	{Group: "batch", Kind: "Job"}:        true,
}

const (
	// maxPodsRead bounds the pods read to name a workload's blocker: one page of
	// a direct list (the agent keeps no pod cache).
	maxPodsRead = 50
	// maxBlocker bounds the text naming a blocker.
	maxBlocker = 300
)

// namePodBlockers sets the blocker of every result whose object owns pods, is not
// available, and has a pod that says why. Pods are listed from the member's API
// server directly, and only for such objects.
func (r *Reconciler) namePodBlockers(ctx context.Context, results []result) {
	for i := range results {
		res := &results[i]
		if res.live == nil || !podOwners[res.live.GroupVersionKind().GroupKind()] {
			continue
		}
		if r.Readiness.Evaluate(res.live).Available {
			continue
		}
		blocker, err := podBlocker(ctx, r.Member, res.live)
		if err != nil {
			ctrl.LoggerFrom(ctx).V(1).Info("Cannot read the pods of a placed object", "object", describeObject(res.live), "error", err.Error())
			continue
		}
		res.blocker = blocker
	}
}

// podBlocker returns what keeps the pods of obj (selected by its spec.selector)
// from being ready: the first pod by name with a problem, or "".
func podBlocker(ctx context.Context, c client.Reader, obj *unstructured.Unstructured) (string, error) {
	raw, found, err := unstructured.NestedMap(obj.Object, "spec", "selector")
	if err != nil || !found {
		return "", err
	}
	ls := &metav1.LabelSelector{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, ls); err != nil {
		return "", err
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil || sel.Empty() {
		return "", err
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(obj.GetNamespace()), client.MatchingLabelsSelector{Selector: sel}, client.Limit(maxPodsRead)); err != nil {
		return "", err
	}
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	for i := range pods.Items {
		if why := podProblem(&pods.Items[i]); why != "" {
			return message.Truncate(fmt.Sprintf("pod %s: %s", pods.Items[i].Name, why), maxBlocker), nil
		}
	}
	return "", nil
}

// podProblem says why a pod is not ready, from its status only (never its spec,
// so no environment value or Secret data), or "" when it is ready or on its way
// without trouble.
func podProblem(pod *corev1.Pod) string {
	if !pod.DeletionTimestamp.IsZero() {
		return ""
	}
	statuses := append(append([]corev1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
			return withMessage(w.Reason, w.Message)
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return withMessage(fmt.Sprintf("container %s exited with %d (%s)", cs.Name, t.ExitCode, t.Reason), t.Message)
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return withMessage(c.Reason, c.Message)
		}
	}
	if pod.Status.Phase == corev1.PodFailed {
		return withMessage("Failed", pod.Status.Reason+" "+pod.Status.Message)
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running != nil && !cs.Ready {
			return fmt.Sprintf("container %s is running but not ready", cs.Name)
		}
	}
	return ""
}

func withMessage(reason, msg string) string {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		return reason
	}
	return reason + ": " + msg
}

// blockerReadiness adds res's pod blocker to the message of its readiness.
func blockerReadiness(h readiness.Result, res result) readiness.Result {
	if res.blocker != "" && !h.Available {
		h.Message += "; " + res.blocker
	}
	return h
}

func describeObject(obj *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", obj.GetKind(), obj.GetNamespace(), obj.GetName())
}
