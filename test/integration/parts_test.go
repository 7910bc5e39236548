package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/clusterworks"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/render"
)

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
	}).WithTimeout(3*time.Minute).Should(Succeed(), "each member's API server builds the OpenAPI models of three 300 KiB CRDs: seconds of CPU each, minutes when a clean `make test` compiles beside it")

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

// An object that renders to more than a Work may carry is not placed: the
// Placement says why, naming it, and loses nothing placed.
func TestOversizeWorkIsNotWritten(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, cm, p := configMapPlacement(t)
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := placementCondition(g, t, client.ObjectKeyFromObject(p), placementv1alpha1.WorkSynchronizedCondition)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonWorkSynchronized))
	}).Should(Succeed())
	works := &workv1alpha1.WorkList{}
	g.Expect(hubCP.Client.List(ctx, works, client.MatchingLabels{placementv1alpha1.PlacementNamespaceLabel: ns})).To(Succeed())
	g.Expect(works.Items).NotTo(BeEmpty())
	work := &works.Items[0]
	cluster, _ := names.ClusterFromNamespace(work.Namespace)

	// A ConfigMap of 900 KiB: it fits etcd and a ConfigMap, not a Work.
	g.Expect(hubCP.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: ns, Labels: map[string]string{"size": "big"}},
		Data: map[string]string{"blob": strings.Repeat("x", 900<<10)}})).To(Succeed())
	g.Expect(updateOnHub(p, func(p *placementv1alpha1.Placement) {
		p.Spec.ResourceSelectors = append(p.Spec.ResourceSelectors, placementv1alpha1.ResourceSelector{
			Version: "v1", Kind: "ConfigMap", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"size": "big"}}})
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := placementCondition(g, t, client.ObjectKeyFromObject(p), placementv1alpha1.RenderedCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonWorkTooLarge))
		g.Expect(c.Message).To(ContainSubstring("ConfigMap " + ns + "/big"))
		c = placementCondition(g, t, client.ObjectKeyFromObject(p), placementv1alpha1.WorkSynchronizedCondition)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonNotRendered))
	}).Should(Succeed())
	got := &workv1alpha1.Work{}
	g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(work), got)).To(Succeed())
	g.Expect(got.Spec.Workload.Manifests).To(HaveLen(1), "the Work keeps what it carried")
	g.Expect(string(got.Spec.Workload.Manifests[0].Raw)).To(ContainSubstring(cm.Name))
	g.Eventually(func() error {
		return members[cluster].Client.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})
	}).Should(Succeed(), "what was placed stays")
}
