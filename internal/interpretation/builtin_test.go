package interpretation

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lodestar-dev/lodestar/internal/division"
	"github.com/lodestar-dev/lodestar/internal/readiness"
	"github.com/lodestar-dev/lodestar/internal/reflection"
)

// builtinDir holds the built-in kinds' rules written as ResourceInterpretations:
// examples of the form, which must read every object as the Go code does.
const builtinDir = "../../docs/examples/interpretation/builtin"

// deploymentObject is a Deployment its controller observed at generation 2.
func deploymentObject(generation, replicas, updated, available, total int64, deadline bool) map[string]any {
	status := map[string]any{"observedGeneration": int64(2), "updatedReplicas": updated, "availableReplicas": available, "replicas": total}
	if deadline {
		status["conditions"] = []any{map[string]any{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded", "message": "ReplicaSet web-1 has timed out progressing."}}
	}
	containers := []any{
		map[string]any{"name": "web", "resources": map[string]any{"requests": map[string]any{"cpu": "250m", "memory": "64Mi"}}},
		map[string]any{"name": "proxy", "resources": map[string]any{"requests": map[string]any{"cpu": "50m"}}},
		map[string]any{"name": "bare"},
	}
	return map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "web", "generation": generation},
		"spec":   map[string]any{"replicas": replicas, "template": map[string]any{"spec": map[string]any{"containers": containers}}},
		"status": status,
	}
}

func jobObject(active, succeeded int64, condition string) map[string]any {
	status := map[string]any{"active": active, "succeeded": succeeded}
	if condition != "" {
		status["conditions"] = []any{map[string]any{"type": condition, "status": "True", "message": "BackoffLimitExceeded"}}
	}
	return map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"name": "migrate", "generation": int64(1)}, "status": status}
}

// stateOf is a readiness result's state, as a health expression says it.
func stateOf(r readiness.Result) string {
	switch {
	case r.Available:
		return readiness.StateHealthy
	case r.Degraded:
		return readiness.StateDegraded
	}
	return readiness.StateProgressing
}

func TestBuiltinRulesAsInterpretations(t *testing.T) {
	deployment := Compile(readInterpretation(t, filepath.Join(builtinDir, "deployment.yaml")))
	job := Compile(readInterpretation(t, filepath.Join(builtinDir, "job.yaml")))
	NewWithT(t).Expect(deployment.Err).NotTo(HaveOccurred())
	NewWithT(t).Expect(job.Err).NotTo(HaveOccurred())
	objects := map[string]map[string]any{
		"rolled out":           deploymentObject(2, 3, 3, 3, 3, false),
		"not observed":         deploymentObject(3, 3, 3, 3, 3, false),
		"scaled up":            deploymentObject(2, 5, 3, 3, 3, false),
		"updating":             deploymentObject(2, 3, 1, 3, 4, false),
		"old pending":          deploymentObject(2, 3, 3, 3, 4, false),
		"waiting for replicas": deploymentObject(2, 3, 3, 1, 3, false),
		"deadline exceeded":    deploymentObject(2, 3, 1, 1, 3, true),
		"job running":          jobObject(2, 1, ""),
		"job complete":         jobObject(0, 3, "Complete"),
		"job failed":           jobObject(0, 1, "Failed"),
	}
	for name, obj := range objects {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			u := &unstructured.Unstructured{Object: obj}
			in := deployment
			if u.GetKind() == "Job" {
				in = job
			}
			want := (&readiness.Checker{}).Evaluate(u)
			state, message, err := in.health.State(u)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(state).To(Equal(stateOf(want)))
			g.Expect(message).To(Equal(want.Message))
		})
	}

	g := NewWithT(t)
	raw, err := json.Marshal(objects["rolled out"])
	g.Expect(err).NotTo(HaveOccurred())
	builtin, ok := division.WorkloadOf(raw, nil)
	g.Expect(ok).To(BeTrue())
	total, requests, err := deployment.Replicas(objects["rolled out"])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(total).To(Equal(builtin.Total))
	g.Expect(requests).To(HaveLen(len(builtin.Requests)))
	for name, q := range builtin.Requests {
		got := requests[name]
		g.Expect(got.Cmp(q)).To(BeZero(), name)
	}

	for _, c := range []struct {
		in     *Interpretation
		gk     schema.GroupKind
		copies []map[string]any
	}{
		{deployment, schema.GroupKind{Group: "apps", Kind: "Deployment"}, []map[string]any{
			{"replicas": int64(3), "updatedReplicas": int64(3), "readyReplicas": int64(2), "availableReplicas": int64(2), "unavailableReplicas": int64(1)},
			{"replicas": int64(6), "updatedReplicas": int64(5), "readyReplicas": int64(6), "availableReplicas": int64(6)}}},
		{job, schema.GroupKind{Group: "batch", Kind: "Job"}, []map[string]any{
			{"active": int64(2), "succeeded": int64(4), "ready": int64(2)}, {"succeeded": int64(5), "failed": int64(1)}}},
	} {
		var copies []reflection.Copy
		var clusters []ClusterStatus
		for i, st := range c.copies {
			name := fmt.Sprintf("c%d", i)
			copies = append(copies, reflection.Copy{Cluster: name, Status: st, Replicas: -1})
			clusters = append(clusters, ClusterStatus{Name: name, Status: st})
		}
		want, ok := reflection.Status(c.gk, copies, reflection.Hub{Selected: len(copies), Divided: true, Replicas: 9})
		g.Expect(ok).To(BeTrue())
		got, err := c.in.Aggregate(map[string]any{}, clusters)
		g.Expect(err).NotTo(HaveOccurred())
		for field, v := range got {
			g.Expect(want).To(HaveKeyWithValue(field, v), "%s %s", c.gk.Kind, field)
		}
		g.Expect(got).To(HaveLen(len(want)-countNotSummed(want)), "%s: every summed field", c.gk.Kind)
	}
}

// countNotSummed counts the fields of a built-in status that are not sums:
// conditions and the like, from the worst copy, and observedGeneration.
func countNotSummed(status map[string]any) int {
	n := 0
	for _, f := range []string{"conditions", "observedGeneration", "startTime", "completionTime", "currentRevision", "updateRevision"} {
		if _, ok := status[f]; ok {
			n++
		}
	}
	return n
}
