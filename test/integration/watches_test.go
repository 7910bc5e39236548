package integration

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// When a Work that placed a CRD and its custom resource goes, the agent deletes
// both, and stops watching the kind the member no longer serves (rather than
// listing and failing for as long as it runs). Placed again, the kind is
// watched again: a change made on the member is set back at once, not at the
// next resync.
func TestWatchOfARemovedKindStops(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	group := "w" + strings.ToLower(rand.String(6)) + ".example.com"
	crd := map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "gadgets." + group},
		"spec": map[string]any{
			"group": group, "scope": "Cluster",
			"names":    map[string]any{"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true, "schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}
	cr := map[string]any{"apiVersion": group + "/v1", "kind": "Gadget", "metadata": map[string]any{"name": "one"}, "spec": map[string]any{"size": int64(3)}}
	newWork := func() *workv1alpha1.Work {
		return &workv1alpha1.Work{
			ObjectMeta: metav1.ObjectMeta{Name: "gadgets-" + rand.String(5), Namespace: names.ClusterNamespace(member2)},
			Spec:       workv1alpha1.WorkSpec{Workload: workv1alpha1.WorkloadTemplate{Manifests: []workv1alpha1.Manifest{manifest(t, crd), manifest(t, cr)}}},
		}
	}
	gadget := func(g Gomega) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(group + "/v1")
		u.SetKind("Gadget")
		g.Expect(members[member2].Client.Get(ctx, client.ObjectKey{Name: "one"}, u)).To(Succeed())
		return u
	}

	w := newWork()
	g.Expect(hubCP.Client.Create(ctx, w)).To(Succeed())
	g.Eventually(func(g Gomega) {
		gadget(g)
		g.Expect(watchedKind(g, group, "Gadget")).To(BeEquivalentTo(1))
	}).Should(Succeed())

	// The Work goes: the agent deletes the CR and the CRD it created, and the
	// watch of the kind stops.
	g.Expect(hubCP.Client.Delete(ctx, w)).To(Succeed())
	g.Eventually(func(g Gomega) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		err := members[member2].Client.Get(ctx, client.ObjectKey{Name: "gadgets." + group}, u)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the CRD is deleted: %v", err)
		g.Expect(watchedKind(g, group, "Gadget")).To(BeZero())
	}).Should(Succeed())

	// Placed again: watched again, and drift is corrected by the watch.
	w = newWork()
	g.Expect(hubCP.Client.Create(ctx, w)).To(Succeed())
	t.Cleanup(func() { _ = hubCP.Client.Delete(ctx, w) })
	g.Eventually(func(g Gomega) {
		gadget(g)
		g.Expect(watchedKind(g, group, "Gadget")).To(BeEquivalentTo(1))
	}).Should(Succeed())
	g.Eventually(func() error {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(group + "/v1")
		u.SetKind("Gadget")
		if err := members[member2].Client.Get(ctx, client.ObjectKey{Name: "one"}, u); err != nil {
			return err
		}
		if err := unstructured.SetNestedField(u.Object, int64(7), "spec", "size"); err != nil {
			return err
		}
		return members[member2].Client.Update(ctx, u)
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		size, _, _ := unstructured.NestedInt64(gadget(g).Object, "spec", "size")
		g.Expect(size).To(BeEquivalentTo(3), "set back to the manifest")
	}).Should(Succeed())
}

// The work generator likewise stops watching a selected kind whose CRD is
// deleted on the hub.
func TestHubWatchOfARemovedKindStops(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	group := "h" + strings.ToLower(rand.String(6)) + ".example.com"
	crd := createWidgetCRD(t, hubCP.Client, group, apiextensionsv1.NamespaceScoped, "v1")
	widget := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": ns}, "spec": map[string]any{"size": int64(1)}}}
	g.Eventually(func() error { return hubCP.Client.Create(ctx, widget) }).Should(Succeed(), "once the CRD is served")
	p := &placementv1alpha1.Placement{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets", Namespace: ns},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{{Group: group, Version: "v1", Kind: "Widget"}},
			Scheduling:        placementv1alpha1.Scheduling{ClusterNames: []string{member2}},
		},
	}
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(hubWatchedKind(g, group, "Widget")).To(BeEquivalentTo(1))
	}).Should(Succeed())

	// The Placement goes first (its Work with it), then the CRD.
	g.Expect(hubCP.Client.Delete(ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := hubCP.Client.Get(ctx, client.ObjectKeyFromObject(p), &placementv1alpha1.Placement{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}).Should(Succeed())
	g.Expect(hubCP.Client.Delete(ctx, crd)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(hubWatchedKind(g, group, "Widget")).To(BeZero())
	}).Should(Succeed())
}
