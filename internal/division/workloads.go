// Workloads: the divisible objects of a revision, and how a cluster's share is
// written into a manifest.

package division

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lodestar-dev/lodestar/internal/quantity"
)

// divisible are the kinds whose replicas a Placement divides.
var divisible = map[schema.GroupKind]bool{
	{Group: "apps", Kind: "Deployment"}: true, {Group: "apps", Kind: "StatefulSet"}: true,
	{Group: "apps", Kind: "ReplicaSet"}: true, {Group: "batch", Kind: "Job"}: true,
}

var jobKind = schema.GroupKind{Group: "batch", Kind: "Job"}

// Kinds says how to read the replicas of kinds without built-in rules (the
// hub's ResourceInterpretations). A nil Kinds knows none.
type Kinds interface {
	// Replicas is how to read and write gk's replicas, or nil.
	Replicas(gk schema.GroupKind) Replicas
}

// Replicas reads and writes the replica count of a kind.
type Replicas interface {
	// Replicas reads obj's replica count and what one replica requests.
	Replicas(obj map[string]any) (int64, map[string]resource.Quantity, error)
	// WriteReplicas sets obj's replica count.
	WriteReplicas(obj map[string]any, n int64)
}

// replicasOf is how kinds reads gk's replicas, or nil.
func replicasOf(kinds Kinds, gk schema.GroupKind) Replicas {
	if kinds == nil {
		return nil
	}
	return kinds.Replicas(gk)
}

// Divisible tells whether a Placement divides the replicas of objects of gk.
func Divisible(gk schema.GroupKind, kinds Kinds) bool {
	return divisible[gk] || replicasOf(kinds, gk) != nil
}

// Workload is a divisible object of a revision.
type Workload struct {
	// Key names it among the Placement's objects: "Deployment/web".
	Key  string
	Kind schema.GroupKind
	// Index is its manifest's place in the revision's manifests.
	Index int
	// Total is its replicas (a Job's completions); Parallelism a Job's.
	Total, Parallelism int64
	// Requests are what one of its pods requests (the sum of its containers').
	Requests map[string]resource.Quantity
	// Invalid says why it cannot be divided, when it cannot.
	Invalid string
	// custom reads and writes the replicas of a kind without built-in rules.
	custom Replicas
}

// Key names an object of kind in the Placement's namespace for a division.
func Key(kind, name string) string { return kind + "/" + name }

// WorkloadOf reads a divisible manifest; false for other kinds.
func WorkloadOf(raw []byte, kinds Kinds) (Workload, bool) {
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(raw); err != nil {
		return Workload{}, false
	}
	gk := obj.GroupVersionKind().GroupKind()
	custom := replicasOf(kinds, gk)
	if !divisible[gk] && custom == nil {
		return Workload{}, false
	}
	w := Workload{Key: Key(gk.Kind, obj.GetName()), Kind: gk, custom: custom}
	switch {
	case custom != nil:
		total, requests, err := custom.Replicas(obj.Object)
		if err != nil {
			w.Invalid = err.Error()
		}
		w.Total, w.Requests = total, requests
		bound(&w)
		return w, true
	case gk == jobKind:
		completions, found, _ := unstructured.NestedInt64(obj.Object, "spec", "completions")
		if !found {
			w.Invalid = "a Job without spec.completions (a work queue) cannot be divided: its pods finish when any of them succeeds"
		}
		w.Total = completions
		w.Parallelism = 1
		if p, found, _ := unstructured.NestedInt64(obj.Object, "spec", "parallelism"); found {
			w.Parallelism = p
		}
	default:
		w.Total = 1 // Kubernetes' default
		if r, found, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas"); found {
			w.Total = r
		}
	}
	w.Requests = podRequests(obj)
	bound(&w)
	return w, true
}

// bound marks w Invalid when its replicas or requests are beyond a division.
func bound(w *Workload) {
	if w.Invalid != "" {
		return
	}
	if w.Total > MaxValue || w.Total < 0 {
		w.Invalid = fmt.Sprintf("%d replicas are more than a division takes (%d)", w.Total, MaxValue)
		return
	}
	for _, name := range slices.Sorted(maps.Keys(w.Requests)) {
		if q := w.Requests[name]; q.Cmp(*MaxRequest) > 0 {
			w.Invalid = fmt.Sprintf("its pods request %s of %s, more than a division takes (at most %s)", q.String(), name, MaxRequest.String())
			return
		}
	}
}

// Workloads are the divisible objects among manifests, each with its index.
func Workloads(manifests []runtime.RawExtension, kinds Kinds) []Workload {
	var out []Workload
	for i, m := range manifests {
		if w, ok := WorkloadOf(m.Raw, kinds); ok {
			w.Index = i
			out = append(out, w)
		}
	}
	return out
}

// podRequests adds up the requests of the containers of obj's pod template.
func podRequests(obj *unstructured.Unstructured) map[string]resource.Quantity {
	containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
	out := map[string]resource.Quantity{}
	for _, c := range containers {
		requests, _, _ := unstructured.NestedStringMap(asMap(c), "resources", "requests")
		for name, v := range requests {
			q, err := quantity.Parse(v)
			if err != nil {
				continue
			}
			sum := out[name]
			sum.Add(q)
			out[name] = sum
		}
	}
	return out
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// Write sets a cluster's share in a workload's manifest: spec.replicas, or a
// Job's completions and parallelism (parallelism its share of the total's,
// at least 1), and a StatefulSet's spec.ordinals.start, so that the pods of
// the fleet have names of their own.
func Write(raw []byte, s Share) ([]byte, error) {
	obj := map[string]any{}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	spec, _ := obj["spec"].(map[string]any)
	if spec == nil {
		spec = map[string]any{}
		obj["spec"] = spec
	}
	kind, _ := obj["kind"].(string)
	switch kind {
	case "Job":
		spec["completions"] = s.Replicas
		spec["parallelism"] = s.Parallelism
	case "StatefulSet":
		spec["replicas"] = s.Replicas
		if s.Start > 0 {
			spec["ordinals"] = map[string]any{"start": s.Start}
		} else {
			delete(spec, "ordinals")
		}
	default:
		spec["replicas"] = s.Replicas
	}
	return json.Marshal(obj)
}

// write is Write, for a kind without built-in rules at its interpreted path.
func (w Workload) write(raw []byte, s Share) ([]byte, error) {
	if w.custom == nil {
		return Write(raw, s)
	}
	obj := map[string]any{}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	w.custom.WriteReplicas(obj, s.Replicas)
	return json.Marshal(obj)
}

// Apply writes a cluster's shares into manifests, whose divisible ones are
// workloads (Workloads of the same manifests: nothing is decoded again per
// cluster): each gets its share, and one whose share is 0 is left out. memo,
// when not nil, keeps the manifests written by prefix (a revision), workload
// and share.
func Apply(manifests []runtime.RawExtension, workloads []Workload, shares Shares, memo map[string]runtime.RawExtension, prefix string) ([]runtime.RawExtension, error) {
	byIndex := make(map[int]Workload, len(workloads))
	for _, w := range workloads {
		byIndex[w.Index] = w
	}
	out := make([]runtime.RawExtension, 0, len(manifests))
	for i, m := range manifests {
		w, ok := byIndex[i]
		if !ok {
			out = append(out, m)
			continue
		}
		s := shares.Workloads[w.Key]
		if s.Replicas == 0 {
			continue
		}
		key := fmt.Sprintf("%s/%s/%d/%d/%d", prefix, w.Key, s.Replicas, s.Parallelism, s.Start)
		if written, ok := memo[key]; ok {
			out = append(out, written)
			continue
		}
		raw, err := w.write(m.Raw, s)
		if err != nil {
			return nil, fmt.Errorf("dividing %s: %w", w.Key, err)
		}
		if memo != nil {
			memo[key] = runtime.RawExtension{Raw: raw}
		}
		out = append(out, runtime.RawExtension{Raw: raw})
	}
	return out, nil
}
