package workapply

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lodestar-dev/lodestar/internal/readiness"
)

// PodProblem says why a pod is not ready, from its status only (never its spec,
// so no environment value or Secret data), or "" when it is ready or on its way
// without trouble.
func PodProblem(pod *corev1.Pod) string {
	if !pod.DeletionTimestamp.IsZero() {
		return ""
	}
	statuses := append(append([]corev1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
			return WithMessage(w.Reason, w.Message)
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return WithMessage(fmt.Sprintf("container %s exited with %d (%s)", cs.Name, t.ExitCode, t.Reason), t.Message)
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return WithMessage(c.Reason, c.Message)
		}
	}
	if pod.Status.Phase == corev1.PodFailed {
		return WithMessage("Failed", pod.Status.Reason+" "+pod.Status.Message)
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running != nil && !cs.Ready {
			return fmt.Sprintf("container %s is running but not ready", cs.Name)
		}
	}
	return ""
}

// WithMessage is reason, with msg after it when there is one.
func WithMessage(reason, msg string) string {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		return reason
	}
	return reason + ": " + msg
}

// BlockerReadiness adds res's pod blocker to the message of its readiness.
func BlockerReadiness(h readiness.Result, res Result) readiness.Result {
	if res.Blocker != "" && !h.Available {
		h.Message += "; " + res.Blocker
	}
	return h
}

// DescribeObject names an object for a log line: kind namespace/name.
func DescribeObject(obj *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", obj.GetKind(), obj.GetNamespace(), obj.GetName())
}
