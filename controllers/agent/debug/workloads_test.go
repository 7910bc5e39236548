package debug

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func controlledBy(apiVersion, kind, name string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, Controller: ptr.To(true)}}
}

// A pod belongs to a Placement when it, its controller or its controller's
// controller was placed; nothing else of the namespace does.
func TestWorkloadsOwnership(t *testing.T) {
	w := &workloads{
		placed: map[objectKey]bool{
			{"apps", "Deployment", "web"}: true, {"batch", "CronJob", "report"}: true,
			{"apps", "StatefulSet", "db"}: true, {"", "Pod", "debug"}: true,
		},
		controllers: map[objectKey]*metav1.OwnerReference{
			{"apps", "ReplicaSet", "web-7c9f"}:   &controlledBy("apps/v1", "Deployment", "web")[0],
			{"apps", "ReplicaSet", "other-1"}:    &controlledBy("apps/v1", "Deployment", "other")[0],
			{"batch", "Job", "report-123"}:       &controlledBy("batch/v1", "CronJob", "report")[0],
			{"apps", "ReplicaSet", "standalone"}: nil,
		},
	}
	pod := func(name string, owners []metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), OwnerReferences: owners}}
	}
	pods := map[*corev1.Pod]bool{
		pod("web-7c9f-abc", controlledBy("apps/v1", "ReplicaSet", "web-7c9f")): true,
		pod("report-123-x", controlledBy("batch/v1", "Job", "report-123")):     true,
		pod("db-0", controlledBy("apps/v1", "StatefulSet", "db")):              true,
		pod("debug", nil): true,
		pod("other-1-x", controlledBy("apps/v1", "ReplicaSet", "other-1")):       false,
		pod("standalone-x", controlledBy("apps/v1", "ReplicaSet", "standalone")): false,
		pod("stray", nil): false,
		// Same name, another group: not the placed Deployment.
		pod("fake-x", controlledBy("example.com/v1", "Deployment", "web")): false,
	}
	for p, want := range pods {
		if got := w.ownsPod(p); got != want {
			t.Errorf("ownsPod(%s) = %v, want %v", p.Name, got, want)
		}
	}
	byName := map[string]*corev1.Pod{}
	for p := range pods {
		byName[p.Name] = p
	}
	event := func(apiVersion, kind, name, uid string) *corev1.Event {
		return &corev1.Event{InvolvedObject: corev1.ObjectReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(uid)}}
	}
	for e, want := range map[*corev1.Event]bool{
		event("apps/v1", "Deployment", "web", ""):          true,
		event("apps/v1", "ReplicaSet", "web-7c9f", ""):     true,
		event("v1", "Pod", "web-7c9f-abc", "web-7c9f-abc"): true,
		event("v1", "Pod", "web-7c9f-abc", "an-older-pod"): false,
		event("v1", "Pod", "stray", "stray"):               false,
		event("apps/v1", "Deployment", "other", ""):        false,
		event("v1", "ConfigMap", "web", ""):                false,
	} {
		if got := w.ownsEvent(e, byName); got != want {
			t.Errorf("ownsEvent(%s %s) = %v, want %v", e.InvolvedObject.Kind, e.InvolvedObject.Name, got, want)
		}
	}
}
