// Package v1alpha1 holds the services.lodestar.dev/v1alpha1 API: how the
// Multicluster Services API (ServiceExport and ServiceImport on members) travels
// through the hub. A member's agent reports each exported Service as an
// ExportedService into its cluster's namespace on the hub; the hub merges the
// exports of one namespace/name and writes an ImportedService into the
// namespace of every cluster that imports it, which that cluster's agent turns
// into a ServiceImport, a derived Service and EndpointSlices (docs/services.md).
// +kubebuilder:object:generate=true
// +groupName=services.lodestar.dev
package v1alpha1
