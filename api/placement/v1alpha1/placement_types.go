package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
)

// PlacementSpec says which objects of the Placement's namespace go to which
// clusters, grouped so that a reader sees what is placed (resourceSelectors),
// where (scheduling), how a change reaches the clusters (strategy) and how the
// agents apply it (applyStrategy), what each cluster's copy changes
// (overrides), and what comes back (reporting).
type PlacementSpec struct {
	// resourceSelectors selects the objects of the Placement's own namespace that are
	// placed. An object is placed when any selector matches it. Only namespaced kinds
	// can be selected; cluster-scoped objects are placed by ClusterPlacement.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	ResourceSelectors []ResourceSelector `json:"resourceSelectors"`

	// scheduling says which clusters the objects go to: by labels, names, a CEL
	// expression and free capacity, how many of the eligible ones, ranked how,
	// spread over what, tolerating which taints, replaced when unreachable, and
	// by which scheduler. With neither clusterSelector nor clusterNames, no
	// cluster is selected.
	// +optional
	// +kubebuilder:default={}
	Scheduling Scheduling `json:"scheduling,omitempty"`

	// strategy says how a new revision of the placed objects reaches the selected
	// clusters: AllAtOnce (the default), Rolling, Staged or External, and whether
	// the rollout is paused. Whatever the strategy, clusters the Placement leaves
	// keep the objects until the clusters added in their place report them
	// Available, or the progress deadline passes.
	// +optional
	// +kubebuilder:default={type: AllAtOnce}
	Strategy RolloutStrategy `json:"strategy,omitempty"`

	// applyStrategy says how the agents apply the placed objects: ServerSideApply by
	// default, CreateOnly or ReportOnly, and whether they take over objects that
	// exist on a member but were not placed by this Placement (Never by default).
	// +optional
	ApplyStrategy *lodestarworkv1alpha1.ApplyStrategy `json:"applyStrategy,omitempty"`

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

	// reporting says what comes back from the clusters besides the standard
	// conditions: status values of the placed objects (feedback), their
	// reductions over the fleet (summaries), and whether the hub's own objects
	// get their clusters' status (reflection).
	// +optional
	// +kubebuilder:default={}
	Reporting Reporting `json:"reporting,omitempty"`

	// services says how the Services this Placement places take part in the
	// fleet's Multicluster Services API (docs/services.md).
	// +optional
	Services *PlacedServices `json:"services,omitempty"`

	// dependencies is Ignore (the default) or Follow: also place the
	// ConfigMaps, Secrets, ServiceAccounts and PersistentVolumeClaims of the
	// Placement's namespace that the selected workloads' pod templates
	// reference, and what ResourceInterpretations say their kinds depend on, as
	// if selected (they follow moves, failover and deletion). A Secret follows
	// only when the Placement's last writer may get it on the hub; the
	// DependenciesFollowed condition names what does not follow and why.
	// +optional
	Dependencies DependencyPolicy `json:"dependencies,omitempty"`

	// revisionHistoryLimit is how many PlacementRevisions are kept, besides those a
	// Work or the rollout still uses. Default 10, at most 50; older revisions are
	// also pruned once the kept ones add up to more than 8 MiB, so that edits
	// cannot fill the hub's etcd.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=50
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`
}

// ServiceExportMode says which placed Services are exported.
// +kubebuilder:validation:Enum=None;All
type ServiceExportMode string

// ServiceExportModes.
const (
	// ServiceExportNone exports only the Services whose ServiceExport the
	// Placement places (or a member's admin writes).
	ServiceExportNone ServiceExportMode = "None"
	// ServiceExportAll places a ServiceExport next to every Service placed.
	ServiceExportAll ServiceExportMode = "All"
)

// PlacedServices is how a Placement's Services take part in the Multicluster
// Services API.
type PlacedServices struct {
	// export is None (default: a Service is exported when a ServiceExport of
	// the same name is placed with it, or written on the member) or All: every
	// Service placed gets a ServiceExport of the same name, so that every
	// cluster of the namespace's cluster sets reaches it as
	// <name>.<namespace>.svc.clusterset.local.
	// +optional
	// +kubebuilder:default=None
	Export ServiceExportMode `json:"export,omitempty"`

	// drainSeconds is how long a copy the Placement moves away from keeps
	// running after its exported Services' endpoints left every importer (the
	// time for the importers' proxies to stop sending it new connections and for
	// those open to end), before it is deleted. Default 5.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	DrainSeconds *int32 `json:"drainSeconds,omitempty"`
}

// ResourceSelector selects objects in the Placement's namespace: of one kind, by
// name or by labels (with neither, every object of the kind); or, without kind,
// group and version, by labels alone: every object with those labels of every
// namespaced kind the hub serves, including kinds added later, except what
// belongs to the hub (Events, Pods, Leases, Endpoints, EndpointSlices,
// ControllerRevisions, objects another object controls, the kube-root-ca.crt
// ConfigMap, the default ServiceAccount, ServiceAccount tokens, and Lodestar's own
// objects), and Secrets and PersistentVolumeClaims, which are placed only by a
// selector that names their kind (never the claims a StatefulSet generates).
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
	// conditions are Scheduled (written by the scheduler), Rendered (the
	// revision maker), WorkSynchronized and Progressing (the work generator),
	// Applied, Available, Drifted and StatusReflected (the status aggregator),
	// Interpreted (the interpretation controller, when it places a kind a
	// ResourceInterpretation interprets).
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
	SelectedClusters *int32 `json:"selectedClusters,omitempty"`

	// appliedClusters is the number of selected clusters on which every placed object
	// has been applied at the current revision.
	// +optional
	AppliedClusters *int32 `json:"appliedClusters,omitempty"`

	// availableClusters is the number of selected clusters on which every placed
	// object is available at the current revision.
	// +optional
	AvailableClusters *int32 `json:"availableClusters,omitempty"`

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
	UnlistedClusters *int32 `json:"unlistedClusters,omitempty"`

	// driftedClusters is the number of selected clusters that report a placed
	// object changed on the member and left so (applyStrategy.whenDrifted: Report).
	// +optional
	DriftedClusters *int32 `json:"driftedClusters,omitempty"`

	// revision is the name of the PlacementRevision of the current rendering of
	// the selected objects and overrides: what the rollout moves the clusters to.
	// Written by the revision maker, with the Rendered condition.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Revision string `json:"revision,omitempty"`

	// rollout is where the rollout of the target revision is. Written by the work
	// generator.
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`

	// summaries are the results of spec.reporting.summaries, in their order. Written
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
	UnlistedObjects *int32 `json:"unlistedObjects,omitempty"`

	// claims are the PersistentVolumeClaims on the cluster: those placed, and
	// those placed StatefulSets made there, as its agent last reported them, at
	// most 32.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Claims []ClaimStatus `json:"claims,omitempty"`

	// shares are the cluster's shares of the workloads whose replicas the
	// Placement divides (spec.scheduling.replicas), at most 16.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Shares []ShareStatus `json:"shares,omitempty"`
}

// ShareStatus is one cluster's share of a divided workload.
type ShareStatus struct {
	// object is the workload, as Kind/name in the Placement's namespace:
	// "Deployment/web".
	// +required
	// +kubebuilder:validation:MaxLength=400
	Object string `json:"object"`

	// replicas is what the cluster's Work carries (for a Job, its completions).
	// +required
	Replicas int64 `json:"replicas"`

	// target is the cluster's share by the division: above replicas while an
	// increase waits its turn, below it while a decrease waits for the
	// increases elsewhere to be Available (surge first).
	// +required
	Target int64 `json:"target"`

	// reason says why the share is what it is: the weight, the room, a
	// minimum or maximum, a hold.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Reason string `json:"reason,omitempty"`
}

// ClaimStatus is the state of one PersistentVolumeClaim on a cluster.
type ClaimStatus struct {
	// name is the claim's name; its namespace is that of workload.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// workload is the placed object the claim belongs to, "StatefulSet shop/db",
	// or the placed claim itself, "PersistentVolumeClaim shop/uploads".
	// +required
	// +kubebuilder:validation:MaxLength=400
	Workload string `json:"workload"`

	// phase is Pending, Bound or Lost.
	// +required
	// +kubebuilder:validation:MaxLength=32
	Phase string `json:"phase"`

	// storageClass is the class the claim names; empty for the default.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	StorageClass string `json:"storageClass,omitempty"`

	// accessModes are the claim's access modes.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:MaxLength=32
	AccessModes []string `json:"accessModes,omitempty"`

	// requested is the storage the claim asks for; capacity what its volume has.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Requested string `json:"requested,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Capacity string `json:"capacity,omitempty"`

	// reclaimDelete is true when the bound volume's reclaim policy is Delete:
	// deleting the claim deletes its data.
	// +optional
	ReclaimDelete bool `json:"reclaimDelete,omitempty"`

	// holds is true when the claim keeps its workload on the cluster: Bound and
	// ReadWriteOnce or ReadWriteOncePod (spec.strategy.stateful).
	// +optional
	Holds bool `json:"holds,omitempty"`

	// reason says why the claim is not Bound.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Reason string `json:"reason,omitempty"`
}

// Placement places objects of its namespace on the member clusters it selects.
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories=lodestar,shortName=plc
// +kubebuilder:printcolumn:name="Scheduled",type=string,JSONPath=`.status.conditions[?(@.type=="Scheduled")].status`,description="Whether the scheduler wrote decisions for the current generation"
// +kubebuilder:printcolumn:name="Clusters",type=integer,JSONPath=`.status.selectedClusters`,description="Clusters the PlacementDecisions name"
// +kubebuilder:printcolumn:name="Applied",type=integer,JSONPath=`.status.appliedClusters`,description="Selected clusters with every placed object applied at the current revision"
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.availableClusters`,description="Selected clusters with every placed object available at the current revision"
// +kubebuilder:printcolumn:name="Synced",type=string,JSONPath=`.status.conditions[?(@.type=="WorkSynchronized")].status`,priority=1,description="Whether every selected cluster's Works hold what the rollout gives them"
// +kubebuilder:printcolumn:name="Drifted",type=integer,JSONPath=`.status.driftedClusters`,priority=1,description="Selected clusters reporting a placed object changed on the member (whenDrifted: Report)"
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.status.rollout.targetRevisionNumber`,description="The PlacementRevision number being rolled out"
// +kubebuilder:printcolumn:name="Progressing",type=string,JSONPath=`.status.conditions[?(@.type=="Progressing")].reason`,priority=1,description="Where the rollout is (the Progressing condition's reason)"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`,description="Whether every selected cluster has every placed object available"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`,description="Time since creation"
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
