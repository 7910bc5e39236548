package clusterhealth

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

func TestEvaluate(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	lease := func(renewedAgo time.Duration, ready string) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
				placementv1alpha1.MemberReadyAnnotation: ready, placementv1alpha1.MemberReadyMessageAnnotation: "readyz says " + ready,
			}},
			Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: now.Add(-renewedAgo)}, LeaseDurationSeconds: ptr.To[int32](40)},
		}
	}
	grace := 20 * time.Second
	tests := []struct {
		name                 string
		lease                *coordinationv1.Lease
		reachable, healthy   metav1.ConditionStatus
		reachReason, hReason string
		recheck              time.Duration
	}{
		{name: "never connected", reachable: metav1.ConditionUnknown, healthy: metav1.ConditionUnknown,
			reachReason: placementv1alpha1.ReasonAgentNotSeen, hReason: placementv1alpha1.ReasonAgentNotSeen},
		{name: "renewed, member ready", lease: lease(10*time.Second, "true"), reachable: metav1.ConditionTrue, healthy: metav1.ConditionTrue,
			reachReason: placementv1alpha1.ReasonLeaseRenewed, hReason: placementv1alpha1.ReasonMemberReady, recheck: 50*time.Second + recheckSlack},
		{name: "renewed, member not ready", lease: lease(0, "false"), reachable: metav1.ConditionTrue, healthy: metav1.ConditionFalse,
			reachReason: placementv1alpha1.ReasonLeaseRenewed, hReason: placementv1alpha1.ReasonMemberNotReady, recheck: 60*time.Second + recheckSlack},
		{name: "expired but within the grace period", lease: lease(55*time.Second, "true"), reachable: metav1.ConditionTrue, healthy: metav1.ConditionTrue,
			reachReason: placementv1alpha1.ReasonLeaseRenewed, hReason: placementv1alpha1.ReasonMemberReady, recheck: 5*time.Second + recheckSlack},
		{name: "expired beyond the grace period", lease: lease(61*time.Second, "true"), reachable: metav1.ConditionFalse, healthy: metav1.ConditionUnknown,
			reachReason: placementv1alpha1.ReasonLeaseExpired, hReason: placementv1alpha1.ReasonAgentUnreachable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			reach, healthy, recheck := Evaluate(tt.lease, now, grace)
			g.Expect(reach.Type).To(Equal(placementv1alpha1.AgentReachableCondition))
			g.Expect(healthy.Type).To(Equal(placementv1alpha1.ControlPlaneHealthyCondition))
			g.Expect(reach.Status).To(Equal(tt.reachable))
			g.Expect(reach.Reason).To(Equal(tt.reachReason))
			g.Expect(healthy.Status).To(Equal(tt.healthy))
			g.Expect(healthy.Reason).To(Equal(tt.hReason))
			g.Expect(recheck).To(Equal(tt.recheck))
		})
	}
}

func TestHeartbeatInterval(t *testing.T) {
	tests := []struct {
		agents int
		budget float64
		want   time.Duration
	}{
		{agents: 0, budget: 40, want: 0},
		{agents: 400, budget: 40, want: 0}, // 40 renewals/s at the agents' own 10 s
		{agents: 401, budget: 40, want: 20 * time.Second},
		{agents: 1000, budget: 40, want: 40 * time.Second},
		{agents: 5000, budget: 40, want: 160 * time.Second},
		{agents: 6400, budget: 40, want: 160 * time.Second},
		{agents: 6401, budget: 40, want: 240 * time.Second}, // 320 s capped
		{agents: 10000, budget: 40, want: 240 * time.Second},
		{agents: 100000, budget: 40, want: 240 * time.Second},
		{agents: 10000, budget: 0, want: 0},
		{agents: 10000, budget: -1, want: 0},
	}
	for _, tt := range tests {
		got := HeartbeatInterval(tt.agents, tt.budget, DefaultMaxHeartbeatInterval)
		if got != tt.want {
			t.Errorf("HeartbeatInterval(%d, %v) = %s, want %s", tt.agents, tt.budget, got, tt.want)
		}
		if got > 0 && float64(tt.agents)/got.Seconds() > tt.budget && got < DefaultMaxHeartbeatInterval {
			t.Errorf("HeartbeatInterval(%d, %v) = %s costs %.1f writes/s", tt.agents, tt.budget, got, float64(tt.agents)/got.Seconds())
		}
	}
}

// An agent that reports another cluster ID than the one join recorded (its
// token in another cluster's hands, say) leaves its cluster unhealthy,
// naming both IDs; the same ID, none recorded, or none reported, changes
// nothing.
func TestCheckIdentity(t *testing.T) {
	g := NewWithT(t)
	healthy := metav1.Condition{Type: placementv1alpha1.ControlPlaneHealthyCondition, Status: metav1.ConditionTrue, Reason: placementv1alpha1.ReasonMemberReady}
	profile := func(joined, reported string) *cpv1alpha1.ClusterProfile {
		p := &cpv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Name: "edge-1", Annotations: map[string]string{}}}
		if joined != "" {
			p.Annotations[placementv1alpha1.ClusterIDAnnotation] = joined
		}
		if reported != "" {
			p.Status.Properties = []cpv1alpha1.Property{{Name: ClusterIDProperty, Value: reported}}
		}
		return p
	}
	for _, same := range [][2]string{{"a", "a"}, {"", "b"}, {"a", ""}} {
		g.Expect(CheckIdentity(profile(same[0], same[1]), healthy)).To(Equal(healthy), "%v", same)
	}
	got := CheckIdentity(profile("a", "b"), healthy)
	g.Expect(got.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(got.Reason).To(Equal(placementv1alpha1.ReasonIdentityMismatch))
	g.Expect(got.Message).To(ContainSubstring("the agent reports cluster ID b, not a recorded at join"))
}
