package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterPlacementNamespace is the hub namespace where each ClusterPlacement is
// carried out: the hub keeps there a Placement of the same name and spec (marked
// with ClusterPlacementAnnotation), whose PlacementDecisions, PlacementRevisions,
// Works and events are those of the ClusterPlacement. Only platform admins have
// access to it. It lies outside the member clusters' lodestar-cluster- prefix, so
// no cluster's namespace is ever it, and is marked ReservedNamespaceLabel
// ReservedForClusterPlacements.
const ClusterPlacementNamespace = "lodestar-placements"

// ClusterPlacementAnnotation on the Placement in ClusterPlacementNamespace names
// the ClusterPlacement it carries out.
const ClusterPlacementAnnotation = "placement.lodestar.dev/cluster-placement"

// ClusterPlacement places cluster-scoped objects of the hub (CRDs, ClusterRoles
// and their bindings, StorageClasses, webhook configurations, ...) and whole
// namespaces (a selected Namespace and every namespaced object in it, except
// what belongs to the hub and Secrets) on the member clusters it selects, for
// platform admins. Its spec is a Placement's; its resource selectors name
// cluster-scoped kinds (a selector of kind Namespace selects whole namespaces).
// Every cluster set the hub manages is open to it.
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=lodestar,shortName=cplc
// +kubebuilder:printcolumn:name="Scheduled",type=string,JSONPath=`.status.conditions[?(@.type=="Scheduled")].status`,description="Whether the scheduler wrote decisions for the current generation"
// +kubebuilder:printcolumn:name="Clusters",type=integer,JSONPath=`.status.selectedClusters`,description="Clusters the PlacementDecisions name"
// +kubebuilder:printcolumn:name="Applied",type=integer,JSONPath=`.status.appliedClusters`,description="Selected clusters with every placed object applied at the current revision"
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.availableClusters`,description="Selected clusters with every placed object available at the current revision"
// +kubebuilder:printcolumn:name="Synced",type=string,JSONPath=`.status.conditions[?(@.type=="WorkSynchronized")].status`,priority=1,description="Whether every selected cluster's Works hold what the rollout gives them"
// +kubebuilder:printcolumn:name="Drifted",type=integer,JSONPath=`.status.driftedClusters`,priority=1,description="Selected clusters reporting a placed object changed on the member (whenDrifted: Report)"
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.status.rollout.targetRevisionNumber`,description="The PlacementRevision number being rolled out"
// +kubebuilder:printcolumn:name="Progressing",type=string,JSONPath=`.status.conditions[?(@.type=="Progressing")].reason`,priority=1,description="Where the rollout is (the Progressing condition's reason)"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`,description="Whether every selected cluster has every placed object available"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`,description="Time since creation"
type ClusterPlacement struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says which cluster-scoped objects and namespaces go to which clusters,
	// as a Placement's spec does.
	// +required
	Spec PlacementSpec `json:"spec"`

	// status is the status of the Placement that carries the ClusterPlacement out
	// (ClusterPlacementNamespace), with its conditions' observedGeneration in the
	// ClusterPlacement's generations.
	// +optional
	Status PlacementStatus `json:"status,omitempty"`
}

// ClusterPlacementList is a list of ClusterPlacements.
// +kubebuilder:object:root=true
type ClusterPlacementList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the ClusterPlacements.
	Items []ClusterPlacement `json:"items"`
}
