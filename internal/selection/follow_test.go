package selection

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// objectsHub is a hub holding objs, listed by kind and namespace.
func objectsHub(t *testing.T, docs ...string) Source {
	t.Helper()
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Version: "v1"}, {Group: "apps", Version: "v1"}})
	var objs []unstructured.Unstructured
	for _, doc := range docs {
		obj := unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatal(err)
		}
		obj.SetNamespace("shop")
		mapper.Add(obj.GroupVersionKind(), meta.RESTScopeNamespace)
		objs = append(objs, obj)
	}
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaim"}, meta.RESTScopeNamespace)
	return Source{Mapper: mapper, List: func(_ context.Context, gvk schema.GroupVersionKind, ns string, sel labels.Selector) ([]unstructured.Unstructured, error) {
		var out []unstructured.Unstructured
		for _, o := range objs {
			if o.GroupVersionKind() == gvk && o.GetNamespace() == ns && sel.Matches(labels.Set(o.GetLabels())) {
				out = append(out, *o.DeepCopy())
			}
		}
		return out, nil
	}}
}

func TestFollowDependencies(t *testing.T) {
	g := NewWithT(t)
	src := objectsHub(t,
		`{apiVersion: apps/v1, kind: Deployment, metadata: {name: web}, spec: {template: {spec: {serviceAccountName: web,
		  volumes: [{name: a, configMap: {name: settings}}, {name: b, persistentVolumeClaim: {claimName: data}}],
		  containers: [{name: c, image: i, envFrom: [{secretRef: {name: db}}, {secretRef: {name: admin}}, {configMapRef: {name: kube-root-ca.crt}}]}]}}}}`,
		`{apiVersion: v1, kind: ConfigMap, metadata: {name: settings}}`,
		`{apiVersion: v1, kind: ConfigMap, metadata: {name: unrelated}}`,
		`{apiVersion: v1, kind: Secret, metadata: {name: db}}`,
		`{apiVersion: v1, kind: Secret, metadata: {name: admin}}`,
		`{apiVersion: v1, kind: Secret, metadata: {name: registry}}`,
		`{apiVersion: v1, kind: ServiceAccount, metadata: {name: web}, imagePullSecrets: [{name: registry}]}`,
	)
	p := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec: placementv1alpha1.PlacementSpec{ResourceSelectors: []placementv1alpha1.ResourceSelector{{Group: "apps", Version: "v1", Kind: "Deployment"}}}}

	// Ignore, as by default: only what is selected.
	sel, err := SelectObjects(t.Context(), p, src)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kindsOf(sel.Objects)).To(ConsistOf("Deployment.apps"))
	g.Expect(sel.Followed).To(BeEmpty())

	// Follow: the ConfigMap, the Secrets, the ServiceAccount and its pull
	// Secret, not the claim that is not there, nor the CA bundle.
	p.Spec.Dependencies = placementv1alpha1.DependenciesFollow
	sel, err = SelectObjects(t.Context(), p, src)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sel.Followed).To(ConsistOf("ConfigMap/settings", "Secret/db", "Secret/admin", "ServiceAccount/web", "Secret/registry"))
	g.Expect(kindsOf(sel.Objects)).To(ConsistOf("Deployment.apps", "ConfigMap", "Secret", "Secret", "ServiceAccount", "Secret"))
	g.Expect(sel.NotFollowed).To(ConsistOf("PersistentVolumeClaim/data (referenced by Deployment web): not found on the hub"))
	g.Expect(sel.FollowedMessage()).To(HavePrefix("5 referenced objects followed: "))

	// A Secret the writer may not read stays on the hub, said why.
	src.MayFollowSecret = func(_ context.Context, _ *placementv1alpha1.Placement, ns, name string) (string, error) {
		if name == "admin" {
			return "alice may not get it on the hub", nil
		}
		return "", nil
	}
	sel, err = SelectObjects(t.Context(), p, src)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sel.Followed).NotTo(ContainElement("Secret/admin"))
	g.Expect(sel.NotFollowed).To(ContainElement("Secret/admin (referenced by Deployment web): alice may not get it on the hub"))

	// A kind the namespace forbids is not followed either.
	src.Forbidden = func(gk schema.GroupKind) bool { return gk.Kind == "ServiceAccount" }
	sel, err = SelectObjects(t.Context(), p, src)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sel.Followed).NotTo(ContainElements("ServiceAccount/web", "Secret/registry"))
	g.Expect(sel.NotFollowed).To(ContainElement(HavePrefix("ServiceAccount/web (referenced by Deployment web): the namespace's platform admin forbids placing ServiceAccount")))

	// An error asking about a Secret is the selection's.
	src.MayFollowSecret = func(context.Context, *placementv1alpha1.Placement, string, string) (string, error) {
		return "", fmt.Errorf("the hub is down")
	}
	_, err = SelectObjects(t.Context(), p, src)
	g.Expect(err).To(MatchError("the hub is down"))
}

// A tenant's namespace with more referenced objects than a Placement may
// follow: the rest are named as not followed, nothing fails.
func TestFollowAtMost(t *testing.T) {
	g := NewWithT(t)
	volumes, docs := "", []string{}
	for i := range MaxFollowed + 5 {
		volumes += fmt.Sprintf("{name: v%d, configMap: {name: c%d}},", i, i)
		docs = append(docs, fmt.Sprintf(`{apiVersion: v1, kind: ConfigMap, metadata: {name: c%d}}`, i))
	}
	docs = append(docs, `{apiVersion: apps/v1, kind: Deployment, metadata: {name: web}, spec: {template: {spec: {volumes: [`+volumes+`], containers: [{name: c, image: i}]}}}}`)
	p := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec: placementv1alpha1.PlacementSpec{Dependencies: placementv1alpha1.DependenciesFollow,
			ResourceSelectors: []placementv1alpha1.ResourceSelector{{Group: "apps", Version: "v1", Kind: "Deployment"}}}}
	sel, err := SelectObjects(t.Context(), p, objectsHub(t, docs...))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sel.Followed).To(HaveLen(MaxFollowed))
	g.Expect(sel.NotFollowed).To(HaveLen(5))
	g.Expect(sel.FollowedMessage()).To(ContainSubstring("and 980 more"))
	g.Expect(len(sel.FollowedMessage())).To(BeNumerically("<", 4096))
}
