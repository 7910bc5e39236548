package adopt

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func obj(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestClean(t *testing.T) {
	g := NewWithT(t)
	svc := Clean(obj(t, `{apiVersion: v1, kind: Service, metadata: {name: web, namespace: shop, uid: u1, resourceVersion: "7", generation: 2,
	  creationTimestamp: "2026-01-01T00:00:00Z", managedFields: [{manager: kubectl}], annotations: {deployment.kubernetes.io/revision: "3", team: a}},
	  spec: {clusterIP: 10.0.0.7, clusterIPs: [10.0.0.7], ports: [{port: 80}]}, status: {loadBalancer: {}}}`))
	g.Expect(svc.Object).To(Equal(obj(t, `{apiVersion: v1, kind: Service, metadata: {name: web, namespace: shop, annotations: {team: a}}, spec: {ports: [{port: 80}]}}`).Object))
	pvc := Clean(obj(t, `{apiVersion: v1, kind: PersistentVolumeClaim, metadata: {name: data, annotations: {pv.kubernetes.io/bind-completed: "yes"}}, spec: {volumeName: pv-1, resources: {requests: {storage: 1Gi}}}}`))
	g.Expect(pvc.Object).To(Equal(obj(t, `{apiVersion: v1, kind: PersistentVolumeClaim, metadata: {name: data}, spec: {resources: {requests: {storage: 1Gi}}}}`).Object))
}

func TestAdoptable(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Adoptable(obj(t, `{apiVersion: apps/v1, kind: Deployment, metadata: {name: web}}`))).To(BeEmpty())
	g.Expect(Adoptable(obj(t, `{apiVersion: apps/v1, kind: ReplicaSet, metadata: {name: web-1, ownerReferences: [{apiVersion: apps/v1, kind: Deployment, name: web, uid: u, controller: true}]}}`))).
		To(ContainSubstring("controlled by Deployment web on the member"))
	g.Expect(Adoptable(obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: kube-root-ca.crt}}`))).NotTo(BeEmpty())
	g.Expect(Adoptable(obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: placed, labels: {work.lodestar.dev/applied-work: x}}}`))).To(Equal("Lodestar already places it"))
}

// The members' copies differ: each difference becomes the other member's
// JSON patch (replace, add, remove), one rule per member, none for alike copies.
func TestDifferencesAsOverrides(t *testing.T) {
	g := NewWithT(t)
	doc := `{apiVersion: apps/v1, kind: Deployment, metadata: {name: web.v2, labels: {a: b}}, spec: {replicas: %s, template: {spec: {containers: [{name: c, image: %s}]}}}}`
	copies := map[string]*unstructured.Unstructured{
		"m1": obj(t, fmt.Sprintf(doc, "1", "nginx:1")),
		"m2": obj(t, fmt.Sprintf(doc, "2", "nginx:1")),
		"m3": obj(t, fmt.Sprintf(doc, "1", "nginx:2")),
		"m4": obj(t, fmt.Sprintf(doc, "1", "nginx:1")),
	}
	unstructured.RemoveNestedField(copies["m4"].Object, "metadata", "labels")
	copies["m4"].SetAnnotations(map[string]string{"x/y": "z"})
	diffs := Differences(copies)
	paths := []string{}
	for _, d := range diffs {
		paths = append(paths, d.Path)
	}
	g.Expect(paths).To(Equal([]string{"/metadata/annotations/x~1y", "/metadata/labels/a", "/spec/replicas", "/spec/template/spec/containers"}))
	rules, err := Overrides(copies["m1"], diffs, "m1", []string{"m1", "m2", "m3", "m4"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rules).To(HaveLen(3))
	g.Expect(rules[0].Name).To(Equal("deployment-web-v2-m2"))
	g.Expect(rules[0].ClusterNames).To(Equal([]string{"m2"}))
	g.Expect(rules[0].JSONPatch).To(HaveLen(1))
	g.Expect(string(rules[0].JSONPatch[0].Op)).To(Equal("replace"))
	g.Expect(rules[2].JSONPatch).To(HaveLen(2), "m4: an annotation added, a label removed")
	g.Expect(string(rules[2].JSONPatch[0].Op)).To(Equal("add"))
	g.Expect(string(rules[2].JSONPatch[1].Op)).To(Equal("remove"))

	g.Expect(Differences(map[string]*unstructured.Unstructured{"m1": copies["m1"], "m4": copies["m1"].DeepCopy()})).To(BeEmpty())
	g.Expect(OverrideName("absent-", "ConfigMap", "a.very.long.name-that-goes-on-and-on-and-on-and-on", "member-with-a-long-name")).To(HaveLen(63))
}

// A Secret whose members' copies hold different values is adopted without
// its values in overrides (whoever reads the Placement would read them); its
// other differences are overrides as for any object.
func TestSecretValuesAreNeverOverrides(t *testing.T) {
	g := NewWithT(t)
	secret := func(token, tier string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"name": "db", "namespace": "shop", "labels": map[string]any{"tier": tier}},
			"data":     map[string]any{"token": token}}}
	}
	copies := map[string]*unstructured.Unstructured{"member-1": secret("b25l", "a"), "member-2": secret("dHdv", "b")}
	kept, left := WithoutSecretValues(copies["member-1"], Differences(copies))
	g.Expect(left).To(ConsistOf("/data/token"))
	rules, err := Overrides(copies["member-1"], kept, "member-1", []string{"member-1", "member-2"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rules).To(HaveLen(1))
	for _, op := range rules[0].JSONPatch {
		g.Expect(string(op.Path)).NotTo(HavePrefix("/data"), "no value of the Secret in an override")
	}

	cm := func(v string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "db", "namespace": "shop"}, "data": map[string]any{"token": v}}}
	}
	cms := map[string]*unstructured.Unstructured{"member-1": cm("one"), "member-2": cm("two")}
	kept, left = WithoutSecretValues(cms["member-1"], Differences(cms))
	g.Expect(left).To(BeEmpty())
	g.Expect(kept).To(HaveLen(1), "a ConfigMap's values are overrides as before")
}
