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

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/message"
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

// MaxManifestBytes bounds the rendered manifests of one Work
// (lodestarworkv1alpha1.MaxManifestBytes). A Placement's objects that together
// are larger go to each cluster as several Works (Split); one object larger than
// this cannot be placed.
const MaxManifestBytes = lodestarworkv1alpha1.MaxManifestBytes

// TooLargeError says that rendered objects are each larger than a Work may carry.
type TooLargeError struct {
	// Objects name the objects too large, with their size, the largest first.
	Objects []string
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s rendered larger than a Work may carry (%d KiB); an object must fit in one Work",
		message.List(e.Objects, 3, ", "), MaxManifestBytes>>10)
}

// CheckSizes returns a *TooLargeError naming the manifests larger than a Work may
// carry, or nil.
func CheckSizes(manifests []runtime.RawExtension) error {
	type big struct {
		name string
		size int
	}
	var over []big
	for _, m := range manifests {
		if len(m.Raw)+1 > MaxManifestBytes {
			over = append(over, big{manifestName(m.Raw), len(m.Raw)})
		}
	}
	if len(over) == 0 {
		return nil
	}
	sort.SliceStable(over, func(i, j int) bool { return over[i].size > over[j].size })
	e := &TooLargeError{}
	for _, b := range over {
		e.Objects = append(e.Objects, fmt.Sprintf("%s (%d KiB)", b.name, b.size>>10))
	}
	return e
}

// manifestName is "Kind ns/name" (or "Kind name") of a manifest.
func manifestName(raw []byte) string {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		return "an object that cannot be decoded"
	}
	if u.GetNamespace() == "" {
		return u.GetKind() + " " + u.GetName()
	}
	return u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
}

// Split divides the manifests of one cluster into the parts of its Works: one
// part, unchanged, when they fit in one Work; otherwise Namespaces first, then
// CustomResourceDefinitions, then the rest in their order, each part filled up
// to MaxManifestBytes before the next begins, so that the objects others depend
// on come in the first parts. Every manifest must fit in a Work (CheckSizes).
func Split(manifests []runtime.RawExtension) [][]runtime.RawExtension {
	if size(manifests) <= MaxManifestBytes {
		return [][]runtime.RawExtension{manifests}
	}
	ordered := slices.Clone(manifests)
	sort.SliceStable(ordered, func(i, j int) bool { return priority(ordered[i].Raw) < priority(ordered[j].Raw) })
	var parts [][]runtime.RawExtension
	var cur []runtime.RawExtension
	used := 0
	for _, m := range ordered {
		if n := len(m.Raw) + 1; used+n > MaxManifestBytes && len(cur) > 0 {
			parts, cur, used = append(parts, cur), nil, 0
		}
		cur = append(cur, m)
		used += len(m.Raw) + 1
	}
	return append(parts, cur)
}

// size is what manifests take in a Work, as MaxManifestBytes counts.
func size(manifests []runtime.RawExtension) int {
	n := 0
	for _, m := range manifests {
		n += len(m.Raw) + 1
	}
	return n
}

// priority orders Namespaces (0) and CustomResourceDefinitions (1) before
// everything else (2), as the agent applies them.
func priority(raw []byte) int {
	switch KindOf(raw) {
	case schema.GroupKind{Kind: "Namespace"}:
		return 0
	case schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:
		return 1
	}
	return 2
}

// Kinds are the kinds of manifests, each once, sorted.
func Kinds(manifests []runtime.RawExtension) []schema.GroupKind {
	seen := map[schema.GroupKind]bool{}
	out := []schema.GroupKind{}
	for _, m := range manifests {
		if gk := KindOf(m.Raw); !seen[gk] {
			seen[gk] = true
			out = append(out, gk)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// KindOf is the group and kind of a manifest, read from its apiVersion and kind
// alone; empty when they cannot be read.
func KindOf(raw []byte) schema.GroupKind {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if json.Unmarshal(raw, &head) != nil {
		return schema.GroupKind{}
	}
	gv, err := schema.ParseGroupVersion(head.APIVersion)
	if err != nil {
		return schema.GroupKind{}
	}
	return schema.GroupKind{Group: gv.Group, Kind: head.Kind}
}

// hubOnlyKinds are kinds whose objects belong to the cluster they are in.
var hubOnlyKinds = map[schema.GroupKind]string{
	{Kind: "Event"}:                                         "Events are the hub's own records",
	{Group: "events.k8s.io", Kind: "Event"}:                 "Events are the hub's own records",
	{Kind: "Pod"}:                                           "Pods run where they are created; place a Deployment, StatefulSet or Job instead",
	{Group: "coordination.k8s.io", Kind: "Lease"}:           "Leases belong to the controllers of the cluster they are in",
	{Group: "apps", Kind: "ControllerRevision"}:             "ControllerRevisions belong to their controller on the hub",
	{Group: "discovery.k8s.io", Kind: "EndpointSlice"}:      "EndpointSlices are made by each cluster for its own Services",
	{Group: "multicluster.x-k8s.io", Kind: "ServiceImport"}: "ServiceImports are made by the Multicluster Services controller from ServiceExports; place a ServiceExport with the Service instead",
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
// kinds, and not Secrets or PersistentVolumeClaims, which are placed only by a
// selector that names their kind: a claim stands for data, and the hub's
// StatefulSet controller makes claims with the workload's labels.
func SelectableByLabels(gk schema.GroupKind) bool {
	switch {
	case HubOnlyKind(gk) != "", slices.Contains(notByLabels, gk.Group):
		return false
	case gk.Group == "" && (gk.Kind == "Secret" || gk.Kind == "Endpoints" || gk.Kind == "PersistentVolumeClaim"):
		return false
	}
	return true
}

// StatefulSetClaim names the StatefulSet of sets whose volumeClaimTemplates
// generate a claim called claim (<template>-<statefulset>-<ordinal>), or "":
// such a claim is the hub's StatefulSet controller's, and each member's makes
// its own.
func StatefulSetClaim(claim string, sets []unstructured.Unstructured) string {
	for i := range sets {
		templates, _, _ := unstructured.NestedSlice(sets[i].Object, "spec", "volumeClaimTemplates")
		for _, t := range templates {
			tm, _ := t.(map[string]any)
			name, _, _ := unstructured.NestedString(tm, "metadata", "name")
			prefix := name + "-" + sets[i].GetName() + "-"
			if ordinal, ok := strings.CutPrefix(claim, prefix); ok && name != "" && ordinal != "" && strings.Trim(ordinal, "0123456789") == "" {
				return sets[i].GetName()
			}
		}
	}
	return ""
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

// Manifests renders objs in a deterministic order (group, kind, namespace, name) and
// returns them as raw manifests with a revision: a hash of their content. An
// object larger than a Work may carry is a *TooLargeError. With hubGeneration,
// each manifest carries placementv1alpha1.HubGenerationAnnotation (set when the Placement reflects status).
func Manifests(objs []*unstructured.Unstructured, hubGeneration bool) ([]runtime.RawExtension, string, error) {
	rendered := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		r := Object(o)
		if hubGeneration {
			ann := r.GetAnnotations()
			if ann == nil {
				ann = map[string]string{}
			}
			ann[placementv1alpha1.HubGenerationAnnotation] = strconv.FormatInt(o.GetGeneration(), 10)
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
	if err := CheckSizes(raws); err != nil {
		return nil, "", err
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
