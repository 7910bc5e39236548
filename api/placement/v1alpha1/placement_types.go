package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
)

// PlacementSpec says which objects of the Placement's namespace go to which clusters.
// +kubebuilder:validation:XValidation:rule="!has(self.preferences) || has(self.numberOfClusters)",message="preferences need numberOfClusters"
// +kubebuilder:validation:XValidation:rule="!has(self.topologySpread) || has(self.numberOfClusters)",message="topologySpread needs numberOfClusters"
// +kubebuilder:validation:XValidation:rule="!has(self.failover) || has(self.numberOfClusters)",message="failover needs numberOfClusters"
// +kubebuilder:validation:XValidation:rule="!has(self.numberOfClusters) || !has(self.clusterNames) || self.numberOfClusters <= size(self.clusterNames)",message="numberOfClusters cannot exceed the number of clusterNames"
type PlacementSpec struct {
	// resourceSelectors selects the objects of the Placement's own namespace that are
	// placed. An object is placed when any selector matches it. Only namespaced kinds
	// can be selected; cluster-scoped objects are placed by ClusterPlacement.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	ResourceSelectors []ResourceSelector `json:"resourceSelectors"`

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

	// applyStrategy says how the agents apply the placed objects: ServerSideApply by
	// default, CreateOnly or ReportOnly, and whether they take over objects that
	// exist on a member but were not placed by this Placement (Never by default).
	// +optional
	ApplyStrategy *lodestarworkv1alpha1.ApplyStrategy `json:"applyStrategy,omitempty"`

	// statusFeedback names status values of the placed objects that the agents
	// report back, per kind.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	StatusFeedback []lodestarworkv1alpha1.FeedbackRule `json:"statusFeedback,omitempty"`

	// statusSummaries reduce status feedback values over all the clusters (Sum,
	// Min, Max, Avg, Count, optionally per group) into status.summaries.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	StatusSummaries []StatusSummary `json:"statusSummaries,omitempty"`

	// statusReflection: None (the default) or Aggregate, which writes the status
	// of the placed workloads on the hub from their clusters' copies (for hubs
	// that run no controller for them; see docs/hub.md).
	// +optional
	StatusReflection StatusReflection `json:"statusReflection,omitempty"`

	// strategy says how a new revision of the placed objects reaches the selected
	// clusters: AllAtOnce (the default), Rolling, Staged or External. Whatever the
	// strategy, clusters the Placement leaves keep the objects until the clusters
	// added in their place report them Available, or the progress deadline passes.
	// +optional
	Strategy *RolloutStrategy `json:"strategy,omitempty"`

	// paused stops the rollout: no further cluster is given the target revision
	// (clusters already given it finish) and no cluster fails by the progress
	// deadline while it is set. Default false.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// failover, when set, replaces a chosen cluster whose agent has been
	// unreachable for tolerationSeconds by another eligible cluster; only with
	// numberOfClusters. Off by default: a Placement that names its clusters, or
	// takes every matching one, never loses a copy to a disconnect.
	// +optional
	Failover *Failover `json:"failover,omitempty"`

	// overrides customise the placed objects per cluster: an ordered list of rules,
	// each for some clusters and objects, with one action (jsonPatch, mergePatch,
	// image, remove or delete). Later rules win. A rule that fails on a cluster
	// leaves that cluster's Work at its last good content; the others proceed.
	// Overrides are part of each PlacementRevision and roll out with the objects.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Overrides []Override `json:"overrides,omitempty"`

	// revisionHistoryLimit is how many PlacementRevisions are kept, besides those a
	// Work or the rollout still uses. Default 10.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`
}

// ResourceSelector selects objects in the Placement's namespace: of one kind, by
// name or by labels (with neither, every object of the kind); or, without kind,
// group and version, by labels alone: every object with those labels of every
// namespaced kind the hub serves, including kinds added later, except what
// belongs to the hub (Events, Pods, Leases, Endpoints, EndpointSlices,
// ControllerRevisions, objects another object controls, the kube-root-ca.crt
// ConfigMap, the default ServiceAccount, ServiceAccount tokens, and Lodestar's own
// objects) and Secrets, which are placed only by a selector that names kind Secret.
// +kubebuilder:validation:XValidation:rule="!(has(self.name) && has(self.labelSelector))",message="name and labelSelector are mutually exclusive"
// +kubebuilder:validation:XValidation:rule="has(self.kind) == has(self.version)",message="kind and version go together"
// +kubebuilder:validation:XValidation:rule="has(self.kind) || (has(self.labelSelector) && !has(self.group))",message="a selector without kind selects by labelSelector alone (no group, version or name)"
type ResourceSelector struct {
	// group is the API group of the kind; empty for the core group.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`

	// version is the API version of the kind, for example v1; required with kind.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Version string `json:"version,omitempty"`

	// kind is the kind of the objects, for example Deployment. Without it (and
	// without group and version) the selector selects by labelSelector across
	// kinds.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind,omitempty"`

	// name selects the one object with this name.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// labelSelector selects the objects whose labels match.
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
}

// PlacementStatus is what Lodestar observed of a Placement. Each hub controller owns
// its own fields and conditions and writes only those (server-side apply).
type PlacementStatus struct {
	// conditions are Scheduled (written by the scheduler), WorkSynchronized and
	// Progressing (the work generator), Applied and Available (the status
	// aggregator).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation the scheduler last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// selectedClusters is the number of clusters the Placement's decisions name.
	// +optional
	SelectedClusters int32 `json:"selectedClusters,omitempty"`

	// appliedClusters is the number of selected clusters on which every placed object
	// has been applied at the current revision.
	// +optional
	AppliedClusters int32 `json:"appliedClusters,omitempty"`

	// availableClusters is the number of selected clusters on which every placed
	// object is available at the current revision.
	// +optional
	AvailableClusters int32 `json:"availableClusters,omitempty"`

	// scheduling says how many clusters were eligible and why others were not chosen.
	// +optional
	Scheduling *SchedulingStatus `json:"scheduling,omitempty"`

	// clusters is the per-cluster state of the placed objects, one entry per cluster
	// that has a Work for this Placement, sorted by name. At most 100 clusters are
	// listed, those whose objects are not applied and available first, so that the
	// status stays small however many clusters a Placement reaches; the
	// PlacementDecisions name every selected cluster, and each cluster's Work carries
	// its full state.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	Clusters []ClusterStatus `json:"clusters,omitempty"`

	// unlistedClusters is how many clusters with a Work for this Placement are not
	// in clusters; all of them have their objects applied and available whenever
	// fewer than 100 clusters have problems.
	// +optional
	UnlistedClusters int32 `json:"unlistedClusters,omitempty"`

	// driftedClusters is the number of selected clusters that report a placed
	// object changed on the member and left so (applyStrategy.whenDrifted: Report).
	// +optional
	DriftedClusters int32 `json:"driftedClusters,omitempty"`

	// rollout is where the rollout of the target revision is. Written by the work
	// generator.
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`

	// summaries are the results of spec.statusSummaries, in their order. Written
	// by the status aggregator.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Summaries []SummaryStatus `json:"summaries,omitempty"`
}

// ClusterStatus is the state of a Placement's objects on one member cluster.
type ClusterStatus struct {
	// name is the name of the cluster's ClusterProfile.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// applied says whether every object of the Work was applied on the cluster at the
	// Work's current generation: True, False or Unknown (not reported yet).
	// +required
	Applied metav1.ConditionStatus `json:"applied"`

	// available says whether every object of the Work is available on the cluster
	// at the Work's current generation: True, False or Unknown.
	// +optional
	Available metav1.ConditionStatus `json:"available,omitempty"`

	// reason is the reason of the Work's Applied condition.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`

	// message is the message of the Work's Applied condition.
	// +optional
	// +kubebuilder:validation:MaxLength=32768
	Message string `json:"message,omitempty"`

	// work is the name of the Work in the cluster's namespace on the hub.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Work string `json:"work,omitempty"`

	// drift names the placed objects changed on the member and the changed fields,
	// when the cluster reports any (applyStrategy.whenDrifted: Report).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Drift string `json:"drift,omitempty"`

	// reasons are the first reasons the cluster's objects are not applied or not
	// available, each naming the object, for example "PersistentVolumeClaim
	// shop/uploads: the claim is Pending".
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=3
	// +kubebuilder:validation:items:MaxLength=1024
	Reasons []string `json:"reasons,omitempty"`

	// objects are the placed objects on the cluster that are not available or
	// that report status feedback, at most 32; the others are available.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Objects []ObjectStatus `json:"objects,omitempty"`

	// unlistedObjects is how many objects that are not available or report
	// feedback are not in objects, by its cap or the status's size budget.
	// +optional
	UnlistedObjects int32 `json:"unlistedObjects,omitempty"`
}

// Placement places objects of its namespace on the member clusters it selects.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories=lodestar,shortName=plc
// +kubebuilder:printcolumn:name="Scheduled",type=string,JSONPath=`.status.conditions[?(@.type=="Scheduled")].status`
// +kubebuilder:printcolumn:name="Clusters",type=integer,JSONPath=`.status.selectedClusters`
// +kubebuilder:printcolumn:name="Applied",type=integer,JSONPath=`.status.appliedClusters`
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.availableClusters`
// +kubebuilder:printcolumn:name="Synced",type=string,JSONPath=`.status.conditions[?(@.type=="WorkSynchronized")].status`,priority=1
// +kubebuilder:printcolumn:name="Drifted",type=integer,JSONPath=`.status.driftedClusters`,priority=1
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.status.rollout.targetRevisionNumber`
// +kubebuilder:printcolumn:name="Progressing",type=string,JSONPath=`.status.conditions[?(@.type=="Progressing")].reason`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Placement struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what the user asks for.
	// +required
	Spec PlacementSpec `json:"spec"`

	// status is what Lodestar observed.
	// +optional
	Status PlacementStatus `json:"status,omitempty"`
}

// PlacementList is a list of Placements.
// +kubebuilder:object:root=true
type PlacementList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the Placements.
	Items []Placement `json:"items"`
}
