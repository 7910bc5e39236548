package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MemberAccessGrantSpec says which namespace receives credentials of which
// member clusters.
type MemberAccessGrantSpec struct {
	// namespace is the consumer namespace on the hub: each granted cluster's
	// member-access token is copied to the Secret <namespace>/<cluster name>,
	// the layout the upstream secretreader credential plugin reads. Namespaces
	// named kube-* and lodestar-* cannot be granted.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('kube-') && !self.startsWith('lodestar-')",message="kube-* and lodestar-* namespaces cannot receive member credentials"
	Namespace string `json:"namespace"`

	// clusterSet is the cluster set (the hub namespace holding its
	// ClusterProfiles) whose clusters are granted.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	ClusterSet string `json:"clusterSet"`

	// clusterSelector narrows the grant to the set's clusters whose
	// ClusterProfile labels match; omitted, every cluster of the set that
	// publishes member access is granted.
	// +optional
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`
}

// MemberAccessGrantStatus says what the grant copied.
type MemberAccessGrantStatus struct {
	// conditions: Ready is True when every granted cluster's credential is
	// copied (CredentialsCopied), False while some are not (CredentialsPending,
	// SecretConflict, InvalidClusterSelector).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation the conditions are for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// clusters is how many clusters the grant selects.
	// +optional
	Clusters *int32 `json:"clusters,omitempty"`

	// credentials is how many of them have a credential copied.
	// +optional
	Credentials *int32 `json:"credentials,omitempty"`
}

// MemberAccessGrant lets the controllers of one hub namespace reach member
// clusters directly: for each cluster of the set (and selector) whose agent
// publishes member access, the hub copies the member ServiceAccount's
// short-lived token into the Secret <namespace>/<cluster>, where the upstream
// secretreader credential plugin reads it (docs/member-access.md). It is
// cluster-scoped so that only platform admins grant. Deleting it, or a
// cluster leaving the set or the selector, removes the copies.
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=lodestar,shortName=mag
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.spec.namespace`,description="The hub namespace that receives the credentials"
// +kubebuilder:printcolumn:name="Set",type=string,JSONPath=`.spec.clusterSet`,description="The cluster set whose clusters are granted"
// +kubebuilder:printcolumn:name="Clusters",type=integer,JSONPath=`.status.clusters`,description="Clusters the grant selects"
// +kubebuilder:printcolumn:name="Credentials",type=integer,JSONPath=`.status.credentials`,description="Selected clusters whose credential is copied"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether every granted cluster's credential is copied"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`,description="Time since creation"
type MemberAccessGrant struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says which namespace receives which clusters' credentials.
	// +required
	Spec MemberAccessGrantSpec `json:"spec"`

	// status says what was copied.
	// +optional
	Status MemberAccessGrantStatus `json:"status,omitempty"`
}

// MemberAccessGrantList is a list of MemberAccessGrants.
// +kubebuilder:object:root=true
type MemberAccessGrantList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the MemberAccessGrants.
	Items []MemberAccessGrant `json:"items"`
}

// ReadyCondition is a MemberAccessGrant's condition, written by the member
// access controller.
const ReadyCondition = "Ready"

// Reasons of a MemberAccessGrant's Ready condition.
const (
	// ReasonCredentialsCopied: every granted cluster's credential is copied.
	ReasonCredentialsCopied = "CredentialsCopied"
	// ReasonCredentialsPending: some granted clusters have no credential yet
	// (their agent has not published one, or it expired), or the namespace is missing.
	ReasonCredentialsPending = "CredentialsPending"
	// ReasonSecretConflict: a Secret of that name exists and is not Lodestar's
	// copy; it is left alone.
	ReasonSecretConflict = "SecretConflict"
	// ReasonInvalidGrantSelector: spec.clusterSelector is not a valid selector.
	ReasonInvalidGrantSelector = "InvalidClusterSelector"
)

// Member access: the hub Secret in which a cluster's agent keeps its member
// token, and the labels of it and of the copies.
const (
	// MemberAccessSecret is the Secret in a cluster's hub namespace that holds
	// the member ServiceAccount's token (key "token"); `kubectl lodestar join`
	// creates it empty, and the agent's hub identity may write only it.
	MemberAccessSecret = "lodestar-member-access"
	// MemberAccessLabel marks the Secrets of member access: "source" on a
	// cluster's MemberAccessSecret, "copy" on the copies.
	MemberAccessLabel = "placement.lodestar.dev/member-access"
	// MemberAccessGrantLabel names the grant of a copy.
	MemberAccessGrantLabel = "placement.lodestar.dev/member-access-grant"
	// MemberAccessClusterLabel names the cluster of a copy.
	MemberAccessClusterLabel = "placement.lodestar.dev/member-access-cluster"
	// MemberAccessExpiresAnnotation is when a token expires (RFC 3339), on the
	// source Secret and on its copies.
	MemberAccessExpiresAnnotation = "placement.lodestar.dev/expires"
	// MemberAccessFinalizer holds a grant until its copies are removed.
	MemberAccessFinalizer = "placement.lodestar.dev/member-access"
	// SecretReaderProvider is the access provider name the agent publishes,
	// the upstream secretreader plugin's.
	SecretReaderProvider = "secretreader"
)
