package v1alpha1

// DependencyPolicy says whether a Placement also places what its selected
// workloads reference.
// +kubebuilder:validation:Enum=Ignore;Follow
type DependencyPolicy string

// DependencyPolicies.
const (
	// DependenciesIgnore places what the resource selectors select, nothing
	// more (the default; also the meaning of an empty value).
	DependenciesIgnore DependencyPolicy = "Ignore"
	// DependenciesFollow also places the objects of the Placement's namespace
	// that the selected objects reference, as if selected: the ConfigMaps,
	// Secrets, ServiceAccounts and PersistentVolumeClaims of a pod template
	// (volumes, projected sources, env valueFrom, envFrom, imagePullSecrets,
	// serviceAccountName), a followed ServiceAccount's imagePullSecrets, and
	// what a ResourceInterpretation's dependencies expression names for its
	// kind (docs/dependencies.md).
	DependenciesFollow DependencyPolicy = "Follow"
)

// DependenciesFollowedCondition is a Placement's condition, present with
// spec.dependencies: Follow: True (Followed) when every object the selected
// ones reference is placed with them, False (NotFollowed) naming each that is
// not and why (not on the hub, a kind the namespace forbids, a Secret the
// Placement's last writer may not read on the hub, an interpretation that
// fails). What is followed rolls out all the same. Written by the revision
// maker.
const DependenciesFollowedCondition = "DependenciesFollowed"

// DependenciesFollowed condition reasons.
const (
	// ReasonFollowed: every referenced object is placed.
	ReasonFollowed = "Followed"
	// ReasonNotFollowed: some referenced objects are not placed; the message
	// names them and says why.
	ReasonNotFollowed = "NotFollowed"
)

// LastWriterAnnotation on a Placement is the user who last changed its spec,
// written by the hub chart's lodestar-placement-writer admission policy (a
// tenant cannot set it: the policy overwrites it on every change). A Secret is
// followed (DependenciesFollow) only when that user may get it on the hub.
const LastWriterAnnotation = "placement.lodestar.dev/last-writer"

// LastWriterGroupsAnnotation is that user's groups, comma-separated, written
// with LastWriterAnnotation.
const LastWriterGroupsAnnotation = "placement.lodestar.dev/last-writer-groups"
