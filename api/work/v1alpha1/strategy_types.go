package v1alpha1

import (
	"errors"
	"fmt"
	"strings"
)

// DriftPolicy says what the agent does when an object it applied is changed on the
// member by someone else.
// +kubebuilder:validation:Enum=Correct;Report
type DriftPolicy string

const (
	// DriftCorrect re-applies the manifest over the member's change.
	DriftCorrect DriftPolicy = "Correct"
	// DriftReport leaves the member's change in place and reports the changed
	// fields on the Work and the Placement.
	DriftReport DriftPolicy = "Report"
)

// DeletionPolicy says what happens on the member to the objects a Work created
// when the Work, or one of its manifests, goes.
// +kubebuilder:validation:Enum=Delete;DeleteTakenOver;Orphan
type DeletionPolicy string

const (
	// DeletionDelete deletes the objects the Work created (and only those).
	DeletionDelete DeletionPolicy = "Delete"
	// DeletionDeleteTakenOver also deletes the objects the Work took over (that
	// existed on the member before it), which Delete releases.
	DeletionDeleteTakenOver DeletionPolicy = "DeleteTakenOver"
	// DeletionOrphan leaves them on the member, released by the Work.
	DeletionOrphan DeletionPolicy = "Orphan"
)

// ClaimPolicy says what happens to the data of PersistentVolumeClaims a Work
// places.
// +kubebuilder:validation:Enum=Retain;Delete
type ClaimPolicy string

const (
	// ClaimsRetain leaves placed claims on the member, released, when the Work
	// (or their manifest) goes, whatever the deletion policy, and keeps the claims
	// of a placed StatefulSet when it is deleted or scaled down.
	ClaimsRetain ClaimPolicy = "Retain"
	// ClaimsDelete treats claims like the other objects (deletionPolicy), and a
	// StatefulSet's claims as its persistentVolumeClaimRetentionPolicy says.
	ClaimsDelete ClaimPolicy = "Delete"
)

// IgnoreField names fields of placed objects that member-side controllers own, for
// example an HPA's spec.replicas of a Deployment. The manifest's value is used
// when the object is created; after that the member's value is kept: never
// compared, reported or corrected.
type IgnoreField struct {
	// group is the API group of the kind; empty for the core group.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`

	// kind is the kind of the objects, for example Deployment.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`

	// name limits the rule to the objects of this name; empty means every object
	// of the kind.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// paths are JSON pointers (RFC 6901) to the fields, for example /spec/replicas
	// or /metadata/annotations/example.com~1revision.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:Pattern=`^(/[^/]+)+$`
	Paths []string `json:"paths"`
}

// ApplyStrategyType says how the agent writes a Work's objects to the member.
// +kubebuilder:validation:Enum=ServerSideApply;CreateOnly;ReportOnly
type ApplyStrategyType string

const (
	// ApplyServerSide applies every manifest with server-side apply and keeps the
	// member's objects in line with it.
	ApplyServerSide ApplyStrategyType = "ServerSideApply"
	// ApplyCreateOnly creates an object that is absent and never updates it.
	ApplyCreateOnly ApplyStrategyType = "CreateOnly"
	// ApplyReportOnly never writes: it reports whether the member's objects match.
	ApplyReportOnly ApplyStrategyType = "ReportOnly"
)

// TakeoverPolicy says what the agent does with an object that exists on the member
// but was not created by the Work. An object another Work placed is never taken
// over, whatever the policy.
// +kubebuilder:validation:Enum=Never;IfNoDiff;Always
type TakeoverPolicy string

const (
	// TakeoverNever leaves the object untouched and reports a conflict.
	TakeoverNever TakeoverPolicy = "Never"
	// TakeoverIfNoDiff takes the object over only when applying the manifest would
	// change nothing; otherwise it reports the differing fields.
	TakeoverIfNoDiff TakeoverPolicy = "IfNoDiff"
	// TakeoverAlways takes the object over and applies the manifest.
	TakeoverAlways TakeoverPolicy = "Always"
)

// ApplyStrategy says how the agent applies a Work.
type ApplyStrategy struct {
	// type is how objects are written: ServerSideApply (the default), CreateOnly or
	// ReportOnly.
	// +optional
	// +kubebuilder:default=ServerSideApply
	Type ApplyStrategyType `json:"type,omitempty"`

	// takeover is what happens to an object that exists on the member but was not
	// created by this Work: Never (the default), IfNoDiff or Always.
	// +optional
	// +kubebuilder:default=Never
	Takeover TakeoverPolicy `json:"takeover,omitempty"`

	// whenDrifted is what happens when an object the agent applied is changed on
	// the member by someone else: Correct (the default) re-applies the manifest;
	// Report leaves the change and reports the changed fields on the Work and the
	// Placement. A new manifest from the hub is applied either way.
	// +optional
	// +kubebuilder:default=Correct
	WhenDrifted DriftPolicy `json:"whenDrifted,omitempty"`

	// ignoreFields are fields owned by controllers on the member (for example an
	// HPA's spec.replicas): set from the manifest on creation, then left alone.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	IgnoreFields []IgnoreField `json:"ignoreFields,omitempty"`

	// deletionPolicy is what happens on the member to the objects a Work placed
	// when the Work (or one of its manifests) goes: Delete (the default) deletes
	// exactly the objects the agent created and releases those it took over;
	// DeleteTakenOver deletes the taken-over ones too; Orphan leaves them all,
	// released.
	// +optional
	// +kubebuilder:default=Delete
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// claims is what happens to the data of PersistentVolumeClaims: Retain (the
	// default) leaves a placed claim on the member, released, when the Work or
	// its manifest goes (a claim stands for data), and makes a placed
	// StatefulSet's persistentVolumeClaimRetentionPolicy Retain on the member;
	// Delete treats claims like the other objects and leaves StatefulSets'
	// retention policy as the manifest says.
	// +optional
	// +kubebuilder:default=Retain
	Claims ClaimPolicy `json:"claims,omitempty"`
}

// Defaulted returns s with its defaults filled in.
func (s ApplyStrategy) Defaulted() ApplyStrategy {
	if s.Type == "" {
		s.Type = ApplyServerSide
	}
	if s.Takeover == "" {
		s.Takeover = TakeoverNever
	}
	if s.WhenDrifted == "" {
		s.WhenDrifted = DriftCorrect
	}
	if s.DeletionPolicy == "" {
		s.DeletionPolicy = DeletionDelete
	}
	if s.Claims == "" {
		s.Claims = ClaimsRetain
	}
	return s
}

// Validate tells whether the agent can apply a Work with this strategy, its
// defaults filled in (Defaulted): every type and policy is one it knows, and
// every ignored field is a JSON pointer to a field. The API server checks the
// same of a Placement's; the agent checks it again of what a Work's annotation
// says, and writes nothing when it does not hold.
func (s ApplyStrategy) Validate() error {
	var errs []error
	check := func(field, got string, known ...string) {
		for _, k := range known {
			if got == k {
				return
			}
		}
		errs = append(errs, fmt.Errorf("unknown %s %q (known: %s)", field, got, strings.Join(known, ", ")))
	}
	check("apply strategy type", string(s.Type), string(ApplyServerSide), string(ApplyCreateOnly), string(ApplyReportOnly))
	check("takeover policy", string(s.Takeover), string(TakeoverNever), string(TakeoverIfNoDiff), string(TakeoverAlways))
	check("drift policy", string(s.WhenDrifted), string(DriftCorrect), string(DriftReport))
	check("deletion policy", string(s.DeletionPolicy), string(DeletionDelete), string(DeletionDeleteTakenOver), string(DeletionOrphan))
	check("claim policy", string(s.Claims), string(ClaimsRetain), string(ClaimsDelete))
	for i, f := range s.IgnoreFields {
		if f.Kind == "" || len(f.Paths) == 0 {
			errs = append(errs, fmt.Errorf("ignoreFields[%d]: kind and paths are required", i))
		}
		for _, p := range f.Paths {
			if err := validPointer(p); err != nil {
				errs = append(errs, fmt.Errorf("ignoreFields[%d] of %s: %w", i, f.Kind, err))
			}
		}
	}
	return errors.Join(errs...)
}

// validPointer checks that p is a JSON pointer (RFC 6901) to a field: keys
// after slashes, none empty, "~" only in "~0" and "~1".
func validPointer(p string) error {
	if !strings.HasPrefix(p, "/") || len(p) < 2 {
		return fmt.Errorf("%q is not a JSON pointer: it must start with / and name a field", p)
	}
	for _, key := range strings.Split(p[1:], "/") {
		if key == "" {
			return fmt.Errorf("%q is not a JSON pointer: empty key", p)
		}
		if strings.Contains(strings.NewReplacer("~0", "", "~1", "").Replace(key), "~") {
			return fmt.Errorf("%q is not a JSON pointer: ~ is escaped as ~0", p)
		}
	}
	return nil
}

// FeedbackRule says which status values of the placed objects of one kind the
// agent reports back on the Work. Values are never collected from Secrets.
// +kubebuilder:validation:XValidation:rule="has(self.fields) != (has(self.wholeStatus) && self.wholeStatus)",message="exactly one of fields and wholeStatus must be set"
// +kubebuilder:validation:XValidation:rule="!(self.kind == 'Secret' && (!has(self.group) || size(self.group) == 0))",message="status feedback is never collected from Secrets"
type FeedbackRule struct {
	// group is the API group of the kind; empty for the core group.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`

	// kind is the kind whose objects the rule reads.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`

	// fields are the named values to report.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	Fields []FeedbackField `json:"fields,omitempty"`

	// wholeStatus reports the object's whole status, under the name "status".
	// +optional
	WholeStatus bool `json:"wholeStatus,omitempty"`
}

// FeedbackField is one named value, read by a JSONPath or computed by a CEL
// expression over the object (bound to `self`).
// +kubebuilder:validation:XValidation:rule="has(self.jsonPath) != has(self.cel)",message="exactly one of jsonPath and cel must be set"
type FeedbackField struct {
	// name names the value in the feedback.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-zA-Z][a-zA-Z0-9_]*$`
	Name string `json:"name"`

	// jsonPath reads the value, for example .status.readyReplicas.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	JSONPath string `json:"jsonPath,omitempty"`

	// cel computes the value from the object, bound to self, for example
	// self.status.readyReplicas * 100 / self.spec.replicas.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	CEL string `json:"cel,omitempty"`
}

// HealthRule is the health of a kind, in CEL over the member's object bound to
// `self`, yielding "Healthy", "Progressing" or "Degraded" or a map {"state",
// "message"}. The hub writes the rules of a Work's kinds from its
// ResourceInterpretations (HealthRulesAnnotation); the member's own readiness
// rules for a kind win over them.
type HealthRule struct {
	// group is the kind's API group; empty for the core group.
	// +optional
	Group string `json:"group,omitempty"`
	// kind is the kind the rule is for.
	// +required
	Kind string `json:"kind"`
	// expression is the CEL expression.
	// +required
	Expression string `json:"expression"`
	// source names the ResourceInterpretation the rule comes from.
	// +optional
	Source string `json:"source,omitempty"`
}
