package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RolloutApprovalSpec approves a stage, or clusters, of one revision's rollout.
// +kubebuilder:validation:XValidation:rule="has(self.stage) != (has(self.clusters) && size(self.clusters) > 0)",message="name exactly one of stage and clusters"
type RolloutApprovalSpec struct {
	// placement is the name of the Placement, in the same namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Placement string `json:"placement"`

	// revision is the name of the PlacementRevision approved; an approval for
	// another revision than the rollout's target does nothing.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Revision string `json:"revision"`

	// stage is the stage approved (Staged).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Stage string `json:"stage,omitempty"`

	// clusters are the clusters approved (External, or single clusters of a stage).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MaxLength=253
	Clusters []string `json:"clusters,omitempty"`
}

// RolloutApproval lets a stage, or clusters, of a Placement's rollout start. It is
// a separate object so that RBAC can let other people approve than those who edit
// the Placement.
// +genclient
// +genclient:noStatus
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=lodestar
// +kubebuilder:validation:XValidation:rule="self.spec == oldSelf.spec",message="a RolloutApproval is immutable"
// +kubebuilder:printcolumn:name="Placement",type=string,JSONPath=`.spec.placement`,description="The Placement whose rollout is approved"
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.spec.revision`,description="The PlacementRevision approved"
// +kubebuilder:printcolumn:name="Stage",type=string,JSONPath=`.spec.stage`,description="The stage approved (Staged)"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`,description="Time since creation"
type RolloutApproval struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what is approved.
	// +required
	Spec RolloutApprovalSpec `json:"spec"`
}

// RolloutApprovalList is a list of RolloutApprovals.
// +kubebuilder:object:root=true
type RolloutApprovalList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the RolloutApprovals.
	Items []RolloutApproval `json:"items"`
}
