package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// PlacementRevisionSpec is one immutable rendering of what a Placement places.
type PlacementRevisionSpec struct {
	// placement is the name of the Placement, in the same namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Placement string `json:"placement"`

	// revision is the revision number, counted up from 1 per Placement.
	// +required
	// +kubebuilder:validation:Minimum=1
	Revision int64 `json:"revision"`

	// hash is the hash of the manifests and overrides, as the Works carry it
	// (placement.lodestar.dev/revision).
	// +required
	// +kubebuilder:validation:MaxLength=64
	Hash string `json:"hash"`

	// changeCause says what changed from the revision before: the Placement's
	// kubernetes.io/change-cause annotation when set, or the objects added,
	// changed and removed.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	ChangeCause string `json:"changeCause,omitempty"`

	// manifests are the rendered objects, as the Works carry them before
	// overrides; absent when they are kept compressed.
	// +optional
	// +listType=atomic
	Manifests []RevisionManifest `json:"manifests,omitempty"`

	// compressedManifests are the rendered objects, as the gzip of their JSON
	// list, instead of manifests when that list is larger than 512 KiB: a
	// revision of several Works' worth of objects stays within what the API
	// server stores in one object.
	// +optional
	// +kubebuilder:validation:MaxLength=1048576
	CompressedManifests []byte `json:"compressedManifests,omitempty"`

	// overrides are the Placement's spec.overrides of this revision, which each
	// cluster's Work is rendered with.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Overrides []Override `json:"overrides,omitempty"`

	// division is the Placement's spec.scheduling.replicas of this revision,
	// which divides the workloads' replicas over the clusters.
	// +optional
	Division *ReplicaDivision `json:"division,omitempty"`
}

// RevisionManifest is one rendered object, as a Work's manifest carries it.
type RevisionManifest struct {
	// +kubebuilder:validation:EmbeddedResource
	// +kubebuilder:pruning:PreserveUnknownFields
	runtime.RawExtension `json:",inline"`
}

// PlacementRevision is an immutable rendering of the objects a Placement places:
// what a rollout moves clusters to, and what undo goes back to. The revision
// maker creates one per change, named <placement>-<hash>, owned by the
// Placement, and names it in the Placement's status.revision; the work generator
// rolls it out.
// +genclient
// +genclient:noStatus
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=lodestar,shortName=plcrev
// +kubebuilder:validation:XValidation:rule="self.spec == oldSelf.spec",message="a PlacementRevision is immutable"
// +kubebuilder:printcolumn:name="Placement",type=string,JSONPath=`.spec.placement`,description="The Placement this revision renders"
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.spec.revision`,description="The revision number, counted up from 1 per Placement"
// +kubebuilder:printcolumn:name="Cause",type=string,JSONPath=`.spec.changeCause`,description="What changed from the revision before"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`,description="Time since creation"
type PlacementRevision struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the revision's content.
	// +required
	Spec PlacementRevisionSpec `json:"spec"`
}

// PlacementRevisionList is a list of PlacementRevisions.
// +kubebuilder:object:root=true
type PlacementRevisionList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the PlacementRevisions.
	Items []PlacementRevision `json:"items"`
}
