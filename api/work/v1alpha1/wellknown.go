package v1alpha1

// Well-known names of the Work contract: what the hub and the agent put on Works,
// AppliedWorks and member objects. Declared here only.

// Annotations on a hub Work that carry how the agent applies it. The work generator
// writes them from the Placement; a hand-written Work may carry them too. Absent
// annotations mean the defaults.
const (
	// ApplyStrategyAnnotation holds the JSON of an ApplyStrategy.
	ApplyStrategyAnnotation = "work.lodestar.dev/apply-strategy"
	// StatusFeedbackAnnotation holds the JSON of a list of FeedbackRules.
	StatusFeedbackAnnotation = "work.lodestar.dev/status-feedback"
	// HealthRulesAnnotation holds the JSON of a list of HealthRules: the health
	// of the Work's custom kinds, from the hub's ResourceInterpretations.
	HealthRulesAnnotation = "work.lodestar.dev/health-rules"
	// DeletionPolicyAnnotation says what the agent does with the member objects a
	// Work created when the Work (or one of its manifests) goes: Delete (the
	// default) or Orphan, which leaves them in place and releases them (the
	// AppliedWork no longer owns them). `kubectl lodestar unjoin --orphan` sets it.
	DeletionPolicyAnnotation = "work.lodestar.dev/deletion-policy"
	// DeletionPolicyOrphan is the DeletionPolicyAnnotation value that orphans.
	DeletionPolicyOrphan = "Orphan"
)

// WorkFinalizer holds a hub Work until the agent of its cluster has removed what it
// applied for it from the member.
const WorkFinalizer = "work.lodestar.dev/member-cleanup"

// AppliedWorkFinalizer holds an AppliedWork on the member while its Work lives on
// the hub. The placed objects name the AppliedWork as their owner: without it, an
// AppliedWork deleted by hand would have the member's garbage collector delete them.
const AppliedWorkFinalizer = "work.lodestar.dev/applied-objects"

// WorkMissingSinceAnnotation marks an AppliedWork whose Work the hub no longer has,
// with the time the agent first found it missing. Its objects are removed once the
// grace period has passed; the Work coming back within it cancels that.
const WorkMissingSinceAnnotation = "work.lodestar.dev/work-missing-since"

// CreatedNamespaceLabel marks a member namespace the agent created because a
// manifest needed it. The agent never deletes namespaces it created this way:
// other objects may live in them.
const CreatedNamespaceLabel = "work.lodestar.dev/created-for-manifests"

// HubLabel on an AppliedWork is the identity of the hub whose Work it records (see
// names.HubID: a hash of the hub's API server address, or the agent's --hub-id).
// The identity is also the first part of the AppliedWork's name, so that agents of
// two hubs on one member, even for clusters of the same name, never share or sweep
// each other's records: the missing-Work sweeper judges only AppliedWorks of its
// own hub.
const HubLabel = "work.lodestar.dev/hub"

// RecordedDeletionPolicyAnnotation on an AppliedWork is the deletion policy of its
// Work when last applied (Orphan, or absent for Delete). The missing-Work sweeper
// honours it: the Work is gone when it acts, and an Orphan Work's objects stay.
const RecordedDeletionPolicyAnnotation = "work.lodestar.dev/deletion-policy"

// RecordedClaimsAnnotation on an AppliedWork is "Delete" when its Work's claim
// policy was Delete when last applied (absent: Retain, the default). The agent
// and the missing-Work sweeper retain placed claims unless it says Delete.
const RecordedClaimsAnnotation = "work.lodestar.dev/claims"

// MaxManifestBytes bounds the manifests of one Work (their JSON, one byte apart).
// etcd refuses objects over 1.5 MiB, and the agent adds the Work's status (up to
// 64 KiB of feedback and the conditions of every manifest): a Work stays well
// below. The work generator splits a Placement's objects into several Works of at
// most this size, and an override may not grow an object past it.
const MaxManifestBytes = 768 << 10
