package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// AppliedWorkSpec names the hub Work an AppliedWork records.
type AppliedWorkSpec struct {
	// workNamespace is the namespace of the Work on the hub.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="workNamespace is immutable"
	WorkNamespace string `json:"workNamespace"`

	// workName is the name of the Work on the hub.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="workName is immutable"
	WorkName string `json:"workName"`
}

// AppliedResource identifies one object the agent created on the member for a Work.
type AppliedResource struct {
	// group is the object's API group; empty for the core group.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`
	// version is the object's API version.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Version string `json:"version"`
	// kind is the object's kind.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// resource is the object's resource (plural) name.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Resource string `json:"resource"`
	// namespace is the object's namespace; empty for cluster-scoped objects.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// name is the object's name.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// uid is the UID of the object the agent created. Cleanup deletes the object only
	// while it still has this UID, so an object recreated by someone else is kept.
	// +required
	UID types.UID `json:"uid"`
	// manifestHash is a hash of the manifest last applied to the object. It tells
	// a change of the manifest on the hub (applied whatever the drift policy)
	// from a change of the object on the member (drift), and keeps a Job that
	// ran and is gone from running again until its manifest changes.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ManifestHash string `json:"manifestHash,omitempty"`
	// waitingFor, when set, names the AppliedWork of another Work that placed the
	// object first: this Work's manifest names the same object and waits. When
	// that Work no longer places the object, the object passes to this Work
	// without being deleted (same UID). Cleanup never deletes through a waiting
	// record.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	WaitingFor string `json:"waitingFor,omitempty"`
	// takenOver is set when the object existed on the member before the Work
	// placed it (takeover IfNoDiff or Always). When its manifest or Work goes, the
	// object is released, not deleted, unless the Work's deletionPolicy is
	// DeleteTakenOver: the agent deletes only what it created.
	// +optional
	TakenOver bool `json:"takenOver,omitempty"`
}

// AppliedWorkStatus lists what the agent applied.
type AppliedWorkStatus struct {
	// appliedResources are the objects the agent created for the Work and still
	// answers for, and those it waits for another Work to let go (waitingFor).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10000
	AppliedResources []AppliedResource `json:"appliedResources,omitempty"`
}

// AppliedWork is the member-side record of one hub Work: which objects the agent
// created for it, with their UIDs. Objects it applied carry an owner reference to it.
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=lodestar
// +kubebuilder:printcolumn:name="Work Namespace",type=string,JSONPath=`.spec.workNamespace`,description="The hub namespace of the Work"
// +kubebuilder:printcolumn:name="Work",type=string,JSONPath=`.spec.workName`,description="The Work whose objects this records"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`,description="Time since creation"
type AppliedWork struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec names the Work.
	// +required
	Spec AppliedWorkSpec `json:"spec"`

	// status lists what was applied.
	// +optional
	Status AppliedWorkStatus `json:"status,omitempty"`
}

// AppliedWorkList is a list of AppliedWorks.
// +kubebuilder:object:root=true
type AppliedWorkList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the AppliedWorks.
	Items []AppliedWork `json:"items"`
}
