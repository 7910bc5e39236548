package workapply

import (
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/claims"
)

// MaxDiffPaths caps how many differing fields a message names.
const MaxDiffPaths = 10

// MsgApplied is the Applied message of a manifest applied as it is.
const MsgApplied = "applied with server-side apply"

// Result is what applying one manifest came to.
type Result struct {
	ID        workv1alpha1.ResourceIdentifier
	Key       string // group/kind/namespace/name; empty when the manifest is not valid
	Record    *lodestarworkv1alpha1.AppliedResource
	Condition metav1.Condition
	// Live is the object on the member after this step, when there is one.
	Live *unstructured.Unstructured
	// Transient is set when a retry with backoff may succeed.
	Transient error
	// Waiting is set when the manifest waits for something that arrives soon
	// (a CRD of the same Work).
	Waiting bool
	// Drift are the fields in which the member's object differs from the manifest,
	// left so (whenDrifted: Report); "(deleted)" when it was deleted.
	Drift []string
	// Corrected are the fields of the member's object that someone else had
	// changed and the agent set back.
	Corrected []string
	// RanOnce is set for a Job that ran and is gone from the member.
	RanOnce bool
	// Blocker names what holds back the pods of an object that is not available.
	Blocker string
	// Claims are the state of the object's claims: a placed claim's, or those a
	// placed StatefulSet made on the member.
	Claims *claims.Report
	// PassedFrom names the AppliedWork that placed the object before and let it
	// go to this Work, undeleted.
	PassedFrom string
}

// Fail sets res's Applied condition False with a message naming the manifest, and
// returns res.
func (res *Result) Fail(reason, format string, args ...any) Result {
	res.Condition = AppliedCondition(metav1.ConditionFalse, reason, fmt.Sprintf("manifest %d (%s): ", res.ID.Ordinal, Describe(res.ID))+fmt.Sprintf(format, args...))
	return *res
}

// Succeed sets res's Applied condition True, and returns res.
func (res *Result) Succeed(reason, format string, args ...any) Result {
	res.Condition = AppliedCondition(metav1.ConditionTrue, reason, fmt.Sprintf(format, args...))
	return *res
}

// TransientErrors joins the errors of manifests that a retry may fix.
func TransientErrors(results []Result) error {
	var errs []error
	for _, res := range results {
		if res.Transient != nil {
			errs = append(errs, fmt.Errorf("manifest %d (%s): %w", res.ID.Ordinal, Describe(res.ID), res.Transient))
		}
	}
	return errors.Join(errs...)
}
