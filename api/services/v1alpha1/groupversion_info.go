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

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "services.lodestar.dev", Version: "v1alpha1"}

	// SchemeBuilder registers this API's types.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &ExportedService{}, &ExportedServiceList{}, &ImportedService{}, &ImportedServiceList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
