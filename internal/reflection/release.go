package reflection

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lodestar-dev/lodestar/internal/patch"
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

// Unreleased is a hub object that keeps the status reflection wrote, and why.
type Unreleased struct {
	Object *unstructured.Unstructured
	Why    string
}

// Release takes back the status reflection wrote on the hub objects of
// manifests (a deleted Placement's current revision) in namespace, so that a
// deleted Placement leaves no fleet status behind (`kubectl get deploy`
// reading 3/2 for ever): server-side apply of an empty status by FieldOwner
// removes what only it set. Objects whose status something else writes are
// left as they are, and so are those whose kind's rules refuse to undo it (a
// finished Job: Kept) or that the API server refuses to change: those are
// returned, with why.
func Release(ctx context.Context, c client.Client, namespace string, manifests []runtime.RawExtension) ([]Unreleased, error) {
	var kept []Unreleased
	for _, m := range manifests {
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(m.Raw); err != nil || obj.GetNamespace() != namespace {
			continue
		}
		hub := &unstructured.Unstructured{}
		hub.SetGroupVersionKind(obj.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), hub); err != nil {
			if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
				continue
			}
			return kept, err
		}
		if !slices.ContainsFunc(hub.GetManagedFields(), func(mf metav1.ManagedFieldsEntry) bool {
			return mf.Subresource == "status" && mf.Manager == FieldOwner
		}) {
			continue
		}
		st, _, _ := unstructured.NestedMap(hub.Object, "status")
		if why := Kept(obj.GroupVersionKind().GroupKind(), st); why != "" {
			kept = append(kept, Unreleased{Object: obj, Why: why})
			continue
		}
		empty := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{}}}
		empty.SetGroupVersionKind(obj.GroupVersionKind())
		empty.SetNamespace(obj.GetNamespace())
		empty.SetName(obj.GetName())
		if err := patch.ApplyStatus(ctx, c, empty, FieldOwner); apierrors.IsInvalid(err) {
			// A kind's own rules refuse: retrying would refuse again, and
			// the Placement's deletion would wait for ever.
			kept = append(kept, Unreleased{Object: obj, Why: "the API server refuses to take it back: " + err.Error()})
		} else if err != nil {
			return kept, err
		}
	}
	return kept, nil
}
