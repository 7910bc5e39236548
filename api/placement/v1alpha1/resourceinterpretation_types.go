package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// InterpretedKind is the kind a ResourceInterpretation is for.
// +kubebuilder:validation:XValidation:rule="!(self.group in ['apps', 'batch'] && self.kind in ['Deployment', 'StatefulSet', 'DaemonSet', 'ReplicaSet', 'Job'])",message="the built-in workload kinds keep their built-in rules (docs/interpretation.md)"
type InterpretedKind struct {
	// group is the kind's API group; empty for the core group.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`
	// kind is the kind, as in an object's kind field.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
}

// HealthInterpretation says how healthy an object of the kind is on a member.
type HealthInterpretation struct {
	// expression is a CEL expression over `self`, the object as the member's
	// API server returns it, yielding a state: "Healthy", "Progressing" or
	// "Degraded", or a map {"state": ..., "message": ...} that also says why.
	// The agent evaluates it (it travels with the Work); a member's own
	// readinessRules for the kind win over it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Expression string `json:"expression"`
}

// ReplicasInterpretation says where an object of the kind keeps its replica
// count and what one replica needs, so that a Placement divides it
// (spec.scheduling.replicas) as it divides a Deployment.
type ReplicasInterpretation struct {
	// path is the JSON pointer (RFC 6901) of the desired replica count, such as
	// /spec/replicas: read for the total, written with each cluster's share.
	// An object without the field has 1 replica.
	// +required
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^(/[^/]+)+$`
	Path string `json:"path"`
	// requests is a CEL expression over `self` (the hub's object) yielding what
	// one replica requests, a map of resource names to quantities
	// ({"cpu": "500m", "memory": "1Gi"}): what Capacity division counts in
	// each cluster's free room. Omitted, a replica requests nothing.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Requests string `json:"requests,omitempty"`
}

// DependenciesInterpretation says which other objects of its namespace an
// object of the kind needs.
type DependenciesInterpretation struct {
	// expression is a CEL expression over `self` yielding a list of
	// {"kind": ..., "name": ...} maps (with "group" for a kind outside the core
	// group): the ConfigMaps, Secrets, ServiceAccounts or other objects of the
	// object's namespace it needs.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Expression string `json:"expression"`
}

// AggregateInterpretation says how the statuses of an object's copies on the
// clusters sum up into the hub object's status.
type AggregateInterpretation struct {
	// expression is a CEL expression over `self` (the hub's object) and
	// `clusters` (a list of {"name": ..., "status": ...}, one per cluster that
	// reports the copy's status), yielding the hub object's status (a map).
	// Used with spec.reporting.reflection: Aggregate.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Expression string `json:"expression"`
}

// ResourceInterpretationSpec says, in CEL, how Lodestar reads objects of one
// kind: how healthy one is, how many replicas it has and what each needs, what
// it depends on, and how its copies' statuses sum up. Each expression is
// bounded like an override's: a cost limit, a deadline and a result size.
// +kubebuilder:validation:XValidation:rule="has(self.health) || has(self.replicas) || has(self.dependencies) || has(self.aggregate)",message="an interpretation says at least one of health, replicas, dependencies and aggregate"
type ResourceInterpretationSpec struct {
	// target is the kind interpreted. One interpretation per kind: of two, the
	// older is used and the other says so in its Ready condition.
	// +required
	Target InterpretedKind `json:"target"`

	// health says how healthy an object is on a member: the Available,
	// Progressing and Degraded conditions its Work reports.
	// +optional
	Health *HealthInterpretation `json:"health,omitempty"`

	// replicas says where the replica count is and what a replica requests.
	// +optional
	Replicas *ReplicasInterpretation `json:"replicas,omitempty"`

	// dependencies says what other objects an object needs.
	// +optional
	Dependencies *DependenciesInterpretation `json:"dependencies,omitempty"`

	// aggregate says how the copies' statuses sum up on the hub.
	// +optional
	Aggregate *AggregateInterpretation `json:"aggregate,omitempty"`
}

// ResourceInterpretationStatus says whether the interpretation is in use.
type ResourceInterpretationStatus struct {
	// conditions: Ready is True when every expression compiles and the
	// interpretation is the one used for its kind (Valid), False when an
	// expression does not (InvalidExpression, naming it and where) or an older
	// interpretation of the kind is used instead (Conflict).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation the conditions are for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// ResourceInterpretation says how Lodestar reads a custom kind (health,
// replicas, dependencies, status aggregation), once, on the hub. Platform
// admins write it; tenants read it.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=rint
// +kubebuilder:printcolumn:name="Group",type=string,JSONPath=`.spec.target.group`
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.target.kind`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +genclient
// +genclient:nonNamespaced
type ResourceInterpretation struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ResourceInterpretationSpec `json:"spec"`
	// +optional
	Status ResourceInterpretationStatus `json:"status,omitempty"`
}

// ResourceInterpretationList is a list of ResourceInterpretations.
// +kubebuilder:object:root=true
type ResourceInterpretationList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResourceInterpretation `json:"items"`
}

// Ready condition reasons of a ResourceInterpretation.
const (
	// ReasonInterpretationValid: every expression compiles and the
	// interpretation is used for its kind.
	ReasonInterpretationValid = "Valid"
	// ReasonInvalidExpression: an expression does not compile; the message
	// names it. Objects of the kind fail (health: Degraded on the members;
	// replicas: not divided; aggregate: not reflected); other kinds go on.
	ReasonInvalidExpression = "InvalidExpression"
	// ReasonInterpretationConflict: an older interpretation of the same kind
	// is used instead.
	ReasonInterpretationConflict = "Conflict"
)

// InterpretedCondition is a Placement's condition, present when it places
// a kind a ResourceInterpretation interprets: True when every such
// interpretation is valid, False (InvalidInterpretation) naming the one that
// is not and its expression. Written by the interpretation controller.
const InterpretedCondition = "Interpreted"

// Interpreted condition reasons of a Placement.
const (
	// ReasonInterpreted: every interpreted kind the Placement places has a
	// valid interpretation.
	ReasonInterpreted = "Interpreted"
	// ReasonInvalidInterpretation: an interpreted kind the Placement places
	// has an invalid interpretation; its objects fail as that interpretation's
	// Ready condition says, the others go on.
	ReasonInvalidInterpretation = "InvalidInterpretation"
)
