package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Quota resource names of a FleetQuota, besides requests.<resource> and
// limits.<resource> (requests.cpu, limits.memory, requests.nvidia.com/gpu...).
const (
	// QuotaPods is the pods the namespace's Placements run over the fleet.
	QuotaPods = "pods"
	// QuotaClusters is the clusters they run on.
	QuotaClusters = "clusters"
)

// FleetQuotaSpec bounds what a namespace's Placements use over the fleet.
type FleetQuotaSpec struct {
	// hard is the most the namespace's Placements may use over the whole
	// fleet, by resource: requests.<resource> and limits.<resource> (cpu,
	// memory, nvidia.com/gpu, any extended resource), pods, and clusters. A
	// resource not named is not bounded. Counted as the Works carry it:
	// replicas times copies, after division and overrides.
	// +required
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, k == 'pods' || k == 'clusters' || ((k.startsWith('requests.') || k.startsWith('limits.')) && size(k) <= 253))",message="hard names pods, clusters, requests.<resource> or limits.<resource>"
	Hard map[string]resource.Quantity `json:"hard"`

	// uncounted is what the quota does with a workload it cannot count: a
	// custom kind no ResourceInterpretation gives replicas, or a DaemonSet on
	// a cluster that reports no node count. Refuse (the default): a revision
	// that places one is not admitted while hard names pods, requests or
	// limits (write a ResourceInterpretation with replicas; "0" for a kind
	// that runs no pods). Ignore: it counts as nothing.
	// +optional
	// +kubebuilder:default=Refuse
	Uncounted UncountedPolicy `json:"uncounted,omitempty"`
}

// UncountedPolicy is what a quota does with a workload it cannot count.
// +kubebuilder:validation:Enum=Refuse;Ignore
type UncountedPolicy string

const (
	// UncountedRefuse refuses a revision that places what the quota cannot
	// count.
	UncountedRefuse UncountedPolicy = "Refuse"
	// UncountedIgnore counts it as nothing.
	UncountedIgnore UncountedPolicy = "Ignore"
)

// ClusterUse is what a namespace's Placements use on one cluster.
type ClusterUse struct {
	// name is the cluster's.
	// +required
	Name string `json:"name"`
	// used is what its Works carry, by resource of hard.
	// +optional
	Used map[string]resource.Quantity `json:"used,omitempty"`
}

// FleetQuotaStatus is what the namespace uses.
type FleetQuotaStatus struct {
	// conditions: Ready is True when what is used is within hard, False
	// (Exceeded) when it is not (hard lowered below what runs: nothing is taken
	// away, and no new revision that asks more is rolled out).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the generation the status is for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// used is what the namespace's Placements use over the fleet, by
	// resource of hard.
	// +optional
	Used map[string]resource.Quantity `json:"used,omitempty"`
	// clusters is the use on each cluster, by name (at most 200; clustersNotListed says how many more).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=200
	Clusters []ClusterUse `json:"clusters,omitempty"`
	// clustersNotListed counts the clusters in use beyond those listed.
	// +optional
	ClustersNotListed int32 `json:"clustersNotListed,omitempty"`
}

// FleetQuota bounds what the Placements of its namespace use over the fleet:
// the sum of requests and limits, pods and clusters. A revision that would
// take the namespace past it is not rolled out (the current one stays), and
// the Placement's QuotaAdmitted condition names the resource, the used and
// the asked amounts. Platform admins write it; tenants read it.
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=fq
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type FleetQuota struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec FleetQuotaSpec `json:"spec"`
	// +optional
	Status FleetQuotaStatus `json:"status,omitempty"`
}

// FleetQuotaList is a list of FleetQuotas.
// +kubebuilder:object:root=true
type FleetQuotaList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FleetQuota `json:"items"`
}

// ClusterFleetQuotaSpec bounds what the Placements of the namespaces it
// selects use over the fleet, together.
type ClusterFleetQuotaSpec struct {
	// namespaceSelector selects the hub namespaces bounded, by their labels
	// (an empty selector selects every namespace).
	// +required
	NamespaceSelector metav1.LabelSelector `json:"namespaceSelector"`

	// hard is the most the selected namespaces' Placements may use together
	// over the whole fleet, as a FleetQuota's hard.
	// +required
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, k == 'pods' || k == 'clusters' || ((k.startsWith('requests.') || k.startsWith('limits.')) && size(k) <= 253))",message="hard names pods, clusters, requests.<resource> or limits.<resource>"
	Hard map[string]resource.Quantity `json:"hard"`

	// uncounted is what the quota does with a workload it cannot count, as a
	// FleetQuota's uncounted.
	// +optional
	// +kubebuilder:default=Refuse
	Uncounted UncountedPolicy `json:"uncounted,omitempty"`
}

// ClusterFleetQuota is a FleetQuota over several namespaces: what the
// Placements of the namespaces it selects use together. A platform admin's,
// for a team with several namespaces; each Placement must fit every
// FleetQuota of its namespace and every ClusterFleetQuota that selects it.
// status.clusters is the use on each cluster of all the selected namespaces.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=cfq
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +genclient
// +genclient:nonNamespaced
type ClusterFleetQuota struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ClusterFleetQuotaSpec `json:"spec"`
	// +optional
	Status FleetQuotaStatus `json:"status,omitempty"`
}

// ClusterFleetQuotaList is a list of ClusterFleetQuotas.
// +kubebuilder:object:root=true
type ClusterFleetQuotaList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterFleetQuota `json:"items"`
}

// Ready condition reasons of a FleetQuota.
const (
	// ReasonWithinQuota: what is used is within hard.
	ReasonWithinQuota = "WithinQuota"
	// ReasonQuotaExceeded: more is used than hard allows (Ready False), or,
	// on a Placement's QuotaAdmitted condition, its newest revision would
	// take the namespace past a FleetQuota.
	ReasonQuotaExceeded = "QuotaExceeded"
)

// QuotaAdmittedCondition is a Placement's condition, present in a namespace
// with a FleetQuota: True (Admitted) when its newest revision fits, False
// (QuotaExceeded) naming the quota, the resource, what the namespace's
// other Placements use and what the revision asks; the revision is then not
// rolled out and the current one stays. Written by the fleet quota
// controller.
const QuotaAdmittedCondition = "QuotaAdmitted"

// ReasonQuotaAdmitted is the QuotaAdmitted reason when the newest revision
// fits every quota that bounds the namespace.
const ReasonQuotaAdmitted = "Admitted"

// ReasonWaitingForQuota is the WorkSynchronized reason when no revision of
// the Placement is admitted by the quotas that bound its namespace yet, so
// nothing is rolled out.
const ReasonWaitingForQuota = "WaitingForQuota"

// QuotaAdmittedAnnotation on a PlacementRevision says the namespace's
// FleetQuotas admit it ("true"), written by the fleet quota controller: in a
// namespace with a FleetQuota, the work generator rolls out only admitted
// revisions.
const QuotaAdmittedAnnotation = "placement.lodestar.dev/quota-admitted"

// QuotaAdmittedClustersAnnotation on an admitted PlacementRevision is a digest
// of the clusters decided when it was admitted (what the admission counted).
// When the clusters decided change, the clusters that have no Work of the
// Placement yet get none until the fleet quota controller admits the revision
// again for the new clusters: widening a Placement is admitted as a new
// revision is.
const QuotaAdmittedClustersAnnotation = "placement.lodestar.dev/quota-admitted-clusters"
