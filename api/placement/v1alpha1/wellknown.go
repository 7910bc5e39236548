package v1alpha1

import "strings"

// Well-known names: the labels, annotations, finalizers and taint keys Lodestar
// puts on hub objects (Works, PlacementDecisions, ClusterProfiles, Leases,
// Namespaces), and the names of its own scheduler and cluster manager. Declared
// here only; consumers (external schedulers, dashboards, platform teams'
// controllers) may rely on them.

// DefaultSchedulerName is the name of Lodestar's own scheduler.
const DefaultSchedulerName = "lodestar"

// ClusterManagerName is the spec.clusterManager.name (and the
// x-k8s.io/cluster-manager label) of the ClusterProfiles Lodestar manages; others
// are not scheduled.
const ClusterManagerName = "lodestar"

// DefaultClusterSet is the namespace of the default cluster set's ClusterProfiles.
const DefaultClusterSet = "lodestar-fleet"

// HubManagerLabel on a cluster set's namespace names the hub manager release
// that manages the set, when one hub runs several (docs/scale.md). Each manager
// sets it on its sets when it starts and refuses to start on a set another one
// has marked; the mark stays when the manager stops (remove it by hand to hand
// a set to another manager).
//
// Every Work carries it too, naming the manager that wrote it: each manager
// caches only its own Works.
const HubManagerLabel = "placement.lodestar.dev/hub-manager"

// DefaultHubManager is a hub manager's name when none is given: the hub
// chart's default release.
const DefaultHubManager = "lodestar-hub"

// AgentIdentityAnnotation on a ClusterProfile names the hub user of the cluster's
// agent, as registered by `kubectl lodestar join`.
const AgentIdentityAnnotation = "placement.lodestar.dev/agent-identity"

// ClusterIDAnnotation on a ClusterProfile records the member's cluster ID (the UID
// of its kube-system namespace, the About API's id.k8s.io) given at join, so that
// another cluster cannot join under the same name.
const ClusterIDAnnotation = "placement.lodestar.dev/cluster-id"

// ClusterCleanupFinalizer on a ClusterProfile Lodestar manages holds its deletion
// until the cluster's hub side (Works, namespace, agent identity) is removed.
const ClusterCleanupFinalizer = "placement.lodestar.dev/cluster-cleanup"

// TenantNamespaceLabel (value "true") on a hub namespace says that it is a
// tenant's: it has a ClusterSetBinding or holds Placements. The hub sets it and
// removes it with the last of them. The hub chart's tenant-pods admission policy
// refuses Pods in the namespaces that carry it: their workloads run on the
// member clusters, not on the hub.
const TenantNamespaceLabel = "placement.lodestar.dev/tenant"

// ForbiddenKindsAnnotation on a hub namespace lists the kinds its Placements may
// not place, comma-separated, each `Kind` (core group), `group/Kind`, or
// `group/*` for every kind of a group: for example
// "rbac.authorization.k8s.io/*,ServiceAccount". A platform admin sets it (tenants
// cannot update their Namespace). The hub chart's lodestar-forbidden-kinds
// admission policy refuses a Placement that names such a kind, and the work
// generator leaves objects of such kinds out of what any selector selects.
const ForbiddenKindsAnnotation = "placement.lodestar.dev/forbidden-kinds"

// TaintsAnnotation on a ClusterProfile holds the cluster's taints, as the JSON of a
// list of Taint. `kubectl lodestar cordon` and `drain` write it; the scheduler
// validates it and treats a cluster whose taints cannot be read as tainted
// NoSchedule.
const TaintsAnnotation = "placement.lodestar.dev/taints"

// Labels and annotations that Lodestar puts on the objects it creates.
const (
	// PlacementNameLabel on a Work or PlacementDecision names its Placement (or a
	// hash of the name when it is longer than a label value may be).
	PlacementNameLabel = "placement.lodestar.dev/placement"
	// PlacementNamespaceLabel on a Work names its Placement's namespace.
	PlacementNamespaceLabel = "placement.lodestar.dev/namespace"
	// ClusterLabel on a Work names the cluster it is for.
	ClusterLabel = "placement.lodestar.dev/cluster"
	// RevisionAnnotation on a Work is a hash of its manifests, the hash of the
	// PlacementRevision it holds.
	RevisionAnnotation = "placement.lodestar.dev/revision"
	// RevisionSinceAnnotation on a Work is when (RFC 3339) the work generator gave
	// it its current revision: a rollout counts the progress deadline and the soak
	// time of a cluster from it, never from an earlier revision's transitions.
	RevisionSinceAnnotation = "placement.lodestar.dev/revision-since"
	// SharesAnnotation on a Work (part 0) of a Placement that divides replicas
	// (spec.scheduling.replicas) holds the cluster's shares of the divided
	// workloads as JSON, by "Kind/name": what the Work carries, the division's
	// target and why (internal/division.Shares). The work generator reads it
	// back to divide steadily and to lower a share only after the increases
	// elsewhere are Available; the status aggregator shows it.
	SharesAnnotation = "placement.lodestar.dev/shares"
	// LeavingSinceAnnotation on a Work is when (RFC 3339) its cluster left the
	// Placement's decisions; the Work is kept until the clusters added in its
	// place are Available, or the progress deadline passes.
	LeavingSinceAnnotation = "placement.lodestar.dev/leaving-since"
	// ServicesWithdrawnAnnotation on a Work of a cluster the Placement left names
	// (comma-separated) the exported Services whose endpoints on that cluster
	// the importers no longer serve: the move's traffic is on the clusters that
	// replace it, and the copy goes after the drain time from
	// ServicesWithdrawnAtAnnotation (RFC 3339, with fractions of a second).
	ServicesWithdrawnAnnotation   = "placement.lodestar.dev/services-withdrawn"
	ServicesWithdrawnAtAnnotation = "placement.lodestar.dev/services-withdrawn-at"
	// WorkPartLabel on a Work is its part number, from 1, when a Placement's
	// objects are carried to a cluster by several Works (they do not fit in one):
	// part 0, the Work named as for one, carries no label.
	WorkPartLabel = "placement.lodestar.dev/part"
	// WorkPartsAnnotation on a Work is how many Works carry the Placement's
	// objects to its cluster at its revision, when more than one.
	WorkPartsAnnotation = "placement.lodestar.dev/parts"
	// RevisionHashLabel on a PlacementRevision is its manifests' hash.
	RevisionHashLabel = "placement.lodestar.dev/revision-hash"
	// ChangeCauseAnnotation on a Placement, when set, is the change cause of the
	// next PlacementRevision, as for Deployments.
	ChangeCauseAnnotation = "kubernetes.io/change-cause"
	// PlacementFinalizer holds a Placement until its Works are gone from the hub.
	PlacementFinalizer = "placement.lodestar.dev/cleanup"
	// ReflectionFinalizer holds a Placement that reflects status
	// (spec.reporting.reflection: Aggregate) until the status aggregator has
	// taken back the status it wrote on the hub objects.
	ReflectionFinalizer = "placement.lodestar.dev/reflection"
)

// Annotations that make a Placement's PlacementDecision slices one consistent
// answer. A scheduler writes the same DecisionRevisionAnnotation on every slice of
// one scheduling result, and the number of slices of that result in
// DecisionSlicesAnnotation. The work generator deletes a cluster's Work only when
// every slice carries the same revision and the slices it sees are all of them: a
// cluster that moves from one slice to another never looks deselected while the
// slices are written one after the other. An external scheduler that writes more
// than one slice sets both; without them, Works are added but never removed while
// the Placement has more than one slice.
const (
	DecisionRevisionAnnotation = "placement.lodestar.dev/decision-revision"
	DecisionSlicesAnnotation   = "placement.lodestar.dev/decision-slices"
)

// DecisionGenerationAnnotation on Lodestar's PlacementDecisions is the Placement
// generation they were written for, for consumers that want to know which spec a
// decision answers.
const DecisionGenerationAnnotation = "placement.lodestar.dev/decision-generation"

// The agent's heartbeat: a Lease named AgentLeaseName in its cluster's namespace
// on the hub, labelled AgentLeaseLabel, whose annotations carry the member API
// server's readiness as the agent sees it.
const (
	AgentLeaseName               = "lodestar-agent"
	AgentLeaseLabel              = "placement.lodestar.dev/agent-lease"
	MemberReadyAnnotation        = "placement.lodestar.dev/member-ready"
	MemberReadyMessageAnnotation = "placement.lodestar.dev/member-ready-message"
	// HeartbeatIntervalAnnotation on an agent's Lease is how often, in seconds,
	// the hub asks the agent to renew it: the hub sets it for the fleet's size, so
	// that heartbeats cost the hub a bounded write rate. The agent renews no more
	// often than its own lease duration allows, and never less often than this.
	HeartbeatIntervalAnnotation = "placement.lodestar.dev/heartbeat-interval-seconds"
)

// Secrets in PlacementRevisions. A revision holds a selected Secret without
// its data (data, stringData): the Secret's manifest carries
// SealedDataAnnotation (the digest of what was taken out) and the data is in
// the revision's data Secret, of type RevisionDataSecretType in the
// Placement's namespace, which only those who may read the namespace's
// Secrets read. Who may read PlacementRevisions (lodestar:approver, for one)
// reads no Secret value there.
const (
	SealedDataAnnotation   = "placement.lodestar.dev/sealed-data"
	RevisionDataSecretType = "placement.lodestar.dev/revision-data"
	// RevisionDataLabel on a revision's data Secret names the revision.
	RevisionDataLabel = "placement.lodestar.dev/revision"
	// RevisionGenerationAnnotation on a PlacementRevision is the newest
	// generation of the Placement that rendered to it. A Secret a workload
	// newly references (not in the current revision) is followed only when
	// the Placement's spec was written since (a higher generation), by a last
	// writer who may read it: a reference someone else added afterwards waits
	// for the next write.
	RevisionGenerationAnnotation = "placement.lodestar.dev/placement-generation"
)

// Taint keys that `kubectl lodestar` adds to a ClusterProfile.
const (
	// CordonTaintKey is the key of the NoSchedule taint `kubectl lodestar cordon`
	// adds.
	CordonTaintKey = "lodestar.dev/cordoned"
	// DrainTaintKey is the key of the NoExecute taint `kubectl lodestar drain` adds.
	DrainTaintKey = "lodestar.dev/drain"
	// DrainStatefulValue is the value of the drain taint of `kubectl lodestar
	// drain --include-stateful`: copies held by their claims (spec.strategy.
	// stateful: Hold) move off the cluster too.
	DrainStatefulValue = "include-stateful"
	// InvalidTaintsKey is the NoSchedule taint the scheduler assumes for a cluster
	// whose TaintsAnnotation cannot be read.
	InvalidTaintsKey = "placement.lodestar.dev/invalid-taints"
)

// WorkNamespaceLabel on a ClusterProfile Lodestar manages names the hub namespace
// that holds the cluster's Works and its agent's Lease. Consumers find a cluster's
// Works through it rather than by building the name themselves.
const WorkNamespaceLabel = "placement.lodestar.dev/work-namespace"

// ClusterNamespacePrefix starts the name of each member cluster's namespace
// on the hub: lodestar-cluster-<name> holds its Works, its agent's Lease and
// its reports.
const ClusterNamespacePrefix = "lodestar-cluster-"

// HubGenerationAnnotation on a placed object names the generation of the hub
// object it was rendered from, so that the member's report of it says which
// hub generation it runs (status reflection).
const HubGenerationAnnotation = "placement.lodestar.dev/hub-generation"

// ReservedNamespaceLabel marks a hub namespace Lodestar made for itself, with
// what it is for: ReservedForCluster (a member cluster's namespace,
// lodestar-cluster-<name>) or ReservedForClusterPlacements (ClusterPlacementNamespace).
// Lodestar uses and deletes only namespaces it marked: join refuses a cluster
// whose namespace exists without the mark, and cleanup leaves such a namespace.
const ReservedNamespaceLabel = "placement.lodestar.dev/reserved-for"

// The values of ReservedNamespaceLabel.
const (
	ReservedForCluster           = "cluster"
	ReservedForClusterPlacements = "cluster-placements"
)

// ReservedClusterNames are names join refuses: placements was the name of the
// ClusterPlacement namespace's cluster-namespace look-alike
// (lodestar-cluster-placements) in earlier versions.
var ReservedClusterNames = []string{"placements"}

// IsReservedNamespace tells whether ns belongs to the control plane or to
// Lodestar (kube-*, default, lodestar-*): no Placement there makes it a tenant
// namespace, and no ClusterSetBinding may be made there.
func IsReservedNamespace(ns string) bool {
	return ns == "default" || strings.HasPrefix(ns, "kube-") || strings.HasPrefix(ns, "lodestar-")
}
