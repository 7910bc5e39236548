package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// ServiceProperties are what a ServiceImport takes from the exported Services:
// the ServiceImport's spec without its IPs (each importing cluster allocates
// its own), and the labels and annotations the exports list.
type ServiceProperties struct {
	// type is ClusterSetIP, or Headless for a Service without a cluster IP.
	// +required
	// +kubebuilder:validation:Enum=ClusterSetIP;Headless
	Type mcsv1beta1.ServiceImportType `json:"type"`
	// ports are the Service's ports.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	Ports []mcsv1beta1.ServicePort `json:"ports,omitempty"`
	// sessionAffinity is the Service's session affinity.
	// +optional
	SessionAffinity corev1.ServiceAffinity `json:"sessionAffinity,omitempty"`
	// sessionAffinityConfig is the Service's session affinity configuration.
	// +optional
	SessionAffinityConfig *corev1.SessionAffinityConfig `json:"sessionAffinityConfig,omitempty"`
	// ipFamilies are the Service's IP families.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=2
	IPFamilies []corev1.IPFamily `json:"ipFamilies,omitempty"`
	// internalTrafficPolicy is the Service's internal traffic policy.
	// +optional
	InternalTrafficPolicy *corev1.ServiceInternalTrafficPolicy `json:"internalTrafficPolicy,omitempty"`
	// trafficDistribution is the Service's traffic distribution.
	// +optional
	TrafficDistribution *string `json:"trafficDistribution,omitempty"`
	// labels are the ServiceExport's spec.exportedLabels.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// annotations are the ServiceExport's spec.exportedAnnotations.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Slice is one EndpointSlice of an exported Service: its ready and
// serving-terminating endpoints, without the member's object references.
type Slice struct {
	// addressType is the slice's address type.
	// +required
	AddressType discoveryv1.AddressType `json:"addressType"`
	// ports are the slice's ports.
	// +optional
	// +listType=atomic
	Ports []discoveryv1.EndpointPort `json:"ports,omitempty"`
	// endpoints are the slice's endpoints that are ready, or serving while
	// terminating.
	// +optional
	// +listType=atomic
	Endpoints []Endpoint `json:"endpoints,omitempty"`
}

// Endpoint is one endpoint of an exported slice.
type Endpoint struct {
	// addresses are the endpoint's addresses.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	Addresses []string `json:"addresses"`
	// conditions are the endpoint's ready, serving and terminating conditions.
	// +optional
	Conditions discoveryv1.EndpointConditions `json:"conditions,omitempty"`
	// hostname is the endpoint's hostname (a StatefulSet pod's name behind a
	// headless Service).
	// +optional
	Hostname *string `json:"hostname,omitempty"`
	// zone is the endpoint's zone.
	// +optional
	Zone *string `json:"zone,omitempty"`
}

// ExportedServiceSpec is a member's report of one of its ServiceExports.
type ExportedServiceSpec struct {
	// namespace is the namespace of the ServiceExport and its Service.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// name is the name of the ServiceExport and its Service.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// exportCreated is the ServiceExport's creation time on the member: the
	// oldest export wins a conflict.
	// +required
	ExportCreated metav1.Time `json:"exportCreated"`
	// invalid, when set, says why the export cannot be imported (the KEP's Valid
	// reasons NoService and InvalidServiceType); service is then unset.
	// +optional
	Invalid *Invalid `json:"invalid,omitempty"`
	// service are the exported Service's properties.
	// +optional
	Service *ServiceProperties `json:"service,omitempty"`
	// slices are the exported Service's EndpointSlices.
	// +optional
	// +listType=atomic
	Slices []Slice `json:"slices,omitempty"`
}

// Invalid is why an export is not valid.
type Invalid struct {
	// reason is the ServiceExport's Valid=False reason.
	// +required
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason"`
	// message says what is wrong.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// ExportedServiceStatus is the hub's answer to an export: its Valid, Ready and
// Conflict conditions, which the agent copies onto the member's ServiceExport.
type ExportedServiceStatus struct {
	// observedGeneration is the generation the conditions are about.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions are the export's Valid, Ready and Conflict conditions.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ExportedService is one ServiceExport of a member cluster, reported by the
// cluster's agent into the cluster's namespace on the hub (the namespace says
// which cluster exports; an agent may write only its own), named
// "<namespace>.<name>".
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=lodestar
// +kubebuilder:printcolumn:name="Service-Namespace",type=string,JSONPath=`.spec.namespace`
// +kubebuilder:printcolumn:name="Service",type=string,JSONPath=`.spec.name`
// +kubebuilder:printcolumn:name="Valid",type=string,JSONPath=`.status.conditions[?(@.type=="Valid")].status`
// +kubebuilder:printcolumn:name="Conflict",type=string,JSONPath=`.status.conditions[?(@.type=="Conflict")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ExportedService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ExportedServiceSpec `json:"spec"`
	// +optional
	Status ExportedServiceStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ExportedServiceList is a list of ExportedServices.
type ExportedServiceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ExportedService `json:"items"`
}

// SourceSlices are the slices one exporting cluster contributes to an import.
type SourceSlices struct {
	// cluster is the exporting cluster.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster"`
	// slices are its ready and serving endpoints.
	// +optional
	// +listType=atomic
	Slices []Slice `json:"slices,omitempty"`
}

// ImportedServiceSpec is what one importing cluster is to serve for an
// exported namespace/name.
type ImportedServiceSpec struct {
	// namespace is the namespace of the ServiceImport.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// name is the name of the ServiceImport.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// service are the merged properties of the exports.
	// +required
	Service ServiceProperties `json:"service"`
	// clusters are the exporting clusters (the ServiceImport's status.clusters).
	// +optional
	// +listType=atomic
	Clusters []string `json:"clusters,omitempty"`
	// sources are the endpoints of each exporting cluster whose endpoints are
	// served now: a cluster whose agent stopped reporting is withdrawn.
	// +optional
	// +listType=atomic
	Sources []SourceSlices `json:"sources,omitempty"`
	// namespaceSameness is ClusterSet when the importing cluster's cluster set
	// is in namespace sameness (NamespaceSamenessLabel): the import lands in
	// the member's namespace of that name whoever made it. Empty: the hub
	// places the namespace on the cluster, and the import lands only there.
	// +optional
	// +kubebuilder:validation:Enum=ClusterSet
	NamespaceSameness string `json:"namespaceSameness,omitempty"`
}

// ImportedServiceStatus is the importing agent's report.
type ImportedServiceStatus struct {
	// observedGeneration is the generation the agent last served on the member.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// ips are the ServiceImport's IPs on the member.
	// +optional
	// +listType=atomic
	IPs []string `json:"ips,omitempty"`
	// conditions: Ready, with a reason when the member does not serve the import
	// (its namespace is missing, or a ServiceImport of someone else's is there).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ImportedService is what the hub asks one importing cluster to serve for an
// exported namespace/name, in the cluster's namespace on the hub, named
// "<namespace>.<name>". Only the hub writes its spec.
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=lodestar
// +kubebuilder:printcolumn:name="Service-Namespace",type=string,JSONPath=`.spec.namespace`
// +kubebuilder:printcolumn:name="Service",type=string,JSONPath=`.spec.name`
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.service.type`
// +kubebuilder:printcolumn:name="IPs",type=string,JSONPath=`.status.ips`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ImportedService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ImportedServiceSpec `json:"spec"`
	// +optional
	Status ImportedServiceStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ImportedServiceList is a list of ImportedServices.
type ImportedServiceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ImportedService `json:"items"`
}

// Well-known names.
const (
	// ExportsLease is the Lease an exporting cluster's agent renews in its
	// cluster namespace on the hub while it reports exports: when it expires,
	// the cluster's endpoints leave every importer (the KEP's endpoint TTL),
	// whatever the paced heartbeat says.
	ExportsLease = "lodestar-exports"
	// NamespaceSamenessLabel, on a cluster set's namespace, turns the set's
	// Multicluster Services to KEP-1645's namespace sameness when its value is
	// NamespaceSamenessClusterSet: a namespace of a member of the set takes
	// part in exports and imports whoever made it. Without it (the default),
	// a cluster shares only the namespaces the hub places on it.
	NamespaceSamenessLabel = "services.lodestar.dev/namespace-sameness"
	// NamespaceSamenessClusterSet is NamespaceSamenessLabel's value that
	// turns namespace sameness on.
	NamespaceSamenessClusterSet = "ClusterSet"
	// ManagedBy is the endpointslice.kubernetes.io/managed-by value of the
	// EndpointSlices Lodestar writes on importing members, and the value of the
	// app.kubernetes.io/managed-by label of their ServiceImports and derived
	// Services.
	ManagedBy = "services.lodestar.dev"
	// ImportLabel names, on a member's derived Service and imported
	// EndpointSlices, the ServiceImport they serve.
	ImportLabel = "services.lodestar.dev/import"
	// ReasonNamespaceNotExported is the Valid=False reason of an export from a
	// namespace the platform has not opened to exports (kube-*, default).
	ReasonNamespaceNotExported = "NamespaceNotExported"
	// ReasonClusterNotBound is the Valid=False reason of an export from a
	// cluster outside the cluster sets the namespace is bound to on the hub.
	ReasonClusterNotBound = "ClusterNotBound"
	// ReasonNamespaceNotPlaced is the Valid=False reason of an export from a
	// namespace the hub places nothing of on the exporting cluster (no Work of
	// it there), and an import's Ready=False reason on a member the hub
	// places nothing of the namespace on: a cluster shares Services only in
	// the namespaces the hub gives it.
	ReasonNamespaceNotPlaced = "NamespaceNotPlaced"
	// ReasonNamespaceMissing is an import's Ready=False reason when the member
	// has no such namespace.
	ReasonNamespaceMissing = "NamespaceMissing"
	// ReasonNotServed is an import's Ready=False reason when the member does
	// not serve the Multicluster Services API (no CRDs).
	ReasonNotServed = "MultiClusterServicesNotServed"
	// ReasonNotOurs is an import's Ready=False reason when the member has a
	// ServiceImport that Lodestar did not create.
	ReasonNotOurs = "ServiceImportNotManaged"
	// ReasonImportTooLarge (Ready=False on an export): its endpoints do not fit
	// in the imports, which carry at most 1 MiB of endpoints, the oldest
	// exports' first.
	ReasonImportTooLarge = "ImportTooLarge"
	// ReasonExportTooLarge (Valid=False on an export): the Service's ready
	// endpoints on its cluster are more than MaxEndpointBytes; none of them
	// is exported.
	ReasonExportTooLarge = "ExportTooLarge"
)

// MaxEndpointBytes is how many bytes of endpoints (as JSON) an import
// carries from all its exporting clusters together, and so what one export
// may report: etcd refuses a request over 1.5 MiB, and an import holds its
// metadata, properties and status besides.
const MaxEndpointBytes = 1 << 20

// ExportsLeaseLabel marks the exports leases (value "true").
const ExportsLeaseLabel = "services.lodestar.dev/exports-lease"
