package clustercleanup

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// A deleted cluster whose agent never connected is cleaned at once (it applied
// nothing); one whose agent ran waits the grace period for it.
func TestAgentGone(t *testing.T) {
	r := &Reconciler{GracePeriod: 10 * time.Minute}
	profile := func(reason string, status metav1.ConditionStatus) *cpv1alpha1.ClusterProfile {
		p := &cpv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: time.Now()}}}
		p.Status.Conditions = []metav1.Condition{{Type: placementv1alpha1.AgentReachableCondition, Status: status, Reason: reason,
			LastTransitionTime: metav1.Now()}}
		return p
	}
	if gone, wait := r.agentGone(profile(placementv1alpha1.ReasonAgentNotSeen, metav1.ConditionUnknown)); !gone || wait != 0 {
		t.Errorf("never connected: gone %v, wait %s; want gone at once", gone, wait)
	}
	if gone, wait := r.agentGone(profile(placementv1alpha1.ReasonAgentUnreachable, metav1.ConditionFalse)); gone || wait < 9*time.Minute {
		t.Errorf("unreachable since now: gone %v, wait %s; want the grace period", gone, wait)
	}
	if gone, _ := r.agentGone(profile("Renewed", metav1.ConditionTrue)); gone {
		t.Error("a reachable agent is not gone")
	}
}
