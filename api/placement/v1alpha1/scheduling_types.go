package v1alpha1

// Property names that the agent reports in ClusterProfile status.properties and
// that the scheduler's capacity rules read. Values are Kubernetes quantities.
const (
	PropertyNodeCount         = "nodes.lodestar.dev"
	PropertyCPUAllocatable    = "cpu.allocatable.lodestar.dev"
	PropertyCPUFree           = "cpu.free.lodestar.dev"
	PropertyMemoryAllocatable = "memory.allocatable.lodestar.dev"
	PropertyMemoryFree        = "memory.free.lodestar.dev"
)

// TaintEffect is what a taint does to Placements that do not tolerate it.
// +kubebuilder:validation:Enum=NoSchedule;PreferNoSchedule;NoExecute
type TaintEffect string

const (
	// TaintNoSchedule means the cluster is not chosen anew; existing decisions stay.
	TaintNoSchedule TaintEffect = "NoSchedule"
	// TaintPreferNoSchedule means the cluster is chosen only when others do not suffice.
	TaintPreferNoSchedule TaintEffect = "PreferNoSchedule"
	// TaintNoExecute means the cluster is not chosen, and existing decisions leave it
	// (after the toleration's tolerationSeconds, when one tolerates it for a while).
	TaintNoExecute TaintEffect = "NoExecute"
)

// Taint is a taint of a cluster, in the JSON of the TaintsAnnotation.
type Taint struct {
	// key is the taint's key, a label key.
	Key string `json:"key"`
	// value is the taint's value, a label value; may be empty.
	Value string `json:"value,omitempty"`
	// effect is NoSchedule, PreferNoSchedule or NoExecute.
	Effect TaintEffect `json:"effect"`
	// timeAdded is when a NoExecute taint was added (RFC 3339); it starts the
	// tolerationSeconds of tolerating Placements.
	TimeAdded string `json:"timeAdded,omitempty"`
}

// TolerationOperator compares a toleration with a taint.
// +kubebuilder:validation:Enum=Equal;Exists
type TolerationOperator string

const (
	// TolerationEqual tolerates taints with the same key and value.
	TolerationEqual TolerationOperator = "Equal"
	// TolerationExists tolerates taints with the key, whatever their value, or
	// every taint when the key is empty.
	TolerationExists TolerationOperator = "Exists"
)

// Toleration lets a Placement use clusters with matching taints.
// +kubebuilder:validation:XValidation:rule="!has(self.operator) || self.operator != 'Exists' || !has(self.value) || size(self.value) == 0",message="a toleration with operator Exists takes no value"
// +kubebuilder:validation:XValidation:rule="has(self.key) && size(self.key) > 0 || has(self.operator) && self.operator == 'Exists'",message="an empty key needs operator Exists"
// +kubebuilder:validation:XValidation:rule="!has(self.tolerationSeconds) || has(self.effect) && self.effect == 'NoExecute'",message="tolerationSeconds applies to effect NoExecute only"
type Toleration struct {
	// key is the taint key tolerated; empty with operator Exists tolerates all.
	// +optional
	// +kubebuilder:validation:MaxLength=316
	Key string `json:"key,omitempty"`
	// operator is Equal (the default) or Exists.
	// +optional
	// +kubebuilder:default=Equal
	Operator TolerationOperator `json:"operator,omitempty"`
	// value is the taint value tolerated, with operator Equal.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Value string `json:"value,omitempty"`
	// effect is the taint effect tolerated; empty tolerates every effect.
	// +optional
	Effect TaintEffect `json:"effect,omitempty"`
	// tolerationSeconds, with effect NoExecute, is how long the Placement stays on a
	// cluster after the taint was added; unset tolerates it for ever.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TolerationSeconds *int64 `json:"tolerationSeconds,omitempty"`
}

// SortOrder orders clusters by a property.
// +kubebuilder:validation:Enum=Ascending;Descending
type SortOrder string

const (
	// Ascending prefers clusters with lower values.
	Ascending SortOrder = "Ascending"
	// Descending prefers clusters with higher values.
	Descending SortOrder = "Descending"
)

// Preference scores clusters when a Placement picks some of the eligible ones.
// +kubebuilder:validation:XValidation:rule="has(self.expression) != has(self.propertySort)",message="exactly one of expression and propertySort must be set"
type Preference struct {
	// weight is how much the preference counts, from 1 to 100.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Weight int32 `json:"weight"`

	// expression is a CEL expression over `cluster` that yields a number (higher is
	// better) or a bool (true scores 1). Scores are scaled to 0..1 across the
	// eligible clusters.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Expression string `json:"expression,omitempty"`

	// propertySort prefers clusters by the quantity of one property.
	// +optional
	PropertySort *PropertySort `json:"propertySort,omitempty"`
}

// PropertySort orders clusters by a property whose values are quantities.
type PropertySort struct {
	// name is the property's name in status.properties.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// order is Descending (higher is better, the default) or Ascending.
	// +optional
	// +kubebuilder:default=Descending
	Order SortOrder `json:"order,omitempty"`
}

// TopologySpread spreads the picked clusters evenly over the values of a label or
// property.
type TopologySpread struct {
	// topologyKey is a label key of the ClusterProfiles, or "property:<name>" for a
	// property. Clusters without it are not picked.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	TopologyKey string `json:"topologyKey"`
	// maxSkew is the largest allowed difference between the number of picked
	// clusters in any two domains.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	MaxSkew int32 `json:"maxSkew,omitempty"`
}

// Capacity is the free capacity a cluster must have, read from the properties the
// agent reports (cpu.free.lodestar.dev, memory.free.lodestar.dev). Clusters with
// more free capacity are preferred when a Placement picks some.
type Capacity struct {
	// cpu is the free CPU a cluster must have, as a quantity.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isQuantity(self)",message="cpu must be a quantity, for example 500m or 4"
	CPU string `json:"cpu,omitempty"`
	// memory is the free memory a cluster must have, as a quantity.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isQuantity(self)",message="memory must be a quantity, for example 512Mi or 8Gi"
	Memory string `json:"memory,omitempty"`
}

// SchedulingStatus says how the scheduler chose.
type SchedulingStatus struct {
	// eligible is the number of clusters that passed every filter.
	// +optional
	Eligible int32 `json:"eligible,omitempty"`
	// excluded counts, by reason, the clusters that were not chosen, with a few names.
	// +optional
	// +listType=map
	// +listMapKey=reason
	// +kubebuilder:validation:MaxItems=32
	Excluded []Exclusion `json:"excluded,omitempty"`
}

// Exclusion is one reason clusters were not chosen.
type Exclusion struct {
	// reason is why, for example LabelsMismatch, Tainted, Unhealthy, NotPicked.
	// +required
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason"`
	// count is how many clusters were excluded for the reason.
	// +required
	Count int32 `json:"count"`
	// clusters names up to five of them.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=5
	Clusters []string `json:"clusters,omitempty"`
}

// ClusterProfile conditions the cluster health controller sets.
const (
	// AgentReachableCondition is True while the agent renews its Lease, False once
	// the Lease has expired for longer than the grace period, Unknown before the
	// agent first connects. The scheduler does not choose a cluster anew while it
	// is False.
	AgentReachableCondition = "AgentReachable"
	// ControlPlaneHealthyCondition is the standard condition: the member API
	// server's readiness as the agent reports it; Unknown while the agent is
	// unreachable.
	ControlPlaneHealthyCondition = "ControlPlaneHealthy"

	ReasonLeaseRenewed     = "LeaseRenewed"
	ReasonLeaseExpired     = "LeaseExpired"
	ReasonAgentNotSeen     = "AgentNotConnected"
	ReasonMemberReady      = "MemberReady"
	ReasonMemberNotReady   = "MemberNotReady"
	ReasonAgentUnreachable = "AgentUnreachable"
)

// String is the taint as kubectl prints a node's: key=value:Effect, or key:Effect
// without a value.
func (t Taint) String() string {
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}
