// Package v1alpha1 holds the work.lodestar.dev/v1alpha1 API of member clusters:
// AppliedWork, the agent's record of what it applied for a hub Work.
// +kubebuilder:object:generate=true
// +groupName=work.lodestar.dev
package v1alpha1
