package debug

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func controlledBy(apiVersion, kind, name, uid string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(uid), Controller: ptr.To(true)}}
}

// A pod belongs to a Placement when it, its controller or its controller's
// controller is one the agent applied for it, by UID: a namesake (the same
// name, another UID) is not, nor is anything else of the namespace.
func TestWorkloadsOwnership(t *testing.T) {
	w := &workloads{
		placed: map[types.UID]bool{"deploy-web": true, "cronjob-report": true, "sts-db": true, "pod-debug": true},
		controllers: map[types.UID]*metav1.OwnerReference{
			"rs-web-7c9f":   &controlledBy("apps/v1", "Deployment", "web", "deploy-web")[0],
			"rs-other-1":    &controlledBy("apps/v1", "Deployment", "other", "deploy-other")[0],
			"rs-namesake":   &controlledBy("apps/v1", "Deployment", "web", "deploy-web-member-local")[0],
			"job-report":    &controlledBy("batch/v1", "CronJob", "report", "cronjob-report")[0],
			"rs-standalone": nil,
		},
	}
	pod := func(name string, owners []metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("pod-" + name), OwnerReferences: owners}}
	}
	pods := map[*corev1.Pod]bool{
		pod("web-7c9f-abc", controlledBy("apps/v1", "ReplicaSet", "web-7c9f", "rs-web-7c9f")): true,
		pod("report-123-x", controlledBy("batch/v1", "Job", "report-123", "job-report")):      true,
		pod("db-0", controlledBy("apps/v1", "StatefulSet", "db", "sts-db")):                   true,
		pod("debug", nil): true,
		pod("other-1-x", controlledBy("apps/v1", "ReplicaSet", "other-1", "rs-other-1")):          false,
		pod("standalone-x", controlledBy("apps/v1", "ReplicaSet", "standalone", "rs-standalone")): false,
		pod("stray", nil): false,
		// A member-local Deployment named web (its own UID): not the placed one.
		pod("web-local-x", controlledBy("apps/v1", "ReplicaSet", "web-local", "rs-namesake")): false,
		// A ReplicaSet named like the placed one's, another UID.
		pod("web-7c9f-forged", controlledBy("apps/v1", "ReplicaSet", "web-7c9f", "rs-forged")): false,
	}
	for p, want := range pods {
		if got := w.ownsPod(p); got != want {
			t.Errorf("ownsPod(%s) = %v, want %v", p.Name, got, want)
		}
	}
	byUID := map[types.UID]*corev1.Pod{}
	for p := range pods {
		byUID[p.UID] = p
	}
	event := func(apiVersion, kind, name, uid string) *corev1.Event {
		return &corev1.Event{InvolvedObject: corev1.ObjectReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(uid)}}
	}
	for e, want := range map[*corev1.Event]bool{
		event("apps/v1", "Deployment", "web", "deploy-web"):              true,
		event("apps/v1", "ReplicaSet", "web-7c9f", "rs-web-7c9f"):        true,
		event("v1", "Pod", "web-7c9f-abc", "pod-web-7c9f-abc"):           true,
		event("v1", "Pod", "web-7c9f-abc", "an-older-pod"):               false,
		event("v1", "Pod", "stray", "pod-stray"):                         false,
		event("apps/v1", "Deployment", "other", "deploy-other"):          false,
		event("apps/v1", "Deployment", "web", "deploy-web-member-local"): false,
		event("v1", "ConfigMap", "web", "cm-web"):                        false,
	} {
		if got := w.ownsEvent(e, byUID); got != want {
			t.Errorf("ownsEvent(%s %s) = %v, want %v", e.InvolvedObject.Kind, e.InvolvedObject.Name, got, want)
		}
	}
}
