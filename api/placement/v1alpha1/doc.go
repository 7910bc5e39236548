// Package v1alpha1 holds the placement.lodestar.dev/v1alpha1 API: Placement, which
// says which objects of a hub namespace run on which member clusters.
// +kubebuilder:object:generate=true
// +groupName=placement.lodestar.dev
package v1alpha1
