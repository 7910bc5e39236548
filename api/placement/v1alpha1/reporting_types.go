package v1alpha1

import (
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
)

// Reporting says what comes back from the clusters besides the standard
// conditions.
type Reporting struct {
	// feedback names status values of the placed objects that the agents
	// report back, per kind.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	Feedback []lodestarworkv1alpha1.FeedbackRule `json:"feedback,omitempty"`

	// summaries reduce feedback values over all the clusters (Sum, Min, Max,
	// Avg, Count, optionally per group) into status.summaries.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Summaries []StatusSummary `json:"summaries,omitempty"`

	// reflection: None (the default) or Aggregate, which writes the status of
	// the placed workloads on the hub from their clusters' copies (for hubs that
	// run no controller for them; see docs/hub.md).
	// +optional
	Reflection StatusReflection `json:"reflection,omitempty"`
}

// StatusReflection says whether Lodestar writes the status of the placed objects
// on the hub from their copies on the clusters.
// +kubebuilder:validation:Enum=None;Aggregate
type StatusReflection string

const (
	// ReflectionNone leaves the hub's objects' status alone (the default).
	ReflectionNone StatusReflection = "None"
	// ReflectionAggregate writes the status subresource of each placed Deployment,
	// StatefulSet, DaemonSet, ReplicaSet and Job on the hub as the sum over its
	// clusters, with the conditions of the worst cluster; any other kind placed on
	// exactly one cluster gets that cluster's status. Lodestar stops writing an
	// object's status when something else writes it (a hub that runs
	// kube-controller-manager) and says so in the StatusReflected condition.
	ReflectionAggregate StatusReflection = "Aggregate"
)

// SummaryOperation is how a status summary reduces the values of all clusters.
// +kubebuilder:validation:Enum=Sum;Min;Max;Avg;Count
type SummaryOperation string

// Summary operations.
const (
	SummarySum   SummaryOperation = "Sum"
	SummaryMin   SummaryOperation = "Min"
	SummaryMax   SummaryOperation = "Max"
	SummaryAvg   SummaryOperation = "Avg"
	SummaryCount SummaryOperation = "Count"
)

// StatusSummary reduces one status feedback value of the placed objects over all
// the clusters: for example the ready replicas of a Deployment summed over the
// fleet, or the number of clusters per image version.
// +kubebuilder:validation:XValidation:rule="self.operation == 'Count' || has(self.value)",message="value is required unless the operation is Count"
type StatusSummary struct {
	// name names the summary in status.summaries.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-zA-Z][a-zA-Z0-9_-]*$`
	Name string `json:"name"`

	// resource names the placed objects whose feedback is reduced: every placed
	// object of the kind (and of the name, when given), on every cluster.
	// +required
	Resource SummaryResource `json:"resource"`

	// value names a status feedback value (spec.reporting.feedback) of those objects.
	// Required for every operation but Count, which without it counts the objects
	// that report feedback at all.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Value string `json:"value,omitempty"`

	// operation reduces the values: Sum, Min, Max, Avg (of numbers) or Count.
	// +required
	Operation SummaryOperation `json:"operation"`

	// groupBy, when set, reduces per group instead of over all clusters.
	// +optional
	GroupBy *SummaryGroupBy `json:"groupBy,omitempty"`

	// maxGroups caps how many groups are reported, the largest first; the rest
	// are counted in omittedGroups. Default 20.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	MaxGroups *int32 `json:"maxGroups,omitempty"`
}

// SummaryResource names placed objects by kind and, optionally, name.
type SummaryResource struct {
	// group is the API group of the kind; empty for the core group.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`

	// kind is the kind of the objects, for example Deployment.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`

	// name limits the summary to the objects of this name.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
}

// SummaryGroupBy groups clusters by a feedback value or by a label of their
// ClusterProfile. Exactly one is set.
// +kubebuilder:validation:XValidation:rule="has(self.value) != has(self.clusterLabel)",message="exactly one of value and clusterLabel must be set"
type SummaryGroupBy struct {
	// value names a status feedback value of the same objects.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Value string `json:"value,omitempty"`

	// clusterLabel names a label of the clusters' ClusterProfiles, for example
	// topology.kubernetes.io/region.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	ClusterLabel string `json:"clusterLabel,omitempty"`
}

// SummaryStatus is the result of one status summary.
type SummaryStatus struct {
	// name is the summary's name in spec.reporting.summaries.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// value is the result over every counted object, as a decimal number; absent
	// when there is none (Min, Max and Avg over no values).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Value string `json:"value,omitempty"`

	// count is how many objects' values were reduced.
	// +optional
	Count *int32 `json:"count,omitempty"`

	// stale is how many clusters were left out because their Work is not at its
	// current generation, or their report of it is not in yet.
	// +optional
	Stale *int32 `json:"stale,omitempty"`

	// missing is how many current objects do not report the value.
	// +optional
	Missing *int32 `json:"missing,omitempty"`

	// invalid is how many reported a value the operation cannot use (not a
	// number).
	// +optional
	Invalid *int32 `json:"invalid,omitempty"`

	// groups are the results per group, the largest count first, at most
	// maxGroups.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	Groups []SummaryGroup `json:"groups,omitempty"`

	// omittedGroups is how many groups are left out of groups by maxGroups.
	// +optional
	OmittedGroups *int32 `json:"omittedGroups,omitempty"`

	// message says why the summary cannot be computed, or what it left out.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// SummaryGroup is the result of a summary for one group.
type SummaryGroup struct {
	// key is the group's value of the groupBy feedback value or cluster label;
	// "(none)" for objects without one.
	// +required
	// +kubebuilder:validation:MaxLength=256
	Key string `json:"key"`

	// value is the result over the group's objects.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Value string `json:"value,omitempty"`

	// count is how many objects' values are in the group.
	// +required
	Count int32 `json:"count"`
}

// ObjectState is the state of one placed object on a cluster.
// +kubebuilder:validation:Enum=Available;Progressing;Degraded;NotApplied;Unknown
type ObjectState string

// Object states.
const (
	ObjectAvailable   ObjectState = "Available"
	ObjectProgressing ObjectState = "Progressing"
	ObjectDegraded    ObjectState = "Degraded"
	ObjectNotApplied  ObjectState = "NotApplied"
	ObjectUnknown     ObjectState = "Unknown"
)

// ObjectStatus is the state of one placed object on one cluster, as its agent
// reports it on the Work.
type ObjectStatus struct {
	// group is the object's API group; empty for the core group.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`

	// kind is the object's kind.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`

	// namespace is the object's namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`

	// name is the object's name.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// state is Available, Progressing, Degraded, NotApplied or Unknown (not
	// reported at the Work's current generation).
	// +required
	State ObjectState `json:"state"`

	// message says why it is not available.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message,omitempty"`

	// feedback are the status feedback values the agent reported for it.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Feedback *JSON `json:"feedback,omitempty"`
}
