package reflection

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// jobTerminal are the Job conditions the API server never lets go once True.
var jobTerminal = []string{"Complete", "Failed", "SuccessCriteriaMet", "FailureTarget"}

// Kept says why the status reflection wrote on a hub object of kind gk cannot
// be taken back when its Placement goes, because the API server refuses to
// undo it, or "" when it can be. A Job's status records a run that happened: a
// terminal condition cannot be unset, the succeeded and failed counts never go
// down, and an unsuspended Job keeps its startTime. Such a status stays, as the
// record of what ran on the clusters.
func Kept(gk schema.GroupKind, status map[string]any) string {
	if gk != (schema.GroupKind{Group: "batch", Kind: "Job"}) {
		return ""
	}
	if conditions, ok := status["conditions"].([]any); ok {
		for _, c := range conditions {
			cm, ok := c.(map[string]any)
			if !ok || cm["status"] != "True" {
				continue
			}
			for _, t := range jobTerminal {
				if cm["type"] == t {
					return fmt.Sprintf("the Job finished on its clusters (%s): the API server keeps a finished Job's status", t)
				}
			}
		}
	}
	for _, counter := range []string{"succeeded", "failed"} {
		if n, ok := integer(status[counter]); ok && n > 0 {
			return fmt.Sprintf("the Job's %s count is %d and the API server never lets it go down", counter, n)
		}
	}
	if _, ok := status["startTime"]; ok {
		return "the Job started on its clusters: the API server keeps a started Job's startTime"
	}
	return ""
}
