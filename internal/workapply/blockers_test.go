package workapply

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodProblem(t *testing.T) {
	waiting := func(reason, msg string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: "web", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}
	}
	for _, tc := range []struct {
		name string
		st   corev1.PodStatus
		want string
	}{
		{"image pull", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{waiting("ImagePullBackOff", `Back-off pulling image "web:nope"`)}},
			`ImagePullBackOff: Back-off pulling image "web:nope"`},
		{"init container first", corev1.PodStatus{
			InitContainerStatuses: []corev1.ContainerStatus{waiting("CrashLoopBackOff", "")},
			ContainerStatuses:     []corev1.ContainerStatus{waiting("PodInitializing", "")}}, "CrashLoopBackOff"},
		{"creating is on its way", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{waiting("ContainerCreating", "")}}, ""},
		{"exited", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "web", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error"}}}}},
			"container web exited with 2 (Error)"},
		{"unschedulable", corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available"}}},
			"Unschedulable: 0/1 nodes are available"},
		{"running, not ready", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "web", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
			"container web is running but not ready"},
		{"ready", corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(PodProblem(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: tc.st})).To(Equal(tc.want))
		})
	}
}
