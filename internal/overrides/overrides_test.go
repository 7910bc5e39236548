package overrides

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/diff"
	"github.com/lodestar-dev/lodestar/internal/scheduling"
)

const deployment = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop","labels":{"app":"web"}},` +
	`"spec":{"replicas":1,"template":{"spec":{"initContainers":[{"name":"init","image":"busybox:1.36"}],` +
	`"containers":[{"name":"app","image":"ghcr.io/shop/web:1.0"},{"name":"proxy","image":"envoyproxy/envoy:v1.30@sha256:abc"}]}}}}`

const configMap = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings","namespace":"shop"},"data":{"color":"blue"}}`

func raw(s string) *placementv1alpha1.JSON { return &placementv1alpha1.JSON{Raw: []byte(s)} }

var (
	eu   = scheduling.Cluster{Name: "eu-1", Labels: map[string]string{"region": "eu", "tier": "edge"}, Properties: map[string]string{"replicas.example.com": "5"}}
	us   = scheduling.Cluster{Name: "us-1", Labels: map[string]string{"region": "us"}}
	bare = scheduling.Cluster{Name: "bare"}
)

func replace(path, value string) placementv1alpha1.JSONPatchOperation {
	return placementv1alpha1.JSONPatchOperation{Op: "replace", Path: placementv1alpha1.OverridePath(path), Value: raw(value)}
}

func TestRender(t *testing.T) {
	cases := []struct {
		name      string
		overrides []placementv1alpha1.Override
		cluster   scheduling.Cluster
		// want are JSON pointers and the JSON values the rendered Deployment has there
		// ("-" for absent); wantCM the same for the ConfigMap ("deleted" when it is
		// left out).
		want, wantCM map[string]string
		wantErr      string
		wantChanges  []Change
	}{{
		name: "conflicting rules: the later one wins",
		overrides: []placementv1alpha1.Override{
			{Name: "three", Targets: []placementv1alpha1.OverrideTarget{{Group: "apps"}}, JSONPatch: []placementv1alpha1.JSONPatchOperation{replace("/spec/replicas", "3")}},
			{Name: "seven", Targets: []placementv1alpha1.OverrideTarget{{Name: "web"}}, JSONPatch: []placementv1alpha1.JSONPatchOperation{replace("/spec/replicas", "7")}},
		},
		cluster: eu,
		want:    map[string]string{"/spec/replicas": "7"},
		wantCM:  map[string]string{"/data/color": `"blue"`},
		wantChanges: []Change{
			{Rule: "three", Object: "Deployment shop/web", Paths: []string{"spec.replicas"}},
			{Rule: "seven", Object: "Deployment shop/web", Paths: []string{"spec.replicas"}},
		},
	}, {
		name: "delete, then a patch: the object stays out",
		overrides: []placementv1alpha1.Override{
			{Name: "drop", Targets: []placementv1alpha1.OverrideTarget{{Kind: "ConfigMap"}}, Delete: true},
			{Name: "color", MergePatch: &placementv1alpha1.MergePatch{Patch: raw(`{"data":{"color":"red"}}`)}},
		},
		cluster: eu,
		wantCM:  map[string]string{"": "deleted"},
	}, {
		name: "a patch, then delete: the object goes",
		overrides: []placementv1alpha1.Override{
			{Name: "color", Targets: []placementv1alpha1.OverrideTarget{{Kind: "ConfigMap"}}, MergePatch: &placementv1alpha1.MergePatch{Patch: raw(`{"data":{"color":"red"}}`)}},
			{Name: "drop", Targets: []placementv1alpha1.OverrideTarget{{Kind: "ConfigMap", Name: "settings"}}, ClusterNames: []string{"eu-1"}, Delete: true},
		},
		cluster: eu,
		wantCM:  map[string]string{"": "deleted"},
		wantChanges: []Change{
			{Rule: "color", Object: "ConfigMap shop/settings", Paths: []string{"data.color"}},
			{Rule: "drop", Object: "ConfigMap shop/settings", Deleted: true},
		},
	}, {
		name: "delete only on the clusters named",
		overrides: []placementv1alpha1.Override{
			{Name: "drop", Targets: []placementv1alpha1.OverrideTarget{{Kind: "ConfigMap"}}, ClusterNames: []string{"eu-1"}, Delete: true},
		},
		cluster: us,
		wantCM:  map[string]string{"/data/color": `"blue"`},
	}, {
		name: "a missing label in an expression fails the rule on that cluster",
		overrides: []placementv1alpha1.Override{{Name: "region", JSONPatch: []placementv1alpha1.JSONPatchOperation{
			{Op: "add", Path: "/metadata/labels/region", ValueExpression: "cluster.labels['region']"}}}},
		cluster: bare,
		wantErr: `rule region, jsonPatch[0] add /metadata/labels/region valueExpression: no such key: region`,
	}, {
		name: "the same expression guarded with has() renders",
		overrides: []placementv1alpha1.Override{{Name: "region", JSONPatch: []placementv1alpha1.JSONPatchOperation{
			{Op: "add", Path: "/metadata/labels/region", ValueExpression: "'region' in cluster.labels ? cluster.labels['region'] : 'none'"}}}},
		cluster: bare,
		want:    map[string]string{"/metadata/labels/region": `"none"`},
	}, {
		name: "add under a missing parent creates it",
		overrides: []placementv1alpha1.Override{{Name: "note", JSONPatch: []placementv1alpha1.JSONPatchOperation{
			{Op: "add", Path: "/metadata/annotations/example.com~1region", ValueExpression: "cluster.labels['region']"},
			{Op: "add", Path: "/spec/template/metadata/labels/tier", Value: raw(`"front"`)}}}},
		cluster: us,
		want:    map[string]string{"/metadata/annotations/example.com~1region": `"us"`, "/spec/template/metadata/labels/tier": `"front"`},
	}, {
		name: "numbers from CEL stay numbers",
		overrides: []placementv1alpha1.Override{{Name: "replicas", Targets: []placementv1alpha1.OverrideTarget{{Group: "apps", Kind: "Deployment"}},
			JSONPatch: []placementv1alpha1.JSONPatchOperation{
				{Op: "replace", Path: "/spec/replicas", ValueExpression: "int(cluster.properties['replicas.example.com']) * 2"},
				{Op: "add", Path: "/spec/minReadySeconds", ValueExpression: "double(cluster.properties['replicas.example.com']) / 2.0"},
			}}},
		cluster: eu,
		want:    map[string]string{"/spec/replicas": "10", "/spec/minReadySeconds": "2.5"},
	}, {
		name: "a merge patch computed by CEL",
		overrides: []placementv1alpha1.Override{{Name: "region", MergePatch: &placementv1alpha1.MergePatch{
			PatchExpression: "{'metadata': {'labels': {'region': cluster.labels['region']}}, 'spec': {'replicas': size(cluster.labels)}}"}}},
		cluster: eu,
		want:    map[string]string{"/metadata/labels/region": `"eu"`, "/metadata/labels/app": `"web"`, "/spec/replicas": "2"},
		wantCM:  map[string]string{"/metadata/labels/region": `"eu"`},
	}, {
		name: "image: registry of every container and init container",
		overrides: []placementv1alpha1.Override{{Name: "mirror", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "edge"}},
			Image: &placementv1alpha1.ImageOverride{Registry: "mirror.edge.example:5000"}}},
		cluster: eu,
		want: map[string]string{
			"/spec/template/spec/initContainers/0/image": `"mirror.edge.example:5000/busybox:1.36"`,
			"/spec/template/spec/containers/0/image":     `"mirror.edge.example:5000/shop/web:1.0"`,
			"/spec/template/spec/containers/1/image":     `"mirror.edge.example:5000/envoyproxy/envoy:v1.30@sha256:abc"`,
		},
		wantCM: map[string]string{"/data/color": `"blue"`},
	}, {
		name:      "image: the tag of named containers only, dropping a digest",
		overrides: []placementv1alpha1.Override{{Name: "pin", Image: &placementv1alpha1.ImageOverride{Containers: []string{"proxy", "init"}, Tag: "v1.31"}}},
		cluster:   eu,
		want: map[string]string{
			"/spec/template/spec/initContainers/0/image": `"busybox:v1.31"`,
			"/spec/template/spec/containers/0/image":     `"ghcr.io/shop/web:1.0"`,
			"/spec/template/spec/containers/1/image":     `"envoyproxy/envoy:v1.31"`,
		},
	}, {
		name: "image override on a cluster the selector does not match changes nothing",
		overrides: []placementv1alpha1.Override{{Name: "mirror", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "edge"}},
			Image: &placementv1alpha1.ImageOverride{Registry: "mirror.edge.example"}}},
		cluster: us,
		want:    map[string]string{"/spec/template/spec/containers/0/image": `"ghcr.io/shop/web:1.0"`},
	}, {
		name:      "remove: a missing path is no error",
		overrides: []placementv1alpha1.Override{{Name: "strip", Remove: []placementv1alpha1.OverridePath{"/spec/replicas", "/spec/nothing/here", "/metadata/labels/app"}}},
		cluster:   eu,
		want:      map[string]string{"/spec/replicas": "-", "/metadata/labels/app": "-"},
	}, {
		name: "replace of a path that is not there fails, naming the operation and object",
		overrides: []placementv1alpha1.Override{{Name: "typo", Targets: []placementv1alpha1.OverrideTarget{{Kind: "Deployment", Group: "apps"}},
			JSONPatch: []placementv1alpha1.JSONPatchOperation{replace("/spec/replica", "3")}}},
		cluster: eu,
		wantErr: `rule typo, jsonPatch[0] replace /spec/replica, on Deployment shop/web: `,
	}, {
		name: "a failing test operation fails the rule",
		overrides: []placementv1alpha1.Override{{Name: "guard", Targets: []placementv1alpha1.OverrideTarget{{Name: "web"}},
			JSONPatch: []placementv1alpha1.JSONPatchOperation{{Op: "test", Path: "/spec/replicas", Value: raw("2")}, replace("/spec/replicas", "4")}}},
		cluster: eu,
		wantErr: `rule guard, jsonPatch[0] test /spec/replicas, on Deployment shop/web: `,
	}, {
		name: "a result that no longer decodes is refused",
		overrides: []placementv1alpha1.Override{{Name: "labels", JSONPatch: []placementv1alpha1.JSONPatchOperation{replace("/metadata/labels", `"web"`)},
			Targets: []placementv1alpha1.OverrideTarget{{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}},
		cluster: eu,
		wantErr: `rule labels, result, on Deployment shop/web: the object no longer decodes`,
	}, {
		name: "copy the name into a label",
		overrides: []placementv1alpha1.Override{{Name: "copy", Targets: []placementv1alpha1.OverrideTarget{{Kind: "Deployment", Group: "apps"}},
			JSONPatch: []placementv1alpha1.JSONPatchOperation{{Op: "copy", From: "/metadata/name", Path: "/metadata/labels/name"}}}},
		cluster: eu,
		want:    map[string]string{"/metadata/labels/name": `"web"`, "/metadata/name": `"web"`},
		wantCM:  map[string]string{"/metadata/labels": "-"},
	}, {
		name: "a cluster expression selects the cluster",
		overrides: []placementv1alpha1.Override{{Name: "big", ClusterExpression: "int(cluster.properties['replicas.example.com']) > 3",
			JSONPatch: []placementv1alpha1.JSONPatchOperation{replace("/spec/replicas", "9")}, Targets: []placementv1alpha1.OverrideTarget{{Kind: "Deployment", Group: "apps"}}}},
		cluster: eu,
		want:    map[string]string{"/spec/replicas": "9"},
	}, {
		name: "a cluster expression that fails on the cluster fails the rule",
		overrides: []placementv1alpha1.Override{{Name: "big", ClusterExpression: "int(cluster.properties['replicas.example.com']) > 3",
			JSONPatch: []placementv1alpha1.JSONPatchOperation{replace("/spec/replicas", "9")}}},
		cluster: us,
		wantErr: `rule big, clusterExpression: no such key`,
	}, {
		name: "a merge patch expression may not rename the object",
		overrides: []placementv1alpha1.Override{{Name: "rename", MergePatch: &placementv1alpha1.MergePatch{
			PatchExpression: "{'metadata': {'name': cluster.name}}"}}},
		cluster: eu,
		wantErr: `rule rename, mergePatch patchExpression: /metadata/name: an override may not change`,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			set, err := Compile(tc.overrides)
			g.Expect(err).NotTo(HaveOccurred())
			res, err := set.Render([]runtime.RawExtension{{Raw: []byte(deployment)}, {Raw: []byte(configMap)}}, tc.cluster)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				var e *Error
				g.Expect(err).To(BeAssignableToTypeOf(e))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			objs := map[string]map[string]any{}
			for _, m := range res.Manifests {
				var o map[string]any
				g.Expect(json.Unmarshal(m.Raw, &o)).To(Succeed())
				objs[o["kind"].(string)] = o
			}
			expectAt(g, objs["Deployment"], tc.want)
			if tc.wantCM[""] == "deleted" {
				g.Expect(objs).NotTo(HaveKey("ConfigMap"))
			} else {
				expectAt(g, objs["ConfigMap"], tc.wantCM)
			}
			if tc.wantChanges != nil {
				g.Expect(res.Changes).To(Equal(tc.wantChanges))
			}
		})
	}
}

func expectAt(g Gomega, obj map[string]any, want map[string]string) {
	g.Expect(obj).NotTo(BeNil())
	for p, v := range want {
		got, ok := lookup(obj, p)
		if v == "-" {
			g.Expect(ok).To(BeFalse(), "%s is still there", p)
			continue
		}
		g.Expect(ok).To(BeTrue(), "%s is missing", p)
		b, err := json.Marshal(got)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(b)).To(Equal(v), p)
	}
}

func lookup(obj map[string]any, pointer string) (any, bool) {
	p, err := diff.ParsePointer(pointer)
	if err != nil {
		return nil, false
	}
	return p.Get(obj)
}

func TestRenderWithoutOverridesChangesNothing(t *testing.T) {
	g := NewWithT(t)
	set, err := Compile(nil)
	g.Expect(err).NotTo(HaveOccurred())
	in := []runtime.RawExtension{{Raw: []byte(deployment)}}
	res, err := set.Render(in, eu)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Manifests).To(Equal(in))
	g.Expect(res.Changes).To(BeEmpty())
}

func TestRenderedObjectsUseSortedKeys(t *testing.T) {
	g := NewWithT(t)
	set, err := Compile([]placementv1alpha1.Override{{Name: "n", JSONPatch: []placementv1alpha1.JSONPatchOperation{
		{Op: "add", Path: "/metadata/annotations/a", Value: raw(`"b"`)}}}})
	g.Expect(err).NotTo(HaveOccurred())
	res, err := set.Render([]runtime.RawExtension{{Raw: []byte(configMap)}}, eu)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(res.Manifests[0].Raw)).To(Equal(
		`{"apiVersion":"v1","data":{"color":"blue"},"kind":"ConfigMap","metadata":{"annotations":{"a":"b"},"name":"settings","namespace":"shop"}}`))
}

func TestBindKeys(t *testing.T) {
	g := NewWithT(t)
	set, err := Compile([]placementv1alpha1.Override{
		{Name: "edge", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "edge"}}, Image: &placementv1alpha1.ImageOverride{Registry: "m.example"}},
		{Name: "region", JSONPatch: []placementv1alpha1.JSONPatchOperation{{Op: "add", Path: "/metadata/labels/region", ValueExpression: "cluster.labels['region']"}},
			ClusterExpression: "'region' in cluster.labels"},
	})
	g.Expect(err).NotTo(HaveOccurred())
	key := func(c scheduling.Cluster) string {
		b, err := set.Bind(c)
		g.Expect(err).NotTo(HaveOccurred())
		return b.Key()
	}
	eu2 := scheduling.Cluster{Name: "eu-2", Labels: map[string]string{"region": "eu", "tier": "edge", "other": "x"}}
	g.Expect(key(bare)).To(BeEmpty(), "no rule applies")
	g.Expect(key(eu)).To(Equal(key(eu2)), "the same rules with the same values render alike")
	g.Expect(key(eu)).NotTo(Equal(key(us)))
	g.Expect(key(us)).NotTo(BeEmpty())
}

func TestCompileRefuses(t *testing.T) {
	cases := map[string]struct {
		o    placementv1alpha1.Override
		want string
	}{
		"an expression that does not compile": {
			placementv1alpha1.Override{Name: "bad", JSONPatch: []placementv1alpha1.JSONPatchOperation{{Op: "add", Path: "/a", ValueExpression: "cluster.lables['x']"}}},
			`spec.overrides[0] (bad): jsonPatch[0]: valueExpression: `,
		},
		"a cluster expression that does not compile": {
			placementv1alpha1.Override{Name: "bad", ClusterExpression: "cluster.name ==", Delete: true},
			`spec.overrides[0] (bad): clusterExpression: `,
		},
		"value and valueExpression": {
			placementv1alpha1.Override{Name: "both", JSONPatch: []placementv1alpha1.JSONPatchOperation{{Op: "add", Path: "/a", Value: raw("1"), ValueExpression: "1"}}},
			"add takes exactly one of value and valueExpression",
		},
		"neither": {
			placementv1alpha1.Override{Name: "neither", JSONPatch: []placementv1alpha1.JSONPatchOperation{{Op: "replace", Path: "/a"}}},
			"replace takes exactly one of value and valueExpression",
		},
		"a value on remove": {
			placementv1alpha1.Override{Name: "rm", JSONPatch: []placementv1alpha1.JSONPatchOperation{{Op: "remove", Path: "/a", Value: raw("1")}}},
			"remove takes neither value nor valueExpression",
		},
		"a forbidden path": {
			placementv1alpha1.Override{Name: "kind", JSONPatch: []placementv1alpha1.JSONPatchOperation{replace("/kind", `"Secret"`)}},
			"/kind: an override may not change",
		},
		"metadata other than labels and annotations": {
			placementv1alpha1.Override{Name: "ns", Remove: []placementv1alpha1.OverridePath{"/metadata/namespace"}},
			"/metadata/namespace: an override may not change",
		},
		"not a pointer": {
			placementv1alpha1.Override{Name: "ptr", Remove: []placementv1alpha1.OverridePath{"spec/replicas"}},
			`"spec/replicas" is not a JSON pointer`,
		},
		"a literal merge patch that renames": {
			placementv1alpha1.Override{Name: "merge", MergePatch: &placementv1alpha1.MergePatch{Patch: raw(`{"metadata":{"name":"x"}}`)}},
			"/metadata/name: an override may not change",
		},
		"a merge patch that sets status": {
			placementv1alpha1.Override{Name: "merge", MergePatch: &placementv1alpha1.MergePatch{Patch: raw(`{"status":{}}`)}},
			"/status: an override may not change",
		},
		"a merge patch that is not an object": {
			placementv1alpha1.Override{Name: "merge", MergePatch: &placementv1alpha1.MergePatch{Patch: raw(`[1]`)}},
			"a merge patch is an object",
		},
		"a merge patch with both": {
			placementv1alpha1.Override{Name: "merge", MergePatch: &placementv1alpha1.MergePatch{Patch: raw(`{}`), PatchExpression: "{}"}},
			"exactly one of patch and patchExpression",
		},
		"two actions": {
			placementv1alpha1.Override{Name: "two", Delete: true, Remove: []placementv1alpha1.OverridePath{"/a"}},
			"exactly one action",
		},
		"no action": {
			placementv1alpha1.Override{Name: "none"},
			"exactly one action",
		},
		"an empty image override": {
			placementv1alpha1.Override{Name: "img", Image: &placementv1alpha1.ImageOverride{}},
			"at least one of registry, repository and tag",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := Compile([]placementv1alpha1.Override{tc.o})
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}

func TestReplaceImage(t *testing.T) {
	cases := []struct {
		image string
		o     placementv1alpha1.ImageOverride
		want  string
	}{
		{"nginx", placementv1alpha1.ImageOverride{Registry: "mirror.example"}, "mirror.example/nginx"},
		{"nginx:1.27", placementv1alpha1.ImageOverride{Registry: "mirror.example"}, "mirror.example/nginx:1.27"},
		{"docker.io/library/nginx:1.27", placementv1alpha1.ImageOverride{Registry: "mirror.example:5000"}, "mirror.example:5000/library/nginx:1.27"},
		{"localhost/app", placementv1alpha1.ImageOverride{Registry: "r.example"}, "r.example/app"},
		{"localhost:5000/team/app:v1", placementv1alpha1.ImageOverride{Tag: "v2"}, "localhost:5000/team/app:v2"},
		{"team/app:v1", placementv1alpha1.ImageOverride{Repository: "other/app"}, "other/app:v1"},
		{"ghcr.io/team/app@sha256:abc", placementv1alpha1.ImageOverride{Registry: "m.example"}, "m.example/team/app@sha256:abc"},
		{"ghcr.io/team/app:v1@sha256:abc", placementv1alpha1.ImageOverride{Tag: "v2"}, "ghcr.io/team/app:v2"},
		{"app", placementv1alpha1.ImageOverride{Registry: "r.example", Repository: "x/y", Tag: "t"}, "r.example/x/y:t"},
	}
	for _, tc := range cases {
		t.Run(tc.image, func(t *testing.T) {
			NewWithT(t).Expect(ReplaceImage(tc.image, &tc.o)).To(Equal(tc.want))
		})
	}
}

func TestHash(t *testing.T) {
	g := NewWithT(t)
	h, err := Hash("abc", nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(h).To(Equal("abc"), "a Placement without overrides keeps its hash")
	a, err := Hash("abc", []placementv1alpha1.Override{{Name: "a", Delete: true}})
	g.Expect(err).NotTo(HaveOccurred())
	b, err := Hash("abc", []placementv1alpha1.Override{{Name: "b", Delete: true}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a).NotTo(Equal("abc"))
	g.Expect(a).NotTo(Equal(b))
}
