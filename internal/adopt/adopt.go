// Package adopt turns objects that already run on member clusters into what
// Lodestar places: the hub object (cleaned of status and what belongs to the
// member), the differences between the members' copies as overrides, and a
// Placement pinned to those members that takes the copies over only where
// they do not differ (takeover IfNoDiff), so that nothing restarts. The
// kubectl plugin's adopt command reads the members and writes the result.
package adopt

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/render"
)

// memberAnnotations are annotations a member's controllers write on the
// objects they run: never the hub's.
var memberAnnotations = []string{"deployment.kubernetes.io/revision", "pv.kubernetes.io/bind-completed",
	"pv.kubernetes.io/bound-by-controller", "volume.kubernetes.io/selected-node", "volume.beta.kubernetes.io/storage-provisioner",
	"volume.kubernetes.io/storage-provisioner"}

// Adoptable says why obj is not adopted on its own ("" when it is): what a
// member's controllers make (a Deployment's ReplicaSets, a Job's pods), what
// every namespace has, what Lodestar already places, and the kinds that are
// never placed.
func Adoptable(obj *unstructured.Unstructured) string {
	if why := render.HubOnlyKind(obj.GroupVersionKind().GroupKind()); why != "" {
		return why
	}
	if why := render.HubOwned(obj); why != "" {
		return strings.ReplaceAll(why, "the hub", "the member")
	}
	for k := range obj.GetLabels() {
		if strings.HasPrefix(k, "work.lodestar.dev/") || strings.HasPrefix(k, "placement.lodestar.dev/") {
			return "Lodestar already places it"
		}
	}
	return ""
}

// Clean is the hub object for a member's obj: without status, what the
// member's API server allocated (UID, resource version, a Service's cluster
// IPs, a Job's generated selector), what its controllers annotate, and a
// claim's bound volume.
func Clean(obj *unstructured.Unstructured) *unstructured.Unstructured {
	out := render.Object(obj)
	if ann := out.GetAnnotations(); ann != nil {
		for _, a := range memberAnnotations {
			delete(ann, a)
		}
		out.SetAnnotations(ann)
		if len(ann) == 0 {
			unstructured.RemoveNestedField(out.Object, "metadata", "annotations")
		}
	}
	if out.GroupVersionKind().GroupKind() == (schema.GroupKind{Kind: "PersistentVolumeClaim"}) {
		unstructured.RemoveNestedField(out.Object, "spec", "volumeName")
	}
	return out
}

// Difference is a field whose value differs between members' copies.
type Difference struct {
	// Path is its JSON pointer.
	Path string
	// Values are each member's value (absent: not set there).
	Values map[string]any
}

// Differences compares the cleaned copies of one object on several members,
// leaf by leaf (lists as wholes).
func Differences(copies map[string]*unstructured.Unstructured) []Difference {
	clusters := slices.Sorted(maps.Keys(copies))
	values := map[string]map[string]any{}
	for _, c := range clusters {
		flatten("", copies[c].Object, func(path string, v any) {
			if values[path] == nil {
				values[path] = map[string]any{}
			}
			values[path][c] = v
		})
	}
	var out []Difference
	for _, path := range slices.Sorted(maps.Keys(values)) {
		vs := values[path]
		same := len(vs) == len(clusters)
		for _, c := range clusters[1:] {
			if !same {
				break
			}
			same = reflect.DeepEqual(vs[clusters[0]], vs[c])
		}
		if !same {
			out = append(out, Difference{Path: path, Values: vs})
		}
	}
	return out
}

// flatten calls leaf for each leaf of v (maps are walked, lists are leaves).
func flatten(prefix string, v any, leaf func(string, any)) {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		leaf(prefix, v)
		return
	}
	for k, sub := range m {
		flatten(prefix+"/"+strings.NewReplacer("~", "~0", "/", "~1").Replace(k), sub, leaf)
	}
}

// SecretValue tells whether path (a difference's) holds a Secret's value
// in object: such a difference is never written into an override, nor shown,
// since whoever reads the Placement (or the command's output) would read it.
func SecretValue(object *unstructured.Unstructured, path string) bool {
	if object.GroupVersionKind().GroupKind() != (schema.GroupKind{Kind: "Secret"}) {
		return false
	}
	return path == "/data" || path == "/stringData" || strings.HasPrefix(path, "/data/") || strings.HasPrefix(path, "/stringData/")
}

// WithoutSecretValues are diffs less those that hold a Secret's value
// (SecretValue), and the paths of those left out.
func WithoutSecretValues(object *unstructured.Unstructured, diffs []Difference) (kept []Difference, secret []string) {
	for _, d := range diffs {
		if SecretValue(object, d.Path) {
			secret = append(secret, d.Path)
			continue
		}
		kept = append(kept, d)
	}
	return kept, secret
}

// Overrides are the overrides that make the hub object (base's copy) each
// other member's of clusters: one rule per member whose copy differs, each a
// JSON patch of the fields that differ there.
func Overrides(object *unstructured.Unstructured, diffs []Difference, base string, clusters []string) ([]placementv1alpha1.Override, error) {
	byCluster := map[string][]map[string]any{}
	for _, d := range diffs {
		for _, c := range clusters {
			if c == base {
				continue
			}
			v, set := d.Values[c]
			bv, baseSet := d.Values[base]
			switch {
			case set == baseSet && reflect.DeepEqual(v, bv):
				continue
			case !set:
				byCluster[c] = append(byCluster[c], map[string]any{"op": "remove", "path": d.Path})
			case baseSet:
				byCluster[c] = append(byCluster[c], map[string]any{"op": "replace", "path": d.Path, "value": v})
			default:
				byCluster[c] = append(byCluster[c], map[string]any{"op": "add", "path": d.Path, "value": v})
			}
		}
	}
	var out []placementv1alpha1.Override
	for _, c := range slices.Sorted(maps.Keys(byCluster)) {
		raw, err := json.Marshal(byCluster[c])
		if err != nil {
			return nil, err
		}
		var ops []placementv1alpha1.JSONPatchOperation
		if err := json.Unmarshal(raw, &ops); err != nil {
			return nil, fmt.Errorf("the differences on %s as a JSON patch: %w", c, err)
		}
		gvk := object.GroupVersionKind()
		out = append(out, placementv1alpha1.Override{
			Name:         OverrideName("", object.GetKind(), object.GetName(), c),
			ClusterNames: []string{c},
			Targets:      []placementv1alpha1.OverrideTarget{{Group: gvk.Group, Kind: gvk.Kind, Name: object.GetName()}},
			JSONPatch:    ops,
		})
	}
	return out, nil
}

// MaxOverrides is how many overrides a Placement may have.
const MaxOverrides = 32

// OverrideName is an override's name for an object and a cluster, after
// prefix: lower case letters, digits and dashes, at most 63.
func OverrideName(prefix, kind, name, cluster string) string {
	n := []byte(strings.ToLower(prefix + kind + "-" + name + "-" + cluster))
	for i, c := range n {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			n[i] = '-'
		}
	}
	return strings.Trim(string(n[:min(len(n), 63)]), "-")
}

// Placement is a Placement of objects in namespace, pinned to clusters,
// taking over their copies where they do not differ (IfNoDiff).
func Placement(name, namespace string, objects []*unstructured.Unstructured, clusters []string, overrides []placementv1alpha1.Override) *placementv1alpha1.Placement {
	p := &placementv1alpha1.Placement{
		TypeMeta:   metav1.TypeMeta{APIVersion: placementv1alpha1.GroupVersion.String(), Kind: "Placement"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: placementv1alpha1.PlacementSpec{
			Scheduling:    placementv1alpha1.Scheduling{ClusterNames: slices.Sorted(slices.Values(clusters))},
			ApplyStrategy: &lodestarworkv1alpha1.ApplyStrategy{Takeover: lodestarworkv1alpha1.TakeoverIfNoDiff},
			Overrides:     overrides,
		},
	}
	for _, obj := range objects {
		gvk := obj.GroupVersionKind()
		p.Spec.ResourceSelectors = append(p.Spec.ResourceSelectors, placementv1alpha1.ResourceSelector{
			Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Name: obj.GetName()})
	}
	return p
}
