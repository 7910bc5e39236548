package handlers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func TestPredicates(t *testing.T) {
	a := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"v": "1"}}}
	b := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"v": "2"}}}
	create, update, del := event.CreateEvent{Object: a}, event.UpdateEvent{ObjectOld: a, ObjectNew: b}, event.DeleteEvent{Object: a}
	if !Creations.Create(create) || Creations.Update(update) || Creations.Delete(del) {
		t.Error("Creations lets creations through, and only them")
	}
	if Deletions.Create(create) || Deletions.Update(update) || !Deletions.Delete(del) {
		t.Error("Deletions lets deletions through, and only them")
	}
	labelMoved := Updates(func(old, now *corev1.ConfigMap) bool { return old.Labels["v"] != now.Labels["v"] })
	if labelMoved.Create(create) || !labelMoved.Update(update) || labelMoved.Delete(del) {
		t.Error("Updates lets through the updates it is told moved something, and only them")
	}
	if labelMoved.Update(event.UpdateEvent{ObjectOld: a, ObjectNew: a}) {
		t.Error("an update that moved nothing")
	}
	if labelMoved.Update(event.UpdateEvent{ObjectOld: &corev1.Secret{}, ObjectNew: &corev1.Secret{}}) {
		t.Error("an object of another type")
	}
}

func TestInterestsSwap(t *testing.T) {
	var in Interests
	key := client.ObjectKey{Namespace: "ns", Name: "p"}
	if got := in.Swap(key, Idle); got != Gating {
		t.Errorf("an object not recorded was %v, want Gating", got)
	}
	if got := in.Swap(key, Reporting); got != Idle {
		t.Errorf("got %v, want Idle", got)
	}
	in.Forget(key)
	if got := in.Swap(key, Idle); got != Gating {
		t.Errorf("a forgotten object was %v, want Gating", got)
	}
}
