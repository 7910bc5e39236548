package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// RolloutStrategyType says how a new revision of a Placement reaches its clusters.
// +kubebuilder:validation:Enum=AllAtOnce;Rolling;Staged;External
type RolloutStrategyType string

const (
	// RolloutAllAtOnce updates every selected cluster at once.
	RolloutAllAtOnce RolloutStrategyType = "AllAtOnce"
	// RolloutRolling updates a bounded number of clusters at a time.
	RolloutRolling RolloutStrategyType = "Rolling"
	// RolloutStaged updates clusters stage by stage, each stage after an optional
	// approval.
	RolloutStaged RolloutStrategyType = "Staged"
	// RolloutExternal updates a cluster only when a RolloutApproval names it.
	RolloutExternal RolloutStrategyType = "External"
)

// StatefulMoves says whether workloads with data on a cluster move with the
// Placement.
// +kubebuilder:validation:Enum=Hold;Move
type StatefulMoves string

const (
	// StatefulHold keeps a cluster's copy while its claims hold it (Bound and
	// ReadWriteOnce or ReadWriteOncePod), and gives no other cluster a copy in
	// its place: the data stays with the workload. The default.
	StatefulHold StatefulMoves = "Hold"
	// StatefulMove moves such workloads too, make-before-break: the new
	// cluster's claims are new and empty, and the old cluster keeps its claims
	// and their data (applyStrategy.claims: Retain).
	StatefulMove StatefulMoves = "Move"
)

// ApprovalPolicy says whether a stage waits for a RolloutApproval.
// +kubebuilder:validation:Enum=None;Required
type ApprovalPolicy string

const (
	// ApprovalNone starts the stage as soon as the one before it is done.
	ApprovalNone ApprovalPolicy = "None"
	// ApprovalRequired starts the stage only once a RolloutApproval for the target
	// revision names it.
	ApprovalRequired ApprovalPolicy = "Required"
)

// RolloutStrategy says how a new revision of what a Placement renders reaches the
// selected clusters, and when a rollout stops by itself.
// +kubebuilder:validation:XValidation:rule="!has(self.rolling) || self.type == 'Rolling'",message="rolling applies to type Rolling only"
// +kubebuilder:validation:XValidation:rule="has(self.stages) && size(self.stages) > 0 ? self.type == 'Staged' : self.type != 'Staged'",message="type Staged needs stages, and only type Staged takes them"
type RolloutStrategy struct {
	// type is AllAtOnce (the default), Rolling, Staged or External.
	// +optional
	// +kubebuilder:default=AllAtOnce
	Type RolloutStrategyType `json:"type,omitempty"`

	// rolling bounds a Rolling update.
	// +optional
	Rolling *RollingStrategy `json:"rolling,omitempty"`

	// stages are the ordered stages of a Staged update. A cluster belongs to the
	// first stage whose clusterSelector matches its labels when that stage starts;
	// clusters that match no stage are updated last, in a stage named "unmatched"
	// with the settings of the last stage.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Stages []RolloutStage `json:"stages,omitempty"`

	// progressDeadlineSeconds is how long a cluster may take, from being given a
	// revision, to report every object Available (for the soak time asked for)
	// before it counts as failed. Default 600.
	// +optional
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`

	// maxFailures is how many clusters may fail at the target revision before the
	// rollout stops by itself (reason FailureBudgetExceeded). Default 0: the first
	// failure stops it.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100000
	MaxFailures int32 `json:"maxFailures,omitempty"`

	// paused stops the rollout: no further cluster is given the target revision
	// (clusters already given it finish) and no cluster fails by the progress
	// deadline while it is set. Default false.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// stateful says what a change of the selected clusters (a selector or label
	// change, a drain, a failover, a rebalance) does to a cluster whose copy has
	// bound ReadWriteOnce or ReadWriteOncePod claims: Hold (the default) keeps the
	// copy there and places no copy elsewhere in its place, reporting
	// Progressing=False with reason StatefulMoveBlocked (FailoverBlocked for a
	// failover) and the claims named; Move moves it make-before-break, to new,
	// empty claims. ReadWriteMany claims never hold a move. A drain with
	// --include-stateful moves held copies off the drained cluster.
	// +optional
	// +kubebuilder:default=Hold
	Stateful StatefulMoves `json:"stateful,omitempty"`

	// disruptionBudget bounds what moves take away: a copy Available on a
	// cluster the Placement left (a drain, a failover, a change of the
	// selected clusters or of their labels) is removed only while at least
	// minAvailableClusters clusters keep the Placement Available without it,
	// whatever the progress deadline; a drain that would break the budget
	// waits, and the Progressing condition says so. A cluster the namespace
	// may no longer use goes all the same. Unset: no budget (make-before-break
	// until the progress deadline).
	// +optional
	DisruptionBudget *DisruptionBudget `json:"disruptionBudget,omitempty"`
}

// DisruptionBudget is how many clusters a Placement keeps Available through
// moves.
type DisruptionBudget struct {
	// minAvailableClusters is a number of clusters, or a percentage (rounded
	// up) of the clusters the Placement runs on: those selected and those it
	// left whose copies are not removed yet.
	// +required
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : size(self) <= 4 && self.endsWith('%')",message="minAvailableClusters is an integer of at least 0 or a percentage"
	MinAvailableClusters intstr.IntOrString `json:"minAvailableClusters"`
}

// RollingStrategy bounds a Rolling update.
// +kubebuilder:validation:XValidation:rule="!(has(self.maxUnavailable) && (self.maxUnavailable == 0 || self.maxUnavailable == '0%') && has(self.maxSurge) && (self.maxSurge == 0 || self.maxSurge == '0%'))",message="maxUnavailable and maxSurge cannot both be 0"
type RollingStrategy struct {
	// maxUnavailable is how many of the selected clusters (a number, or a
	// percentage rounded down, at least 1 unless it is 0) may be updating at once,
	// that is given the new revision and not yet Available at it for
	// minAvailableSeconds. Clusters that are not Available anyway (failed, or not
	// yet up) are updated without counting. With 0, an Available cluster is never
	// taken down for an update and only moves proceed. Default 25%.
	// +optional
	// +kubebuilder:default="25%"
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : size(self) <= 4 && self.endsWith('%')",message="an integer of at least 0 or a percentage"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// maxSurge is how many clusters added to the Placement (a number, or a
	// percentage of the selected clusters rounded up) receive the workload at once
	// while the clusters they replace still run it. Default 25%.
	// +optional
	// +kubebuilder:default="25%"
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : size(self) <= 4 && self.endsWith('%')",message="an integer of at least 0 or a percentage"
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`

	// minAvailableSeconds is how long a cluster must have been Available at the
	// new revision, counted from its transition at that revision, to count as
	// updated. Default 0.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	MinAvailableSeconds int32 `json:"minAvailableSeconds,omitempty"`
}

// RolloutStage is one stage of a Staged update.
type RolloutStage struct {
	// name names the stage; RolloutApprovals name it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// clusterSelector selects the stage's clusters by their ClusterProfile's labels.
	// An empty selector matches every cluster not in an earlier stage.
	// +required
	ClusterSelector metav1.LabelSelector `json:"clusterSelector"`

	// maxConcurrency is how many of the stage's clusters (a number, or a
	// percentage of them rounded up) are updated at once. Default 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : size(self) <= 4 && self.endsWith('%')",message="an integer of at least 1 or a percentage"
	MaxConcurrency *intstr.IntOrString `json:"maxConcurrency,omitempty"`

	// soakSeconds is how long each of the stage's clusters must have been
	// Available at the new revision, counted from its transition at that revision,
	// before it counts as updated; the next stage starts when every cluster of
	// this one has. Default 0.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=604800
	SoakSeconds int32 `json:"soakSeconds,omitempty"`

	// approval is Required when the stage starts only once a RolloutApproval for
	// the target revision names it; None (the default) otherwise.
	// +optional
	// +kubebuilder:default=None
	Approval ApprovalPolicy `json:"approval,omitempty"`
}

// ClusterRolloutState is where one cluster is in a rollout.
// +kubebuilder:validation:Enum=Pending;Updating;Soaking;Succeeded;Failed;Skipped
type ClusterRolloutState string

const (
	// ClusterPending means the cluster has not been given the target revision yet.
	ClusterPending ClusterRolloutState = "Pending"
	// ClusterUpdating means the cluster has the target revision and is not Available yet.
	ClusterUpdating ClusterRolloutState = "Updating"
	// ClusterSoaking means the cluster is Available at the target revision, not yet for the soak time.
	ClusterSoaking ClusterRolloutState = "Soaking"
	// ClusterSucceeded means the cluster is Available at the target revision for the soak time.
	ClusterSucceeded ClusterRolloutState = "Succeeded"
	// ClusterFailed means applying failed, an object is Degraded, or the cluster was not
	// Available within the progress deadline.
	ClusterFailed ClusterRolloutState = "Failed"
	// ClusterSkipped means the cluster left the Placement, or its stage, during the
	// rollout.
	ClusterSkipped ClusterRolloutState = "Skipped"
)

// RolloutStatus is where the rollout of a Placement's target revision is. Written
// by the work generator.
type RolloutStatus struct {
	// targetRevision is the name of the PlacementRevision being rolled out.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	TargetRevision string `json:"targetRevision,omitempty"`

	// targetRevisionNumber is the revision number of targetRevision.
	// +optional
	TargetRevisionNumber int64 `json:"targetRevisionNumber,omitempty"`

	// stableRevision is the last revision every selected cluster had, Available.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	StableRevision string `json:"stableRevision,omitempty"`

	// currentStage is the stage being updated (Staged).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	CurrentStage string `json:"currentStage,omitempty"`

	// stageStartTime is when currentStage started.
	// +optional
	StageStartTime *metav1.Time `json:"stageStartTime,omitempty"`

	// stageClusters are the clusters of currentStage, frozen when it started.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=10000
	// +kubebuilder:validation:items:MaxLength=253
	StageClusters []string `json:"stageClusters,omitempty"`

	// updatedClusters is how many selected clusters are Succeeded at the target
	// revision.
	// +optional
	UpdatedClusters *int32 `json:"updatedClusters,omitempty"`

	// failedClusters is how many selected clusters failed at the target revision.
	// +optional
	FailedClusters *int32 `json:"failedClusters,omitempty"`

	// clusters are the selected clusters not yet Succeeded at the target revision
	// and the clusters being removed, problems first, at most 100.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	Clusters []ClusterRollout `json:"clusters,omitempty"`

	// retainedClaims are the clusters the Placement left that kept placed
	// claims with their data (applyStrategy.claims: Retain), the latest 20; an
	// entry goes when the Placement chooses its cluster again. Delete the claims
	// on the cluster when the data is no longer needed.
	// +optional
	// +listType=map
	// +listMapKey=cluster
	// +kubebuilder:validation:MaxItems=20
	RetainedClaims []RetainedClaims `json:"retainedClaims,omitempty"`
}

// RetainedClaims are the claims a cluster the Placement left kept.
type RetainedClaims struct {
	// cluster is the cluster's name.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster"`

	// claims are the claims it kept, as namespace/name, the first 20.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:MaxLength=317
	Claims []string `json:"claims"`

	// time is when the Placement left the cluster.
	// +required
	Time metav1.Time `json:"time"`
}

// ClusterRollout is one cluster's place in a rollout.
type ClusterRollout struct {
	// name is the cluster's name.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// stage is the cluster's stage (Staged).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Stage string `json:"stage,omitempty"`

	// revision is the PlacementRevision the cluster's Work holds; empty when it
	// has none yet.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Revision string `json:"revision,omitempty"`

	// state is Pending, Updating, Soaking, Succeeded, Failed or Skipped.
	// +required
	State ClusterRolloutState `json:"state"`

	// reason says why the cluster is in that state.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`
}
