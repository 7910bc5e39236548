package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "placement.lodestar.dev", Version: "v1alpha1"}

	// SchemeGroupVersion is GroupVersion, by the name generated clients use.
	SchemeGroupVersion = GroupVersion

	// SchemeBuilder registers this API's types.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &Placement{}, &PlacementList{},
		&PlacementRevision{}, &PlacementRevisionList{}, &RolloutApproval{}, &RolloutApprovalList{},
		&ClusterSetBinding{}, &ClusterSetBindingList{}, &ClusterPlacement{}, &ClusterPlacementList{},
		&MemberAccessGrant{}, &MemberAccessGrantList{}, &ConsumerAccessGrant{}, &ConsumerAccessGrantList{},
		&ResourceInterpretation{}, &ResourceInterpretationList{}, &FleetQuota{}, &FleetQuotaList{}, &ClusterFleetQuota{}, &ClusterFleetQuotaList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}

// Resource is the group's resource of that name (generated listers name it in errors).
func Resource(resource string) schema.GroupResource {
	return GroupVersion.WithResource(resource).GroupResource()
}
