package reflection

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestKept(t *testing.T) {
	job := schema.GroupKind{Group: "batch", Kind: "Job"}
	for _, tc := range []struct {
		name   string
		gk     schema.GroupKind
		status map[string]any
		want   string
	}{
		{"a Deployment's status goes", schema.GroupKind{Group: "apps", Kind: "Deployment"}, map[string]any{"replicas": int64(3)}, ""},
		{"a Job never started goes", job, map[string]any{}, ""},
		{"a complete Job stays", job, map[string]any{"succeeded": int64(2), "startTime": "t",
			"conditions": []any{map[string]any{"type": "SuccessCriteriaMet", "status": "True"}, map[string]any{"type": "Complete", "status": "True"}}},
			"finished on its clusters (SuccessCriteriaMet)"},
		{"a failed Job stays", job, map[string]any{"conditions": []any{map[string]any{"type": "Failed", "status": "True"}}}, "(Failed)"},
		{"a False terminal condition is no end", job, map[string]any{"conditions": []any{map[string]any{"type": "Complete", "status": "False"}}}, ""},
		{"a Job with successes stays", job, map[string]any{"succeeded": int64(1)}, "succeeded count is 1"},
		{"a Job with failures stays", job, map[string]any{"failed": float64(2)}, "failed count is 2"},
		{"a started Job stays", job, map[string]any{"active": int64(1), "startTime": "2026-11-28T10:00:00Z"}, "startTime"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Kept(tc.gk, tc.status)
			if tc.want == "" {
				NewWithT(t).Expect(got).To(BeEmpty())
			} else {
				NewWithT(t).Expect(got).To(ContainSubstring(tc.want))
			}
		})
	}
}
