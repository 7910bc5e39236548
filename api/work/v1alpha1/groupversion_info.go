// Package v1alpha1 holds the work.lodestar.dev/v1alpha1 API of member clusters:
// AppliedWork, the agent's record of what it applied for a hub Work.
// +kubebuilder:object:generate=true
// +groupName=work.lodestar.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "work.lodestar.dev", Version: "v1alpha1"}

	// SchemeBuilder registers this API's types.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &AppliedWork{}, &AppliedWorkList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}

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
