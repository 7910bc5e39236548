package workapply

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
)

func TestMergeRecords(t *testing.T) {
	g := NewWithT(t)
	rec := func(name string, uid types.UID) lodestarworkv1alpha1.AppliedResource {
		return lodestarworkv1alpha1.AppliedResource{Version: "v1", Kind: "ConfigMap", Namespace: "ns", Name: name, UID: uid}
	}
	res := func(r lodestarworkv1alpha1.AppliedResource) Result {
		return Result{Key: RecordKey(r), Record: &r}
	}
	prev := []lodestarworkv1alpha1.AppliedResource{rec("a", "1"), rec("b", "2")}
	out := MergeRecords(prev, []Result{res(rec("b", "3")), res(rec("c", "4")), {Key: "not-applied"}})
	g.Expect(out).To(Equal([]lodestarworkv1alpha1.AppliedResource{rec("a", "1"), rec("b", "3"), rec("c", "4")}))
	g.Expect(prev[1].UID).To(BeEquivalentTo("2"), "the previous records are not changed")
}
