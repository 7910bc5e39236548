package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterSetBindingSpec names the cluster set a namespace may use.
type ClusterSetBindingSpec struct {
	// clusterSet is the cluster set (the hub namespace holding its
	// ClusterProfiles) whose clusters the Placements of the binding's namespace
	// may use. It equals the binding's name, so a namespace binds a set once.
	// Creating or changing a binding needs the bind verb on
	// clustersets/<clusterSet> in group placement.lodestar.dev (checked at
	// admission by the hub chart's ValidatingAdmissionPolicy).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	ClusterSet string `json:"clusterSet"`
}

// ClusterSetBindingStatus says whether the bound cluster set exists.
type ClusterSetBindingStatus struct {
	// conditions: Bound is True when the cluster set is one the hub manages,
	// False (reason ClusterSetNotFound) when it is not.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation the conditions are for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// clusters is the number of clusters Lodestar manages in the set.
	// +optional
	Clusters *int32 `json:"clusters,omitempty"`
}

// ClusterSetBinding lets the Placements of its namespace use the clusters of one
// cluster set. A namespace without a binding gets no clusters. Deleting the
// binding removes the set's clusters from the namespace's Placements at once
// (access was revoked: the clusters do not wait for replacements).
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories=lodestar,shortName=csb
// +kubebuilder:validation:XValidation:rule="self.metadata.name == self.spec.clusterSet",message="a ClusterSetBinding's name must equal spec.clusterSet",fieldPath=".spec.clusterSet"
// +kubebuilder:printcolumn:name="Set",type=string,JSONPath=`.spec.clusterSet`,description="The cluster set the namespace may use"
// +kubebuilder:printcolumn:name="Bound",type=string,JSONPath=`.status.conditions[?(@.type=="Bound")].status`,description="Whether the hub manages that cluster set"
// +kubebuilder:printcolumn:name="Clusters",type=integer,JSONPath=`.status.clusters`,description="Clusters Lodestar manages in the set"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`,description="Time since creation"
type ClusterSetBinding struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec names the cluster set.
	// +required
	Spec ClusterSetBindingSpec `json:"spec"`

	// status says whether the set exists and how many clusters it has.
	// +optional
	Status ClusterSetBindingStatus `json:"status,omitempty"`
}

// ClusterSetBindingList is a list of ClusterSetBindings.
// +kubebuilder:object:root=true
type ClusterSetBindingList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the ClusterSetBindings.
	Items []ClusterSetBinding `json:"items"`
}

// BoundCondition is True when a ClusterSetBinding's cluster set is one the hub
// manages. Written by the cluster-set binding controller.
const BoundCondition = "Bound"

// Reasons of the Bound condition.
const (
	// ReasonClusterSetBound: the set exists; its clusters are usable.
	ReasonClusterSetBound = "ClusterSetBound"
	// ReasonClusterSetNotFound: the hub manages no cluster set of that name.
	ReasonClusterSetNotFound = "ClusterSetNotFound"
	// ReasonClusterSetOfOtherManager: the namespace also binds a cluster set of
	// another hub manager release (docs/scale.md), which places its Placements
	// on its own sets; this set's clusters are not used.
	ReasonClusterSetOfOtherManager = "ClusterSetOfOtherManager"
)
