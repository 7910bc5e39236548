package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Override customises the placed objects for some clusters. Overrides apply in
// the order of spec.overrides, each to the objects and clusters it selects; a
// later rule sees what the earlier ones made, so the later one wins.
// +kubebuilder:validation:XValidation:rule="[has(self.jsonPatch), has(self.mergePatch), has(self.image), has(self.remove), has(self.delete) && self.delete].exists_one(x, x)",message="an override has exactly one action: jsonPatch, mergePatch, image, remove or delete: true"
type Override struct {
	// name identifies the rule in status, events and the render trace; unique
	// within the Placement.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// clusterSelector limits the rule to clusters whose ClusterProfile labels
	// match. Every cluster criterion given must hold; with none, the rule applies
	// to every selected cluster.
	// +optional
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`

	// clusterNames limits the rule to the named clusters.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MaxLength=253
	ClusterNames []string `json:"clusterNames,omitempty"`

	// clusterExpression is a CEL expression over `cluster` (the view of
	// spec.scheduling.clusterExpression) that limits the rule to clusters making it true. An
	// error (a missing label, say) fails the rule on that cluster.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	ClusterExpression string `json:"clusterExpression,omitempty"`

	// targets limits the rule to the placed objects that any target matches; with
	// none, the rule applies to every placed object.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Targets []OverrideTarget `json:"targets,omitempty"`

	// jsonPatch is a list of RFC 6902 operations. add creates missing parent
	// objects; a failing operation (test, or a path that is not there for
	// replace) fails the rule on that cluster.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	JSONPatch []JSONPatchOperation `json:"jsonPatch,omitempty"`

	// mergePatch is an RFC 7386 merge patch: a literal object, or one computed
	// per cluster by CEL.
	// +optional
	MergePatch *MergePatch `json:"mergePatch,omitempty"`

	// image replaces parts of the image of every container and init container of
	// the object's pod template (objects without one are left alone).
	// +optional
	Image *ImageOverride `json:"image,omitempty"`

	// remove removes the fields at these JSON pointers; a path that is not there
	// is not an error.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Remove []OverridePath `json:"remove,omitempty"`

	// delete: true leaves the objects out of these clusters' Works (and so removes
	// them from those clusters). Later rules do not bring them back.
	// +optional
	Delete bool `json:"delete,omitempty"`
}

// OverridePath is a JSON pointer (RFC 6901) into a placed object, such as
// /spec/replicas or /metadata/labels/app.kubernetes.io~1tier. It may not reach
// apiVersion, kind, status or metadata other than labels and annotations.
// +kubebuilder:validation:MinLength=2
// +kubebuilder:validation:MaxLength=512
// +kubebuilder:validation:Pattern=`^(/([^/~]|~[01])*)+$`
// +kubebuilder:validation:XValidation:rule="!self.matches('^/(apiVersion|kind|status)(/|$)') && self != '/metadata' && (!self.startsWith('/metadata/') || self.matches('^/metadata/(labels|annotations)(/|$)'))",message="an override may not change apiVersion, kind, status or metadata other than labels and annotations"
type OverridePath string

// OverrideTarget matches placed objects; each field given must match.
// +kubebuilder:validation:XValidation:rule="!(has(self.name) && has(self.labelSelector))",message="name and labelSelector are mutually exclusive"
type OverrideTarget struct {
	// group is the object's API group; empty for the core group. Matches any group
	// when kind is empty too.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`

	// kind is the object's kind, for example Deployment.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind,omitempty"`

	// name is the object's name.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// labelSelector matches the object's labels on the hub.
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
}

// JSONPatchOp is an RFC 6902 operation.
// +kubebuilder:validation:Enum=add;remove;replace;move;copy;test
type JSONPatchOp string

// JSONPatchOperation is one RFC 6902 operation, whose value may be computed per
// cluster.
// The API server cannot see into value (any JSON), so the work generator checks
// that add, replace and test take exactly one of value and valueExpression.
// +kubebuilder:validation:XValidation:rule="!(self.op in ['remove', 'move', 'copy']) || !has(self.valueExpression)",message="remove, move and copy take no valueExpression"
// +kubebuilder:validation:XValidation:rule="(self.op in ['move', 'copy']) == has(self.from)",message="move and copy take from; the other operations do not"
// +kubebuilder:validation:XValidation:rule="self.op != 'move' || (!self.from.matches('^/(apiVersion|kind|status)(/|$)') && self.from != '/metadata' && (!self.from.startsWith('/metadata/') || self.from.matches('^/metadata/(labels|annotations)(/|$)')))",message="move may not take from apiVersion, kind, status or metadata other than labels and annotations"
type JSONPatchOperation struct {
	// op is add, remove, replace, move, copy or test.
	// +required
	Op JSONPatchOp `json:"op"`

	// path is the JSON pointer the operation changes.
	// +required
	Path OverridePath `json:"path"`

	// from is the JSON pointer move and copy read.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^(/([^/~]|~[01])*)+$`
	From string `json:"from,omitempty"`

	// value is the literal JSON value of add, replace and test.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	Value *JSON `json:"value,omitempty"`

	// valueExpression is a CEL expression over `cluster` whose result (a string,
	// number, bool, list, map or null) is the value; numbers stay numbers, for
	// example int(cluster.properties['replicas.example.com']).
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	ValueExpression string `json:"valueExpression,omitempty"`
}

// MergePatch is an RFC 7386 merge patch, with exactly one of patch and
// patchExpression (checked by the work generator: the API server cannot see into
// patch).
type MergePatch struct {
	// patch is the literal merge patch, an object.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	Patch *JSON `json:"patch,omitempty"`

	// patchExpression is a CEL expression over `cluster` that yields the merge
	// patch as a map, for example
	// {'spec': {'replicas': int(cluster.properties['replicas.example.com'])}}.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	PatchExpression string `json:"patchExpression,omitempty"`
}

// ImageOverride replaces parts of container images. An image is
// [registry/]repository[:tag][@digest]; the parts given replace the image's.
// +kubebuilder:validation:XValidation:rule="has(self.registry) || has(self.repository) || has(self.tag)",message="an image override sets at least one of registry, repository and tag"
type ImageOverride struct {
	// containers limits the override to the containers and init containers with
	// these names; with none, every container's image is changed.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=63
	Containers []string `json:"containers,omitempty"`

	// registry replaces the registry host (and port), or adds one where the image
	// names none, for example mirror.edge.example:5000.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9]([-a-zA-Z0-9.]*[a-zA-Z0-9])?(:[0-9]+)?$`
	Registry string `json:"registry,omitempty"`

	// repository replaces the repository path, for example library/nginx.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]+([._/-][a-z0-9]+)*$`
	Repository string `json:"repository,omitempty"`

	// tag replaces the tag, and drops a digest the image had (a digest would pin
	// the old image).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9_][a-zA-Z0-9_.-]*$`
	Tag string `json:"tag,omitempty"`
}
