// Package render turns hub objects into the manifests of a Work: it removes what
// belongs to the hub copy of an object and hashes the result into a revision.
package render

import (
	"encoding/json"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lodestar-dev/lodestar/internal/names"
)

// LastAppliedAnnotation is kubectl's record of the last client-side apply; it
// describes the hub copy and is not carried to members.
const LastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// hubMetadata are the metadata fields the API server sets on the hub copy.
var hubMetadata = []string{
	"uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
	"deletionGracePeriodSeconds", "managedFields", "ownerReferences", "finalizers", "selfLink",
	"generateName",
}

// Object returns the manifest for obj: a copy without status and without the
// metadata that belongs to the hub.
func Object(obj *unstructured.Unstructured) *unstructured.Unstructured {
	out := obj.DeepCopy()
	delete(out.Object, "status")
	md, ok := out.Object["metadata"].(map[string]any)
	if !ok {
		return out
	}
	for _, f := range hubMetadata {
		delete(md, f)
	}
	if ann, ok := md["annotations"].(map[string]any); ok {
		delete(ann, LastAppliedAnnotation)
		if len(ann) == 0 {
			delete(md, "annotations")
		}
	}
	switch out.GroupVersionKind().GroupKind() {
	case schema.GroupKind{Kind: "Service"}:
		stripServiceAllocations(out)
	case schema.GroupKind{Group: "batch", Kind: "Job"}:
		stripJobSelector(out)
	}
	return out
}

// jobLabels are the labels the API server adds to a Job's pod template, bound to
// the Job's UID on the hub.
var jobLabels = []string{"controller-uid", "batch.kubernetes.io/controller-uid", "job-name", "batch.kubernetes.io/job-name"}

// stripJobSelector removes the selector and pod-template labels the hub's API
// server generated for a Job (unless the user chose the selector): each member
// generates its own, for its own copy's UID.
func stripJobSelector(job *unstructured.Unstructured) {
	if manual, _, _ := unstructured.NestedBool(job.Object, "spec", "manualSelector"); manual {
		return
	}
	unstructured.RemoveNestedField(job.Object, "spec", "selector")
	labels, found, _ := unstructured.NestedStringMap(job.Object, "spec", "template", "metadata", "labels")
	if !found {
		return
	}
	for _, l := range jobLabels {
		delete(labels, l)
	}
	if len(labels) == 0 {
		unstructured.RemoveNestedField(job.Object, "spec", "template", "metadata", "labels")
		return
	}
	_ = unstructured.SetNestedStringMap(job.Object, labels, "spec", "template", "metadata", "labels")
}

// stripServiceAllocations removes what the hub's API server allocated to a Service
// (cluster IPs, node ports, the health-check node port): each member allocates its
// own. A headless Service keeps clusterIP None.
func stripServiceAllocations(svc *unstructured.Unstructured) {
	spec, ok := svc.Object["spec"].(map[string]any)
	if !ok {
		return
	}
	if ip, _ := spec["clusterIP"].(string); ip != "None" {
		delete(spec, "clusterIP")
		delete(spec, "clusterIPs")
	}
	delete(spec, "healthCheckNodePort")
	ports, _ := spec["ports"].([]any)
	for _, p := range ports {
		if port, ok := p.(map[string]any); ok {
			delete(port, "nodePort")
		}
	}
}

// Manifests renders objs in a deterministic order (group, kind, namespace, name) and
// returns them as raw manifests with a revision: a hash of their content.
func Manifests(objs []*unstructured.Unstructured) ([]runtime.RawExtension, string, error) {
	rendered := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		rendered = append(rendered, Object(o))
	}
	sort.Slice(rendered, func(i, j int) bool { return less(rendered[i], rendered[j]) })

	raws := make([]runtime.RawExtension, 0, len(rendered))
	var all []byte
	for _, o := range rendered {
		b, err := json.Marshal(o.Object)
		if err != nil {
			return nil, "", fmt.Errorf("encoding %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
		raws = append(raws, runtime.RawExtension{Raw: b})
		all = append(append(all, b...), '\n')
	}
	return raws, names.Hash(string(all))[:16], nil
}

func less(a, b *unstructured.Unstructured) bool {
	ka := [4]string{a.GroupVersionKind().Group, a.GetKind(), a.GetNamespace(), a.GetName()}
	kb := [4]string{b.GroupVersionKind().Group, b.GetKind(), b.GetNamespace(), b.GetName()}
	for i := range ka {
		if ka[i] != kb[i] {
			return ka[i] < kb[i]
		}
	}
	return false
}
