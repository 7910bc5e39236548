package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/clusterworks"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/render"
)

// bigCRD is a CustomResourceDefinition whose schema has fields properties, each
// with a long description, as an operator's CRDs have: about 330 bytes a field.
// It is unstructured: the hub's scheme has no apiextensions types.
func bigCRD(g Gomega, group, plural string, fields int) *unstructured.Unstructured {
	props := map[string]apiextensionsv1.JSONSchemaProps{}
	for i := range fields {
		props[fmt.Sprintf("field%04d", i)] = apiextensionsv1.JSONSchemaProps{Type: "string",
			Description: fmt.Sprintf("field%04d configures one aspect of the operand; ", i) + strings.Repeat("it is described at length, as generated API references are. ", 4)}
	}
	kind := strings.ToUpper(plural[:1]) + plural[1:len(plural)-1]
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group, Labels: map[string]string{"lodestar-test": group}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: plural[:len(plural)-1], Kind: kind, ListKind: kind + "List"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object", Properties: props}}}}}},
		},
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	g.Expect(err).NotTo(HaveOccurred())
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	return u
}

// crdOf is an empty CRD object to read one into.
func crdOf() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	return u
}

// A Placement whose objects render past the Work limit still places: three
// CRDs of about 306 KiB each (919 KiB together) reach both members through one
// ClusterPlacement as two Works per cluster, with one status per cluster; and
// when the objects fit in one Work again, the second part goes.
func TestObjectsLargerThanAWorkPlaceAsSeveralWorks(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	group := "parts-" + rand.String(5) + ".example.com"
	var crds []*unstructured.Unstructured
	size := 0
	for _, plural := range []string{"alphas", "betas", "gammas"} {
		crd := bigCRD(g, group, plural, 935)
		raw, err := crd.MarshalJSON()
		g.Expect(err).NotTo(HaveOccurred())
		size += len(raw)
		g.Expect(hubCP.Client.Create(ctx, crd)).To(Succeed())
		crds = append(crds, crd)
		t.Cleanup(func() { _ = hubCP.Client.Delete(context.Background(), crd) })
	}
	t.Logf("the three CRDs are %d KiB together", size>>10)
	g.Expect(size).To(BeNumerically(">", render.MaxManifestBytes), "the CRDs together are larger than a Work")
	g.Expect(size).To(BeNumerically("<", 2*render.MaxManifestBytes))

	cp := &placementv1alpha1.ClusterPlacement{
		ObjectMeta: metav1.ObjectMeta{Name: "crds-" + rand.String(5)},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition",
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"lodestar-test": group}}}},
			Scheduling: placementv1alpha1.Scheduling{ClusterNames: []string{member1, member2}},
		},
	}
	g.Expect(hubCP.Client.Create(ctx, cp)).To(Succeed())
	t.Cleanup(func() { _ = hubCP.Client.Delete(context.Background(), cp) })
	carrier := client.ObjectKey{Namespace: placementv1alpha1.ClusterPlacementNamespace, Name: cp.Name}

	g.Eventually(func(g Gomega) {
		for _, m := range []string{member1, member2} {
			for _, crd := range crds {
				got := crdOf()
				g.Expect(members[m].Client.Get(ctx, client.ObjectKeyFromObject(crd), got)).To(Succeed(), "%s on %s", crd.GetName(), m)
				versions, _, _ := unstructured.NestedSlice(got.Object, "spec", "versions")
				g.Expect(versions).To(HaveLen(1))
				fields, _, _ := unstructured.NestedMap(versions[0].(map[string]any), "schema", "openAPIV3Schema", "properties", "spec", "properties")
				g.Expect(fields).To(HaveLen(935))
			}
			parts := partsOn(g, carrier, m)
			g.Expect(parts).To(HaveLen(2), "two Works on %s", m)
			for i, w := range parts {
				g.Expect(clusterworks.Part(w)).To(Equal(i))
				g.Expect(w.Annotations).To(HaveKeyWithValue(placementv1alpha1.WorkPartsAnnotation, "2"))
				g.Expect(w.Name).To(Equal(names.WorkPart(carrier.Namespace, carrier.Name, i)))
				raw, err := client.MergeFrom(&workv1alpha1.Work{}).Data(w)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(len(raw)).To(BeNumerically("<", 1<<20), "each Work stays well within what etcd stores")
			}
		}
		got := &placementv1alpha1.ClusterPlacement{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(cp), got)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, placementv1alpha1.AvailableCondition)).To(BeTrue(), "%v", got.Status.Conditions)
		g.Expect(got.Status.AvailableClusters).To(HaveValue(BeEquivalentTo(2)))
		g.Expect(got.Status.Clusters).To(HaveLen(2), "one status per cluster, whatever its number of Works")
		g.Expect(got.Status.Rollout).NotTo(BeNil())
		g.Expect(got.Status.Rollout.UpdatedClusters).To(HaveValue(BeEquivalentTo(2)))
	}).Should(Succeed())

	// One CRD less: the rest fits in one Work, and the second part goes once
	// the first reports its objects applied; the CRD left out leaves the members.
	g.Expect(updateOnHub(crds[2], func(c *unstructured.Unstructured) { c.SetLabels(map[string]string{"lodestar-test": "left-out"}) })).To(Succeed())
	g.Eventually(func(g Gomega) {
		for _, m := range []string{member1, member2} {
			parts := partsOn(g, carrier, m)
			g.Expect(parts).To(HaveLen(1), "one Work on %s", m)
			g.Expect(parts[0].Annotations).NotTo(HaveKey(placementv1alpha1.WorkPartsAnnotation))
			g.Expect(members[m].Client.Get(ctx, client.ObjectKeyFromObject(crds[0]), crdOf())).To(Succeed())
			g.Expect(members[m].Client.Get(ctx, client.ObjectKeyFromObject(crds[1]), crdOf())).To(Succeed())
			err := members[m].Client.Get(ctx, client.ObjectKeyFromObject(crds[2]), crdOf())
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
		}
	}).Should(Succeed())
}

// partsOn are the Works of the Placement of key on cluster, in part order.
func partsOn(g Gomega, key client.ObjectKey, cluster string) []*workv1alpha1.Work {
	list := &workv1alpha1.WorkList{}
	g.Expect(hubCP.Client.List(context.Background(), list, client.InNamespace(names.ClusterNamespace(cluster)),
		client.MatchingLabels{placementv1alpha1.PlacementNamespaceLabel: key.Namespace, placementv1alpha1.PlacementNameLabel: names.LabelValue(key.Name)})).To(Succeed())
	return clusterworks.ByCluster(list.Items)[cluster]
}
