package v1alpha1

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConsumerRef names a consumer: a ServiceAccount on the hub.
type ConsumerRef struct {
	// namespace is the ServiceAccount's hub namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// name is the ServiceAccount's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ConsumerAccessGrantSpec says which consumers reach which clusters through
// their agents' tunnels, with which rights on them.
type ConsumerAccessGrantSpec struct {
	// consumers are the hub ServiceAccounts granted. Each is its own identity
	// on the members: the user lodestar:consumer:<namespace>:<name>.
	// +required
	// +listType=map
	// +listMapKey=namespace
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Consumers []ConsumerRef `json:"consumers"`

	// clusterSet is the cluster set (the hub namespace holding its
	// ClusterProfiles) whose clusters are granted.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	ClusterSet string `json:"clusterSet"`

	// clusterSelector narrows the grant to the set's clusters whose
	// ClusterProfile labels match; omitted, every cluster of the set.
	// +optional
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`

	// rules are what the consumers may do on each granted member: a
	// ClusterRole of exactly these rules, bound to each consumer's member
	// identity. A member grants them only within what its admin lets the
	// agent grant (the agent chart's consumerAccess.rules): a rule beyond it
	// fails on that member, and the grant's status says so.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Rules []rbacv1.PolicyRule `json:"rules"`
}

// ConsumerAccessGrantStatus says where the grant is in force.
type ConsumerAccessGrantStatus struct {
	// conditions: Ready is True when every granted cluster's member holds the
	// grant's rules (RulesApplied), False while some do not (RulesPending,
	// RulesFailed, InvalidClusterSelector).
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

	// applied is how many of them hold the grant's rules.
	// +optional
	Applied *int32 `json:"applied,omitempty"`
}

// ConsumerAccessGrant lets hub ServiceAccounts (platform teams' controllers)
// reach member clusters through the agents' tunnels, each as its own identity
// on the members (docs/extending.md). The hub lets each consumer use the
// tunnel access provider of the granted clusters (the debug API's
// clusters/<cluster>/proxy); each granted member gets a ClusterRole of the
// grant's rules bound to the consumers' member identities, carried by a Work.
// Deleting the grant, or a cluster leaving the set or selector, withdraws
// both, and ends the consumers' open streams to that cluster. It is
// cluster-scoped so that only platform admins grant.
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=lodestar,shortName=cag
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63 && !self.metadata.name.contains('.')",message="a ConsumerAccessGrant's name is a DNS label (at most 63 characters, no dots): it names the grant's Works and roles"
// +kubebuilder:printcolumn:name="Set",type=string,JSONPath=`.spec.clusterSet`,description="The cluster set whose clusters are granted"
// +kubebuilder:printcolumn:name="Clusters",type=integer,JSONPath=`.status.clusters`,description="Clusters the grant selects"
// +kubebuilder:printcolumn:name="Applied",type=integer,JSONPath=`.status.applied`,description="Selected clusters whose member holds the grant's rules"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether every granted member holds the rules"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`,description="Time since creation"
type ConsumerAccessGrant struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says who reaches which clusters with which rights.
	// +required
	Spec ConsumerAccessGrantSpec `json:"spec"`

	// status says where the grant is in force.
	// +optional
	Status ConsumerAccessGrantStatus `json:"status,omitempty"`
}

// ConsumerAccessGrantList is a list of ConsumerAccessGrants.
// +kubebuilder:object:root=true
type ConsumerAccessGrantList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the ConsumerAccessGrants.
	Items []ConsumerAccessGrant `json:"items"`
}

// Reasons of a ConsumerAccessGrant's Ready condition (and
// ReasonInvalidGrantSelector).
const (
	// ReasonRulesApplied: every granted member holds the grant's rules.
	ReasonRulesApplied = "RulesApplied"
	// ReasonRulesPending: some granted members have not applied them yet.
	ReasonRulesPending = "RulesPending"
	// ReasonRulesFailed: some granted members refused them (their admin lets
	// the agent grant less).
	ReasonRulesFailed = "RulesFailed"
)

// Consumer access: the label of a grant's Works, its finalizer and the
// access provider of the tunnel.
const (
	// ConsumerAccessGrantLabel names the grant of a Work carrying its rules.
	ConsumerAccessGrantLabel = "placement.lodestar.dev/consumer-access-grant"
	// ConsumerAccessContentAnnotation on a grant's Work is a hash of what it
	// carries, so that an unchanged Work is not written again.
	ConsumerAccessContentAnnotation = "placement.lodestar.dev/consumer-access-content"
	// ConsumerAccessFinalizer holds a grant until its Works and hub roles are gone.
	ConsumerAccessFinalizer = "placement.lodestar.dev/consumer-access"
	// TunnelProvider is the access provider the agents publish for the
	// tunnel: the debug API's clusters/<cluster>/proxy on the hub, and the
	// lodestar-credentials plugin.
	TunnelProvider = "lodestar-tunnel"
)
