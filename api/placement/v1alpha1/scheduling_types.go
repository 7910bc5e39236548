package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Property names that the agent reports in ClusterProfile status.properties and
// that the scheduler's capacity rules read. Values are Kubernetes quantities.
const (
	PropertyNodeCount         = "nodes.lodestar.dev"
	PropertyCPUAllocatable    = "cpu.allocatable.lodestar.dev"
	PropertyCPUFree           = "cpu.free.lodestar.dev"
	PropertyMemoryAllocatable = "memory.allocatable.lodestar.dev"
	PropertyMemoryFree        = "memory.free.lodestar.dev"
	// PropertyConsumerTunnel is "true" when the cluster's agent serves
	// consumers through its tunnel: the hub then publishes the lodestar-tunnel
	// access provider (TunnelProvider) in the ClusterProfile. The agent says
	// only that; where consumers connect and which CA they trust, the hub
	// writes.
	PropertyConsumerTunnel = "consumers.tunnel.lodestar.dev"
)

// Suffixes of the properties the agent reports for each extended resource its
// nodes advertise (nvidia.com/gpu, any <domain>/<name>): <name> + suffix, for
// example nvidia.com/gpu.free.lodestar.dev. Values are quantities: the ready,
// schedulable nodes' allocatable amount, what the pods on them have not
// requested, and the most of it free on one node.
const (
	ResourceAllocatableSuffix = ".allocatable.lodestar.dev"
	ResourceFreeSuffix        = ".free.lodestar.dev"
	ResourceLargestFreeSuffix = ".largestfree.lodestar.dev"
)

// PropertyStorageClasses is the property in which the agent reports the names
// of the member's StorageClasses, sorted and comma-separated (absent when it
// has none: a property's value is never empty); the scheduler's
// requiredStorageClasses reads it.
const PropertyStorageClasses = "storageclasses.lodestar.dev"

// Scheduling says which clusters a Placement's objects go to.
// +kubebuilder:validation:XValidation:rule="!has(self.preferences) || has(self.numberOfClusters)",message="preferences need numberOfClusters"
// +kubebuilder:validation:XValidation:rule="!has(self.topologySpread) || has(self.numberOfClusters)",message="topologySpread needs numberOfClusters"
// +kubebuilder:validation:XValidation:rule="!has(self.failover) || has(self.numberOfClusters)",message="failover needs numberOfClusters"
// +kubebuilder:validation:XValidation:rule="!has(self.numberOfClusters) || !has(self.clusterNames) || self.numberOfClusters <= size(self.clusterNames)",message="numberOfClusters cannot exceed the number of clusterNames"
type Scheduling struct {
	// schedulerName names the scheduler that writes this Placement's
	// PlacementDecisions: lodestar (the default) or another; Lodestar consumes the
	// decisions whoever writes them.
	// +optional
	// +kubebuilder:default=lodestar
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="schedulerName is immutable"
	SchedulerName string `json:"schedulerName,omitempty"`

	// clusterSelector selects clusters by the labels of their ClusterProfile. An
	// empty selector matches every cluster. When neither clusterSelector nor
	// clusterNames is set, no cluster is selected.
	// +optional
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`

	// clusterNames selects clusters by name. With clusterSelector, a cluster must
	// match both.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MaxLength=253
	ClusterNames []string `json:"clusterNames,omitempty"`

	// clusterExpression is a CEL expression over `cluster` that a cluster must make
	// true: cluster.name, cluster.namespace (its cluster set), cluster.labels,
	// cluster.properties (name to value; compare numbers with int() or double(),
	// quantities with quantity()), cluster.version (Kubernetes version) and
	// cluster.conditions (type to status).
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	ClusterExpression string `json:"clusterExpression,omitempty"`

	// requiredCapacity is the free capacity a cluster must have.
	// +optional
	RequiredCapacity *Capacity `json:"requiredCapacity,omitempty"`

	// requiredStorageClasses are StorageClasses a cluster must offer, for
	// example the class a StatefulSet's claim templates name: a cluster whose
	// agent reports (property storageclasses.lodestar.dev) that it lacks one,
	// or that reports no storage classes (the property is absent when the
	// member has none), is not chosen anew. A cluster
	// already chosen stays.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	RequiredStorageClasses []string `json:"requiredStorageClasses,omitempty"`

	// tolerations let the Placement use tainted clusters.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Tolerations []Toleration `json:"tolerations,omitempty"`

	// numberOfClusters, when set, picks that many of the eligible clusters, ranked by
	// preferences (and by free capacity with requiredCapacity), with a deterministic
	// tiebreak; clusters already picked stay while they remain eligible. Unset means
	// every eligible cluster.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100000
	NumberOfClusters *int32 `json:"numberOfClusters,omitempty"`

	// preferences rank the eligible clusters when numberOfClusters is set.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Preferences []Preference `json:"preferences,omitempty"`

	// topologySpread spreads the picked clusters over a label's or property's values.
	// +optional
	TopologySpread *TopologySpread `json:"topologySpread,omitempty"`

	// failover, when set, replaces a chosen cluster whose agent has been
	// unreachable for tolerationSeconds by another eligible cluster; only with
	// numberOfClusters. Off by default: a Placement that names its clusters, or
	// takes every matching one, never loses a copy to a disconnect.
	// +optional
	Failover *Failover `json:"failover,omitempty"`

	// replicas, when set, divides the replicas of the placed workloads
	// (Deployments, StatefulSets, ReplicaSets, and Jobs' completions and
	// parallelism) over the chosen clusters instead of giving each cluster all
	// of them: evenly, by weights, or by free capacity, with per-cluster
	// minimum and maximum. The other objects still go to every chosen cluster;
	// a workload whose share on a cluster is 0 is not placed there. Part of
	// each PlacementRevision: a change rolls out like the objects.
	// +optional
	Replicas *ReplicaDivision `json:"replicas,omitempty"`
}

// DivisionMethod says what a Placement divides its workloads' replicas by.
// +kubebuilder:validation:Enum=Even;Weighted;Capacity
type DivisionMethod string

const (
	// DivisionEven gives every chosen cluster the same weight.
	DivisionEven DivisionMethod = "Even"
	// DivisionWeighted weighs each cluster by the highest weight of the rules
	// it matches; a cluster no rule matches gets none (every cluster weighs 1
	// when no chosen cluster has a weight).
	DivisionWeighted DivisionMethod = "Weighted"
	// DivisionCapacity weighs each cluster by how many of the workload's pods
	// its free capacity holds (cpu.free and memory.free over the pod's
	// requests), and keeps replicas where they are when only the total changes
	// (steady) until spec.scheduling.replicas.rebalance changes.
	DivisionCapacity DivisionMethod = "Capacity"
)

// ReplicaDivision says how a Placement divides its workloads' replicas over
// its chosen clusters (Webster's divisor method, ties by a hash of the
// Placement's UID and the cluster's name).
// +kubebuilder:validation:XValidation:rule="self.method != 'Weighted' || has(self.weights) && self.weights.exists(w, w.weight > 0)",message="method Weighted needs weights, one of them above 0"
// +kubebuilder:validation:XValidation:rule="self.method == 'Capacity' || !has(self.rebalance)",message="rebalance applies to method Capacity"
type ReplicaDivision struct {
	// method is Even (the default), Weighted or Capacity.
	// +optional
	// +kubebuilder:default=Even
	Method DivisionMethod `json:"method,omitempty"`

	// weights are rules for the chosen clusters: a weight (method Weighted),
	// and a minimum and maximum share (every method). A cluster matching
	// several rules takes the one with the highest weight.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Weights []ReplicaWeight `json:"weights,omitempty"`

	// rebalance, with method Capacity, is a token: changing it (to a time, say)
	// divides anew by the clusters' free capacity, moving replicas, once; until
	// then a change of the total keeps existing replicas where they are.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Rebalance string `json:"rebalance,omitempty"`
}

// ReplicaWeight is one rule of a division: the clusters it is for, by name or
// by their ClusterProfile's labels (neither: every cluster), and their weight,
// minimum and maximum share.
// +kubebuilder:validation:XValidation:rule="!has(self.min) || !has(self.max) || self.min <= self.max",message="min cannot exceed max"
type ReplicaWeight struct {
	// clusterNames are the clusters the rule is for.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MaxLength=253
	ClusterNames []string `json:"clusterNames,omitempty"`

	// clusterSelector selects the clusters the rule is for by the labels of
	// their ClusterProfile; with clusterNames, a cluster must match both.
	// +optional
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`

	// weight is the clusters' relative weight, with method Weighted (0 gives
	// them nothing beyond min). Default 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	Weight *int32 `json:"weight,omitempty"`

	// min is the share each of the clusters gets first.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	Min *int32 `json:"min,omitempty"`

	// max caps each of the clusters' share.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	Max *int32 `json:"max,omitempty"`
}

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
	// forceAt, on the drain taint only (`kubectl lodestar drain --force-after`),
	// is when the drain overrules tenants (RFC 3339): from then on a tenant's
	// Placement tolerates the drain no longer and its disruption budget keeps
	// no copy there. ClusterPlacements, the platform's own, are not overruled.
	ForceAt string `json:"forceAt,omitempty"`
}

// ForcedAt is when a drain taint overrules tenants (its ForceAt), if it does.
func (t Taint) ForcedAt() (time.Time, bool) {
	if t.Key != DrainTaintKey || t.ForceAt == "" {
		return time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339, t.ForceAt)
	return at, err == nil
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
	// +kubebuilder:validation:XValidation:rule="isQuantity(self) && self.matches('^[+-]?[0-9]{0,19}([.][0-9]{0,9})?([eE][+-]?[0-9]{1,2}|[numkMGTPE]|[KMGTPE]i)?$')",message="cpu must be a quantity of at most 19 digits before the point and 9 after, with an exponent of at most 2 digits, for example 500m or 4"
	CPU string `json:"cpu,omitempty"`
	// memory is the free memory a cluster must have, as a quantity.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isQuantity(self) && self.matches('^[+-]?[0-9]{0,19}([.][0-9]{0,9})?([eE][+-]?[0-9]{1,2}|[numkMGTPE]|[KMGTPE]i)?$')",message="memory must be a quantity of at most 19 digits before the point and 9 after, with an exponent of at most 2 digits, for example 512Mi or 8Gi"
	Memory string `json:"memory,omitempty"`
	// resources are free amounts of extended resources a cluster must have
	// (nvidia.com/gpu, amd.com/gpu, any <domain>/<name> its nodes advertise),
	// over the cluster or, with onOneNode, on one of its nodes.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Resources []ResourceAmount `json:"resources,omitempty"`
}

// ResourceAmount is a free amount of one extended resource.
type ResourceAmount struct {
	// name is the extended resource, as nodes advertise it: <domain>/<name>,
	// for example nvidia.com/gpu.
	// +required
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('kubernetes.io/') && !self.startsWith('requests.')",message="name must be an extended resource (<domain>/<name>, not kubernetes.io/); cpu and memory have their own fields"
	Name string `json:"name"`
	// quantity is the amount, for example 4.
	// +required
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isQuantity(self) && self.matches('^[+-]?[0-9]{0,19}([.][0-9]{0,9})?([eE][+-]?[0-9]{1,2}|[numkMGTPE]|[KMGTPE]i)?$')",message="quantity must be a quantity of at most 19 digits before the point and 9 after, with an exponent of at most 2 digits, for example 4"
	Quantity string `json:"quantity"`
	// onOneNode asks for the amount free on one node (the largest free on a
	// node, as the agent reports it) rather than over the cluster: "4 GPUs
	// on one node" for a pod that needs them together. Default false.
	// +optional
	OnOneNode bool `json:"onOneNode,omitempty"`
}

// SchedulingStatus says how the scheduler chose.
type SchedulingStatus struct {
	// eligible is the number of clusters that passed every filter.
	// +optional
	Eligible *int32 `json:"eligible,omitempty"`
	// excluded counts, by reason, the clusters that were not chosen, with a few names.
	// +optional
	// +listType=map
	// +listMapKey=reason
	// +kubebuilder:validation:MaxItems=32
	Excluded []Exclusion `json:"excluded,omitempty"`
	// clusters explains, for the first clusters by name that were not chosen
	// (at most MaxExplainedClusters, the clusters clusterNames does not name left
	// out), each filter that excluded them: what a tenant, who may not read the
	// ClusterProfiles, reads with `kubectl lodestar why`.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=10
	Clusters []ExcludedCluster `json:"clusters,omitempty"`
}

// MaxExplainedClusters is how many excluded clusters a Placement's
// status.scheduling.clusters explains.
const MaxExplainedClusters = 10

// ExcludedCluster is why one cluster was not chosen.
type ExcludedCluster struct {
	// name is the cluster's name (its ClusterProfile's).
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// reason is the scheduler's reason (an Exclusion reason).
	// +required
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason"`
	// verdicts are the filters that excluded it, in the order the scheduler
	// applies them; none when it passed every filter and the ranking did not
	// pick it (NotPicked).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Verdicts []FilterVerdict `json:"verdicts,omitempty"`
}

// FilterVerdict is one filter that excluded a cluster.
type FilterVerdict struct {
	// filter names the filter: failover, clusterNames, clusterSelector, health,
	// taint, clusterExpression, cpu or memory.
	// +required
	// +kubebuilder:validation:MaxLength=32
	Filter string `json:"filter"`
	// reason is the filter's reason.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason,omitempty"`
	// detail says what was compared, for example the selector against the
	// cluster's labels.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Detail string `json:"detail,omitempty"`
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

// Reasons of an Exclusion: why the scheduler did not choose clusters. `kubectl
// lodestar why` gives them per cluster too.
const (
	// ExclusionNotInClusterNames: spec.scheduling.clusterNames does not name it.
	ExclusionNotInClusterNames = "NotInClusterNames"
	// ExclusionLabelsMismatch: its labels do not match the clusterSelector.
	ExclusionLabelsMismatch = "LabelsMismatch"
	// ExclusionUnhealthy: its agent is unreachable or its control plane unhealthy.
	ExclusionUnhealthy = "Unhealthy"
	// ExclusionHealthNotReported: its agent has not reported its health yet.
	ExclusionHealthNotReported = "HealthNotReported"
	// ExclusionTainted: it has a taint the Placement does not tolerate.
	ExclusionTainted = "Tainted"
	// ExclusionTolerationExpired: a NoExecute taint's tolerationSeconds passed.
	ExclusionTolerationExpired = "TolerationExpired"
	// ExclusionExpressionFalse: clusterExpression is false for it.
	ExclusionExpressionFalse = "ExpressionFalse"
	// ExclusionExpressionError: clusterExpression cannot be evaluated for it.
	ExclusionExpressionError = "ExpressionError"
	// ExclusionInsufficientCapacity: it has less free capacity than requiredCapacity.
	ExclusionInsufficientCapacity = "InsufficientCapacity"
	// ExclusionMissingStorageClass: the cluster lacks a class of
	// requiredStorageClasses, or does not report its classes.
	ExclusionMissingStorageClass = "MissingStorageClass"
	// ExclusionMissingTopologyKey: it has no value of topologySpread's key.
	ExclusionMissingTopologyKey = "MissingTopologyKey"
	// ExclusionTopologySkew: picking it would exceed topologySpread's maxSkew.
	ExclusionTopologySkew = "TopologySkew"
	// ExclusionNotPicked: eligible, but numberOfClusters others ranked higher.
	ExclusionNotPicked = "NotPicked"
	// ExclusionFailedOver: it was chosen and is being replaced because its agent
	// has been unreachable longer than spec.scheduling.failover allows.
	ExclusionFailedOver = ReasonFailedOver
	// ExclusionNotInClusterSets: it is in no cluster set the Placement's
	// namespace is bound to (reported by `kubectl lodestar why`).
	ExclusionNotInClusterSets = "NotInClusterSets"
)

// Reasons the scheduler keeps chosen clusters that it would not choose anew;
// not exclusions (status.scheduling and `kubectl lodestar why` report them).
const (
	// KeptWhileUnhealthy: the cluster is unhealthy and kept because it was
	// chosen before.
	KeptWhileUnhealthy = "KeptWhileUnhealthy"
	// KeptWhileExpressionFails: clusterExpression cannot be evaluated for the
	// cluster now (a property it reads vanished, say); kept because it was chosen
	// before. Only a false result removes it.
	KeptWhileExpressionFails = "KeptWhileExpressionFails"
)

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
	// ReasonIdentityMismatch: the agent reports a cluster ID other than the
	// one recorded at join (ClusterIDAnnotation): its token may be in another
	// cluster's hands. ControlPlaneHealthy is False until the IDs agree.
	ReasonIdentityMismatch = "IdentityMismatch"
)

// String is the taint as kubectl prints a node's: key=value:Effect, or key:Effect
// without a value.
func (t Taint) String() string {
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}

// Failover replaces chosen clusters whose agent is unreachable.
type Failover struct {
	// tolerationSeconds is how long a chosen cluster's agent may be unreachable
	// before the cluster is replaced. Default 300.
	// +optional
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	TolerationSeconds *int32 `json:"tolerationSeconds,omitempty"`

	// gracePeriodSeconds is how long the unreachable cluster's Work is kept when
	// its replacement is not Available; once the replacement is, it goes at once.
	// Default 600.
	// +optional
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=604800
	GracePeriodSeconds *int32 `json:"gracePeriodSeconds,omitempty"`
}
