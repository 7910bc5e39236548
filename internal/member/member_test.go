package member

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// An apply meant to create an object that someone else created first returns
// their managedFields entry too: such an object is not the agent's creation.
func TestCreatedBy(t *testing.T) {
	g := NewWithT(t)
	live := &unstructured.Unstructured{}
	live.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply}})
	g.Expect(CreatedBy(live)).To(BeEmpty(), "created by the agent's apply alone")
	live.SetManagedFields(append(live.GetManagedFields(), metav1.ManagedFieldsEntry{Manager: "kubectl-create", Operation: metav1.ManagedFieldsOperationUpdate}))
	g.Expect(CreatedBy(live)).To(Equal("kubectl-create"))
	g.Expect(CreatedBy(&unstructured.Unstructured{})).To(BeEmpty())
}
