package v1alpha1

// The status contract of a hub Work (sigs.k8s.io/work-api). The agent writes it; the
// hub's status aggregator, the scheduler (make-before-break) and anyone else read
// it. Condition types are shared by a manifest's conditions and the Work's own;
// each constant says where it appears.

// Condition types of a Work and of its manifests.
const (
	// ConditionApplied (Work and manifest) is True when the manifest (every
	// manifest, for the Work) is applied to the member as the apply strategy asks.
	ConditionApplied = "Applied"
	// ConditionAvailable (Work and manifest) is True when the placed object (every
	// placed object, for the Work) is available by its kind's readiness rules.
	ConditionAvailable = "Available"
	// ConditionProgressing (Work and manifest) is True while a placed object is
	// rolling out on the member.
	ConditionProgressing = "Progressing"
	// ConditionDegraded (Work and manifest) is True when a placed object reports
	// that it is degraded.
	ConditionDegraded = "Degraded"
	// ConditionDrifted (Work and manifest) is True when a placed object was changed
	// on the member and left so; present only with whenDrifted: Report.
	ConditionDrifted = "Drifted"
	// ConditionStatusFeedback, on a manifest, carries the status feedback values
	// (see the feedback encoding in internal/feedback); on the Work, it is False
	// when the feedback rules are invalid.
	ConditionStatusFeedback = "StatusFeedback"
	// ConditionStatusTrimmed (Work only) is True when the status was cut to fit.
	ConditionStatusTrimmed = "StatusTrimmed"
	// ConditionCleanupBlocked (Work only) is True while objects the Work no longer
	// places (or all of them, when it is deleted) are held on the member, by a
	// finalizer for example, or cannot be looked up.
	ConditionCleanupBlocked = "CleanupBlocked"
	// ConditionClaims, on a manifest of a PersistentVolumeClaim or a
	// StatefulSet, carries the state of the claim (of the StatefulSet's claims
	// on the member) in its message: see the claims encoding in internal/claims.
	// It is True when every claim is Bound.
	ConditionClaims = "Claims"
)

// Reasons of a manifest's Applied condition.
const (
	// ReasonApplied: created or updated with server-side apply, or taken over.
	ReasonApplied = "Applied"
	// ReasonCreateOnlyKept: CreateOnly, and the object exists; it is not updated.
	ReasonCreateOnlyKept = "ExistsNotUpdated"
	// ReasonInSync: ReportOnly, and the member's object matches the manifest.
	ReasonInSync = "InSync"
	// ReasonNotCompared: ReportOnly, and the object is a Secret: it exists, and is
	// never compared, so that the hub cannot learn its values by guessing.
	ReasonNotCompared = "NotCompared"
	// ReasonOutOfSync: ReportOnly, and the member's object differs from the manifest.
	ReasonOutOfSync = "OutOfSync"
	// ReasonNotFound: ReportOnly, and the object is not on the member.
	ReasonNotFound = "NotFound"
	// ReasonDecodeFailed: the manifest is not a JSON object.
	ReasonDecodeFailed = "DecodeFailed"
	// ReasonInvalidManifest: the manifest lacks apiVersion, kind, a fixed name, or
	// the namespace its kind needs.
	ReasonInvalidManifest = "InvalidManifest"
	// ReasonDuplicate: another manifest of the Work names the same object.
	ReasonDuplicate = "DuplicateManifest"
	// ReasonUnknownKind: the member does not serve the manifest's kind.
	ReasonUnknownKind = "UnknownKind"
	// ReasonWaitingForCRD: the kind is defined by a CRD of the same Work that is
	// not established yet.
	ReasonWaitingForCRD = "WaitingForCRD"
	// ReasonNotOwned: the object exists, nobody placed it, and takeover is Never.
	ReasonNotOwned = "NotOwnedByWork"
	// ReasonTakeoverDiff: the object exists, nobody placed it, and it differs from
	// the manifest (takeover IfNoDiff).
	ReasonTakeoverDiff = "TakeoverDiff"
	// ReasonOtherWork: another Work placed the object and still wants it.
	ReasonOtherWork = "PlacedByAnotherWork"
	// ReasonApplyFailed: the member refused the write, or could not be read.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonDeniedByPolicy: the member's own policy does not allow the object.
	ReasonDeniedByPolicy = "DeniedByMemberPolicy"
	// ReasonRanOnce (also of Available): a Job the agent created ran and is gone; it
	// is created again only when its manifest changes.
	ReasonRanOnce = "RanOnce"
)

// Reasons of a manifest's Available condition besides the readiness rules' own.
const (
	// ReasonNotApplied: the object is not applied, so it is not available.
	ReasonNotApplied = "NotApplied"
)

// Reasons of the Drifted condition (whenDrifted: Report), of a manifest and of the
// Work.
const (
	// ReasonDriftDetected: the member's object differs from the manifest.
	ReasonDriftDetected = "DriftDetected"
	// ReasonNoDrift (Work): no manifest reports drift.
	ReasonNoDrift = "NoDrift"
)

// Reasons of a manifest's Available, Progressing and Degraded conditions that the
// agent's readiness checks give (a custom kind's readiness rules give their own).
const (
	ReasonReadinessApplied         = "Applied"
	ReasonBound                    = "Bound"
	ReasonEstablished              = "Established"
	ReasonJobComplete              = "JobComplete"
	ReasonLoadBalancerReady        = "LoadBalancerReady"
	ReasonPodsAvailable            = "PodsAvailable"
	ReasonReplicasAvailable        = "ReplicasAvailable"
	ReasonReplicasReady            = "ReplicasReady"
	ReasonRuleAvailable            = "RuleAvailable"
	ReasonServiceReady             = "ServiceReady"
	ReasonJobFailed                = "JobFailed"
	ReasonLost                     = "Lost"
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	ReasonRuleDegraded             = "RuleDegraded"
	ReasonJobRunning               = "JobRunning"
	ReasonNotEstablished           = "NotEstablished"
	ReasonNamesNotAccepted         = "NamesNotAccepted"
	ReasonNotObserved              = "NotObserved"
	ReasonPending                  = "Pending"
	ReasonRollingOut               = "RollingOut"
	ReasonRuleNotAvailable         = "RuleNotAvailable"
	ReasonRulePending              = "RulePending"
	ReasonWaitingForLoadBalancer   = "WaitingForLoadBalancer"
	ReasonWaitingForPods           = "WaitingForPods"
	ReasonWaitingForReplicas       = "WaitingForReplicas"
	// A kind's health rule (HealthRule) says Healthy, Progressing or Degraded,
	// cannot be evaluated yet (a field it reads is not there), or fails (it does
	// not compile, exceeds its cost, or yields no state).
	ReasonHealthy              = "Healthy"
	ReasonHealthProgressing    = "Progressing"
	ReasonHealthDegraded       = "Degraded"
	ReasonHealthPending        = "HealthPending"
	ReasonInterpretationFailed = "InterpretationFailed"
)

// Reasons of the Work's own conditions.
const (
	// ReasonAllApplied: every manifest is applied (Applied True).
	ReasonAllApplied = "AllManifestsApplied"
	// ReasonSomeNotApplied: at least one manifest is not (Applied False).
	ReasonSomeNotApplied = "ManifestsNotApplied"
	// ReasonInvalidStrategy: the apply-strategy annotation cannot be used; nothing
	// is written to the member (Applied False).
	ReasonInvalidStrategy = "InvalidApplyStrategy"
	// ReasonAllAvailable: every placed object is available (Available True).
	ReasonAllAvailable = "AllManifestsAvailable"
	// ReasonSomeNotAvailable: at least one is not (Available False).
	ReasonSomeNotAvailable = "ManifestsNotAvailable"
	// ReasonInvalidFeedback: the status-feedback annotation cannot be used
	// (StatusFeedback False).
	ReasonInvalidFeedback = "InvalidFeedbackRules"
	// ReasonWaitingOnMember: objects being deleted are held on the member
	// (CleanupBlocked True).
	ReasonWaitingOnMember = "WaitingForMemberDeletion"
	// ReasonStatusTooLarge: the status was cut to fit its size budget
	// (StatusTrimmed True).
	ReasonStatusTooLarge = "StatusTooLarge"
	// ReasonKindNotServed: objects to be removed are of a kind the member no longer
	// serves, so the agent cannot look them up (CleanupBlocked True).
	ReasonKindNotServed = "KindNotServed"
	// ReasonSomeProgressing and ReasonNoneProgressing: whether a manifest is
	// progressing (Progressing True or False).
	ReasonSomeProgressing = "ManifestsProgressing"
	ReasonNoneProgressing = "NoneProgressing"
	// ReasonSomeDegraded and ReasonNoneDegraded: whether a manifest is degraded
	// (Degraded True or False).
	ReasonSomeDegraded = "ManifestsDegraded"
	ReasonNoneDegraded = "NoneDegraded"
)

// Reasons of the StatusFeedback condition of a manifest.
const (
	// ReasonFeedbackReported: the message holds every value.
	ReasonFeedbackReported = "Reported"
	// ReasonFeedbackTrimmed: the message was cut to fit its size budget.
	ReasonFeedbackTrimmed = "Trimmed"
)

// Reasons of the Claims condition of a manifest.
const (
	// ReasonClaimsBound: every claim is Bound.
	ReasonClaimsBound = "ClaimsBound"
	// ReasonClaimsPending: a claim is not Bound (Pending, Lost, or not made yet).
	ReasonClaimsPending = "ClaimsNotBound"
)

// Reasons of the events the agent writes on a Work.
const (
	// EventDriftCorrected: the agent set back what was changed on the member.
	EventDriftCorrected = "DriftCorrected"
	// EventAppliedWorkDeleted: the AppliedWork was deleted on the member by hand.
	EventAppliedWorkDeleted = "AppliedWorkDeleted"
	// EventOwnershipPassed: an object another Work had placed was taken over from
	// it without being deleted, because that Work no longer places it.
	EventOwnershipPassed = "OwnershipPassed"
)
