package overrides

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// kibConfigMap is a ConfigMap of about 1 KiB.
var kibConfigMap = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big","namespace":"shop"},"data":{"a":"` +
	strings.Repeat("x", 1000) + `"}}`

func TestCopyIntoItselfIsRefused(t *testing.T) {
	g := NewWithT(t)
	for _, op := range []placementv1alpha1.JSONPatchOp{"copy", "move"} {
		_, err := Compile([]placementv1alpha1.Override{{Name: "bomb", JSONPatch: []placementv1alpha1.JSONPatchOperation{
			{Op: op, From: "/data", Path: "/data/x0"}}}})
		g.Expect(err).To(MatchError(ContainSubstring("cannot be copied or moved into itself")), string(op))
		g.Expect(err.Error()).To(ContainSubstring("spec.overrides[0] (bomb)"))
	}
	// A sibling is fine.
	_, err := Compile([]placementv1alpha1.Override{{Name: "ok", JSONPatch: []placementv1alpha1.JSONPatchOperation{
		{Op: "copy", From: "/data/a", Path: "/data/ab"}}}})
	g.Expect(err).NotTo(HaveOccurred())
}

// Copies that each double the object, through a second field so that no copy is
// into itself, stop at the first operation past what a Work carries.
func TestCopiesStopAtTheWorkLimit(t *testing.T) {
	g := NewWithT(t)
	ops := []placementv1alpha1.JSONPatchOperation{{Op: "add", Path: "/metadata/annotations/seed", Value: raw(`"x"`)}}
	for i := range 24 {
		ops = append(ops,
			placementv1alpha1.JSONPatchOperation{Op: "copy", From: "/data", Path: placementv1alpha1.OverridePath(fmt.Sprintf("/metadata/annotations/c%d", i))},
			placementv1alpha1.JSONPatchOperation{Op: "copy", From: "/metadata/annotations", Path: placementv1alpha1.OverridePath(fmt.Sprintf("/data/c%d", i))})
	}
	set, err := Compile([]placementv1alpha1.Override{{Name: "doubling", JSONPatch: ops}})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = set.Render([]runtime.RawExtension{{Raw: []byte(kibConfigMap)}}, bare)
	var tooLarge *TooLargeError
	g.Expect(errors.As(err, &tooLarge)).To(BeTrue(), "%v", err)
	g.Expect(tooLarge.Size).To(BeNumerically("<=", MaxObjectBytes), "no larger document was built")
	g.Expect(err.Error()).To(And(ContainSubstring("rule doubling"), ContainSubstring("768 KiB")))
}

func TestMergePatchPastTheWorkLimitIsRefused(t *testing.T) {
	g := NewWithT(t)
	set, err := Compile([]placementv1alpha1.Override{{Name: "huge", MergePatch: &placementv1alpha1.MergePatch{
		Patch: raw(`{"data":{"b":"` + strings.Repeat("y", MaxObjectBytes) + `"}}`)}}})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = set.Render([]runtime.RawExtension{{Raw: []byte(kibConfigMap)}}, bare)
	g.Expect(err).To(MatchError(ContainSubstring("past the 768 KiB a Work carries")))
}

// A value expression whose result is a list of lists of one list, L.map(a,
// L.map(b, L)): len(L)³ values for a cost of about len(L)², within the cost limit,
// is refused as it is converted.
func TestNestedMapValueExpressionIsRefused(t *testing.T) {
	g := NewWithT(t)
	l := "[" + strings.Repeat("1,", 39) + "1]"
	set, err := Compile([]placementv1alpha1.Override{{Name: "cel-bomb", JSONPatch: []placementv1alpha1.JSONPatchOperation{{
		Op: "add", Path: "/data/bomb", ValueExpression: l + ".map(a, " + l + ".map(b, " + l + "))"}}}})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = set.Render([]runtime.RawExtension{{Raw: []byte(kibConfigMap)}}, bare)
	g.Expect(err).To(MatchError(And(ContainSubstring("rule cel-bomb"), ContainSubstring("larger than 64 KiB"))))
}
