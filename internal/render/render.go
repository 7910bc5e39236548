// Package render turns hub objects into the manifests of a Work: it removes what
// belongs to the hub copy of an object and hashes the result into a revision.
package render

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

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

// MaxManifestBytes bounds the rendered manifests of one Work. etcd refuses objects
// over 1.5 MiB, and the agent adds the Work's status (up to 64 KiB of feedback
// and the conditions of every manifest): a Work stays well below.
const MaxManifestBytes = 768 << 10

// TooLargeError says that the rendered manifests exceed MaxManifestBytes.
type TooLargeError struct {
	Size    int
	Largest []string
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the selected objects render to %d KiB, more than a Work may carry (%d KiB); the largest: %s",
		e.Size>>10, MaxManifestBytes>>10, strings.Join(e.Largest, ", "))
}

// hubOnlyKinds are kinds whose objects belong to the cluster they are in.
var hubOnlyKinds = map[schema.GroupKind]string{
	{Kind: "Event"}:                                    "Events are the hub's own records",
	{Group: "events.k8s.io", Kind: "Event"}:            "Events are the hub's own records",
	{Kind: "Pod"}:                                      "Pods run where they are created; place a Deployment, StatefulSet or Job instead",
	{Group: "coordination.k8s.io", Kind: "Lease"}:      "Leases belong to the controllers of the cluster they are in",
	{Group: "apps", Kind: "ControllerRevision"}:        "ControllerRevisions belong to their controller on the hub",
	{Group: "discovery.k8s.io", Kind: "EndpointSlice"}: "EndpointSlices are made by each cluster for its own Services",
}

// HubOnlyKind says why objects of kind gk are never placed, or "" when they may be.
func HubOnlyKind(gk schema.GroupKind) string {
	return hubOnlyKinds[gk]
}

// notByLabels are the API groups whose kinds a selector without kind never
// selects: Lodestar's own objects (Placements, their revisions, approvals and
// bindings; PlacementDecisions, Works, ClusterProfiles), the hub's records of
// its controllers (Leases, Events) and metrics.
var notByLabels = []string{"placement.lodestar.dev", "multicluster.x-k8s.io", "work.lodestar.dev", "coordination.k8s.io", "events.k8s.io", "metrics.k8s.io"}

// SelectableByLabels tells whether a selector without kind (labels alone) may
// select objects of kind gk: not the kinds that are never placed (HubOnlyKind),
// not Endpoints (each cluster makes its own for its Services), not Lodestar's own
// kinds, and not Secrets, which are placed only by a selector that names their
// kind.
func SelectableByLabels(gk schema.GroupKind) bool {
	switch {
	case HubOnlyKind(gk) != "", slices.Contains(notByLabels, gk.Group):
		return false
	case gk.Group == "" && (gk.Kind == "Secret" || gk.Kind == "Endpoints"):
		return false
	}
	return true
}

// HubOwned says why obj belongs to the hub and is never placed, or "" when it may
// be: an object another object controls (a Deployment's ReplicaSets, say), the
// kube-root-ca.crt ConfigMap and the default ServiceAccount every namespace gets,
// and ServiceAccount token Secrets.
func HubOwned(obj *unstructured.Unstructured) string {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller {
			return fmt.Sprintf("controlled by %s %s on the hub", ref.Kind, ref.Name)
		}
	}
	switch gk := obj.GroupVersionKind().GroupKind(); {
	case gk == schema.GroupKind{Kind: "ConfigMap"} && obj.GetName() == "kube-root-ca.crt":
		return "the hub's own CA bundle, which every namespace gets"
	case gk == schema.GroupKind{Kind: "ServiceAccount"} && obj.GetName() == "default":
		return "the ServiceAccount every namespace gets"
	case gk == schema.GroupKind{Kind: "Secret"}:
		if t, _, _ := unstructured.NestedString(obj.Object, "type"); t == "kubernetes.io/service-account-token" {
			return "a ServiceAccount token of the hub"
		}
	}
	return ""
}

// HubGenerationAnnotation on a placed object names the generation of the hub
// object it was rendered from; set when the Placement reflects status
// (spec.reporting.reflection: Aggregate), so that the hub can tell which clusters run its
// current spec.
const HubGenerationAnnotation = "placement.lodestar.dev/hub-generation"

// Manifests renders objs in a deterministic order (group, kind, namespace, name) and
// returns them as raw manifests with a revision: a hash of their content. More
// than MaxManifestBytes is a *TooLargeError. With hubGeneration, each manifest
// carries HubGenerationAnnotation.
func Manifests(objs []*unstructured.Unstructured, hubGeneration bool) ([]runtime.RawExtension, string, error) {
	rendered := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		r := Object(o)
		if hubGeneration {
			ann := r.GetAnnotations()
			if ann == nil {
				ann = map[string]string{}
			}
			ann[HubGenerationAnnotation] = strconv.FormatInt(o.GetGeneration(), 10)
			r.SetAnnotations(ann)
		}
		rendered = append(rendered, r)
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
	if len(all) > MaxManifestBytes {
		return nil, "", tooLarge(rendered, raws, len(all))
	}
	return raws, names.Hash(string(all))[:16], nil
}

// tooLarge names the three largest objects.
func tooLarge(objs []*unstructured.Unstructured, raws []runtime.RawExtension, size int) error {
	idx := make([]int, len(objs))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return len(raws[idx[a]].Raw) > len(raws[idx[b]].Raw) })
	e := &TooLargeError{Size: size}
	for _, i := range idx[:min(3, len(idx))] {
		o := objs[i]
		e.Largest = append(e.Largest, fmt.Sprintf("%s %s/%s (%d KiB)", o.GetKind(), o.GetNamespace(), o.GetName(), len(raws[i].Raw)>>10))
	}
	return e
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
