package scheduling

import (
	"maps"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// ClusterOf is what the scheduler and the overrides read of a ClusterProfile; it
// copies what it keeps, as the profile may be the cache's own.
func ClusterOf(p *cpv1alpha1.ClusterProfile) Cluster {
	c := Cluster{
		Name: p.Name, Namespace: p.Namespace, Labels: maps.Clone(p.Labels), Version: p.Status.Version.Kubernetes,
		Properties: map[string]string{}, Conditions: map[string]string{},
	}
	for _, prop := range p.Status.Properties {
		c.Properties[prop.Name] = prop.Value
	}
	for _, cond := range p.Status.Conditions {
		c.Conditions[cond.Type] = string(cond.Status)
	}
	c.Taints, c.TaintsErr = ParseTaints(p.Annotations[placementv1alpha1.TaintsAnnotation])
	if r := meta.FindStatusCondition(p.Status.Conditions, placementv1alpha1.AgentReachableCondition); r != nil && r.Status != metav1.ConditionTrue {
		c.UnreachableSince = r.LastTransitionTime.Time
		c.NeverConnected = r.Reason == placementv1alpha1.ReasonAgentNotSeen
	}
	return c
}

// TaintsChanged tells whether a ClusterProfile's taints changed.
func TaintsChanged(old, now *cpv1alpha1.ClusterProfile) bool {
	return old.Annotations[placementv1alpha1.TaintsAnnotation] != now.Annotations[placementv1alpha1.TaintsAnnotation]
}

// ViewChanged tells whether a ClusterProfile changed in what overrides can see:
// labels, properties, version and condition statuses (not heartbeats).
func ViewChanged(old, now *cpv1alpha1.ClusterProfile) bool {
	va, vb := ClusterOf(old), ClusterOf(now)
	return !maps.Equal(va.Labels, vb.Labels) || !maps.Equal(va.Properties, vb.Properties) ||
		va.Version != vb.Version || !maps.Equal(va.Conditions, vb.Conditions)
}
