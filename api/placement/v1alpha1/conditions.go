package v1alpha1

// Condition types of a Placement. Each has exactly one writer.
const (
	// ScheduledCondition is True when the scheduler has written the Placement's
	// PlacementDecisions for its current generation. Written by the scheduler.
	ScheduledCondition = "Scheduled"

	// RenderedCondition is True when the objects the Placement selects, with its
	// overrides, are rendered into the PlacementRevision named in
	// status.revision, and False when they cannot be (an invalid resource
	// selector, override or feedback rule, or an object too large for a Work):
	// then no new revision is made and the Works keep what they hold. Written by
	// the revision maker.
	RenderedCondition = "Rendered"

	// WorkSynchronizedCondition is True when every selected cluster's Work holds
	// what the rollout gives it (the target revision, or the one it keeps until the
	// strategy lets it move) and the Works of the clusters the Placement left are
	// removed or kept make-before-break. Written by the work generator.
	WorkSynchronizedCondition = "WorkSynchronized"

	// AppliedCondition is True when every selected cluster reports its Work applied
	// at the Work's current generation. Written by the status aggregator.
	AppliedCondition = "Applied"

	// AvailableCondition is True when every selected cluster reports every placed
	// object available at the Work's current generation. Written by the status
	// aggregator.
	AvailableCondition = "Available"

	// ProgressingCondition is True while a revision is being rolled out or
	// clusters the Placement left are being removed, and False when the rollout is
	// complete or stopped (paused, waiting for approval, deadline or failure budget
	// exceeded); the reason says which. Written by the work generator.
	ProgressingCondition = "Progressing"

	// DriftedCondition is True when a selected cluster reports a placed object
	// changed on the member and left so (applyStrategy.whenDrifted: Report). Present
	// only with that policy. Written by the status aggregator.
	DriftedCondition = "Drifted"

	// StatusReflectedCondition is True when the status of every placed object
	// that is reflected (spec.reporting.reflection: Aggregate) is written on the hub,
	// and False when an object's status has another writer or cannot be written.
	// Present only with Aggregate. Written by the status aggregator.
	StatusReflectedCondition = "StatusReflected"
)

// Condition reasons of a Placement.
const (
	// ReasonScheduled: the decisions name every cluster the Placement selects.
	ReasonScheduled = "Scheduled"
	// ReasonNoClusterSetBinding: the Placement's namespace has no
	// ClusterSetBinding to a cluster set the hub manages, so it may use no cluster.
	ReasonNoClusterSetBinding = "NoClusterSetBinding"
	// ReasonCarrierInTheWay (Scheduled, on a ClusterPlacement): a Placement of
	// its name in ClusterPlacementNamespace was not made by the hub to carry it
	// out; it is left alone, and the ClusterPlacement does nothing until it goes.
	ReasonCarrierInTheWay = "CarrierInTheWay"
	// ReasonNoMatchingClusters: no cluster matches the cluster selector.
	ReasonNoMatchingClusters = "NoMatchingClusters"
	// ReasonUnknownClusterNames: spec.scheduling.clusterNames names clusters that
	// no cluster set bound to the namespace has; the others are chosen.
	ReasonUnknownClusterNames = "UnknownClusterNames"
	// ReasonInvalidClusterSelector: the cluster selector cannot be parsed.
	ReasonInvalidClusterSelector = "InvalidClusterSelector"
	// ReasonInvalidClusterExpression: spec.scheduling.clusterExpression does not
	// compile.
	ReasonInvalidClusterExpression = "InvalidClusterExpression"
	// ReasonInvalidPreference: a preference's expression does not compile.
	ReasonInvalidPreference = "InvalidPreference"
	// ReasonInvalidCapacity: requiredCapacity is not a quantity.
	ReasonInvalidCapacity = "InvalidCapacity"
	// ReasonFailoverBlocked: a chosen cluster's agent has been unreachable longer
	// than spec.scheduling.failover.tolerationSeconds, and it is kept: no other cluster can
	// replace it, more than half the chosen clusters are unreachable at once (a
	// partition), or failovers are being rate-limited. As a reason of Progressing:
	// the replaced cluster's copy is held by its claims (spec.strategy.stateful).
	ReasonFailoverBlocked = "FailoverBlocked"
	// ReasonFailedOver (an event) names a chosen cluster replaced because its
	// agent was unreachable.
	ReasonFailedOver = "FailedOver"
	// ReasonNotEnoughClusters: fewer clusters than numberOfClusters can be chosen;
	// the ones that can are.
	ReasonNotEnoughClusters = "NotEnoughClusters"

	// ReasonRendered: the selected objects are rendered into status.revision.
	ReasonRendered = "Rendered"
	// ReasonWaitingForRevision: the revision maker has not rendered the
	// Placement's current generation yet, or the PlacementRevision it names is
	// not in the work generator's cache yet.
	ReasonWaitingForRevision = "WaitingForRevision"
	// ReasonNotRendered: the selected objects cannot be rendered (the Rendered
	// condition says why); the Works keep what they hold.
	ReasonNotRendered = "NotRendered"

	// ReasonWorkSynchronized: every selected cluster has its current Work.
	ReasonWorkSynchronized = "WorkSynchronized"
	// ReasonInvalidResourceSelector: a resource selector names an unknown,
	// cluster-scoped or forbidden kind, or has an invalid label selector. It
	// selects nothing; the other selectors' objects are rendered and roll out,
	// so a selector that stops being allowed takes its objects off the members.
	ReasonInvalidResourceSelector = "InvalidResourceSelector"
	// ReasonInvalidStrategy: spec.strategy cannot be used (a stage's cluster
	// selector does not parse).
	ReasonInvalidStrategy = "InvalidStrategy"
	// ReasonInvalidStatusFeedback: a status feedback rule's CEL or JSONPath does not
	// compile, or it names Secrets.
	ReasonInvalidStatusFeedback = "InvalidStatusFeedback"
	// ReasonWorkTooLarge: a selected object renders to more than a Work may
	// carry (render.MaxManifestBytes); no Work is changed. A Placement whose
	// objects together are larger is placed as several Works per cluster.
	ReasonWorkTooLarge = "WorkTooLarge"
	// ReasonInvalidApplyStrategy: spec.applyStrategy is not one the agents can
	// apply (work.ApplyStrategy.Validate); no Work changes until it is fixed.
	ReasonInvalidApplyStrategy = "InvalidApplyStrategy"
	// ReasonInvalidOverride: an override's CEL expression does not compile, or its
	// literal patch cannot be used; no Work changes until it is fixed.
	ReasonInvalidOverride = "InvalidOverride"
	// ReasonOverrideFailed: an override failed on some clusters, whose Works keep
	// their last good content; the other clusters proceed.
	ReasonOverrideFailed = "OverrideFailed"
	// ReasonRenderFailed: the selected objects could not be rendered into a Work.
	ReasonRenderFailed = "RenderFailed"
	// ReasonWorkFailed: a Work could not be written (for example, the cluster's
	// namespace does not exist on the hub).
	ReasonWorkFailed = "WorkFailed"
	// ReasonWaitingForDecisions: the scheduler has not decided yet.
	ReasonWaitingForDecisions = "WaitingForDecisions"
	// ReasonDecisionRejected (an event) names PlacementDecisions, or clusters in
	// them, that the work generator does not act on: not owned by the Placement,
	// written for another scheduler, or naming a cluster outside the cluster sets
	// the Placement's namespace may use.
	ReasonDecisionRejected = "DecisionRejected"
	// ReasonInvalidDivision (Rendered): spec.scheduling.replicas cannot be used
	// (a cluster selector that does not parse).
	ReasonInvalidDivision = "InvalidDivision"
	// ReasonNotEnoughCapacity (Progressing): the divided replicas of a workload
	// do not fit in the chosen clusters' room (their free capacity, or their
	// maxima); the shares already placed stay as they are.
	ReasonNotEnoughCapacity = "NotEnoughCapacity"
	// ReasonNotDivisible (Progressing): a workload's replicas cannot be divided
	// (a Job without completions, minimums above the total); it keeps the
	// shares already placed, and goes nowhere new.
	ReasonNotDivisible = "NotDivisible"
	// ReasonSharesOverridden (an event): an override sets the replicas of a
	// divided workload on some cluster, so that the clusters' sum differs
	// from the workload's total.
	ReasonSharesOverridden = "SharesOverridden"
	// ReasonDeleting: the Placement is being deleted and its Works are being removed.
	ReasonDeleting = "Deleting"

	// ReasonClusterPending (of a cluster in status.clusters): its agent has not
	// reported the current generation of its Works yet.
	ReasonClusterPending = "Pending"
	// ReasonClusterRemoving (of a cluster in status.clusters): its Works are being
	// removed from it.
	ReasonClusterRemoving = "Removing"

	// ReasonApplied: every selected cluster reports its Work applied.
	ReasonApplied = "Applied"
	// ReasonApplyFailed: at least one cluster reports that applying failed.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonApplyPending: at least one cluster has not reported the current Work yet.
	ReasonApplyPending = "ApplyPending"
	// ReasonNoClusters (Applied, Available, Progressing): no cluster is selected,
	// so there is nothing to apply or roll out.
	ReasonNoClusters = "NoClusters"

	// ReasonAvailable: every selected cluster reports every placed object available.
	ReasonAvailable = "Available"
	// ReasonNotAvailable: at least one selected cluster reports an object that is not
	// available, or has not reported yet.
	ReasonNotAvailable = "NotAvailable"

	// ReasonDriftDetected: at least one cluster reports a placed object changed on
	// the member.
	ReasonDriftDetected = "DriftDetected"
	// ReasonNoDrift: no cluster reports a drifted object.
	ReasonNoDrift = "NoDrift"

	// ReasonStatusReflected: the hub's placed objects carry their clusters' status.
	ReasonStatusReflected = "StatusReflected"
	// ReasonOtherStatusWriter: something else (for example kube-controller-manager
	// on a hub that runs workloads) writes a placed object's status on the hub, so
	// Lodestar does not.
	ReasonOtherStatusWriter = "OtherStatusWriter"
	// ReasonReflectionFailed: a placed object's status could not be written on the
	// hub.
	ReasonReflectionFailed = "ReflectionFailed"
	// ReasonStatusKept (event): a deleted Placement leaves the status it
	// reflected on a hub object, because the object's kind does not let it be
	// undone (a Job that ran keeps its terminal conditions and counts).
	ReasonStatusKept = "StatusKept"

	// Reasons of the Progressing condition.

	// ReasonRolloutInProgress: clusters are being given the target revision, or
	// clusters the Placement left are kept until their replacements are Available.
	ReasonRolloutInProgress = "RolloutInProgress"
	// ReasonRolloutComplete: every selected cluster is Available at the target
	// revision and no cluster the Placement left still has its objects.
	ReasonRolloutComplete = "RolloutComplete"
	// ReasonClaimsRetained (event): a cluster the Placement left, or all of them
	// when it is deleted, keeps the placed PersistentVolumeClaims with their data
	// (applyStrategy.claims: Retain); the event names them.
	ReasonClaimsRetained = "ClaimsRetained"
	// ReasonNothingSelected (Applied, Available): the Works of the selected
	// clusters carry no object, because the resource selectors select none.
	ReasonNothingSelected = "NothingSelected"
	// ReasonRolloutCompleteWithFailures: the rollout went as far as it goes, and
	// some clusters failed within the failure budget (maxFailures), for example
	// because their overrides fail; the message names them.
	ReasonRolloutCompleteWithFailures = "RolloutCompleteWithFailures"
	// ReasonRolloutPaused: spec.strategy.paused is set.
	ReasonRolloutPaused = "RolloutPaused"
	// ReasonWaitingForApproval: the next stage, or the next clusters, wait for a
	// RolloutApproval of the target revision.
	ReasonWaitingForApproval = "WaitingForApproval"
	// ReasonProgressDeadlineExceeded: a cluster was not Available within
	// progressDeadlineSeconds (it counts as failed), or clusters the Placement left
	// were removed before their replacements were Available.
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	// ReasonFailureBudgetExceeded: more clusters failed at the target revision than
	// maxFailures allows; no further cluster is updated until fewer fail, the
	// budget is raised, or a new revision (a fix or an undo) is made.
	ReasonFailureBudgetExceeded = "FailureBudgetExceeded"
	// ReasonRolloutBlocked: maxUnavailable is 0 and every cluster left to update is
	// Available, so none may be taken down for the update.
	ReasonRolloutBlocked = "RolloutBlocked"
	// ReasonStatefulMoveBlocked: a cluster the Placement left keeps its copy
	// because claims there are bound and ReadWriteOnce (spec.strategy.stateful:
	// Hold), and no cluster added is given a copy in its place; the message names
	// the workloads, clusters and claims. A failover held so has reason
	// FailoverBlocked.
	ReasonStatefulMoveBlocked = "StatefulMoveBlocked"
	// ReasonStatefulMove (event): a copy with bound ReadWriteOnce claims moves
	// (spec.strategy.stateful: Move, or a drain with --include-stateful); the new
	// cluster's claims are new and empty.
	ReasonStatefulMove = "StatefulMove"
	// ReasonDrainOverruled (event): a forced drain (`kubectl lodestar drain
	// --force-after`) removed a copy the Placement's disruption budget would
	// have kept: the record of what was overruled.
	ReasonDrainOverruled = "DrainOverruled"
)
