package serviceimport_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	servicesv1alpha1 "github.com/lodestar-dev/lodestar/api/services/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// A cluster set labelled for namespace sameness shares a namespace's Services
// among its clusters whoever made the namespace there (no Work of it), with
// conflicts merged among them only; the hub namespace of the same name, bound
// to another set and placed there, is another domain: neither sees the
// other's exports. The label removed, the set's exports are refused again.
func TestNamespaceSamenessPerClusterSet(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	set := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: samenessSet}}
	g.Expect(hubCP.Client.Create(ctx, set)).To(Succeed())
	t.Cleanup(func() { _ = hubCP.Client.Delete(ctx, set) })
	same, err := testenv.NewClusters(ctx, hubCP.Client, samenessSet, "same-"+rand.String(4), 2)
	g.Expect(err).NotTo(HaveOccurred())
	// The hub's namespace of the name: bound to the other set, placed on one
	// cluster of it.
	ns, hubPlaced := tenantPlacedOn(t, g, 1, 1)

	key := func(cluster string) client.ObjectKey {
		return client.ObjectKey{Namespace: names.ClusterNamespace(cluster), Name: names.ServiceObject(ns, "web")}
	}
	condition := func(g Gomega, cluster, t string) *metav1.Condition {
		e := &servicesv1alpha1.ExportedService{}
		g.Expect(hubCP.Client.Get(ctx, key(cluster), e)).To(Succeed())
		c := meta.FindStatusCondition(e.Status.Conditions, t)
		g.Expect(c).NotTo(BeNil(), "%s of %s's export", t, cluster)
		return c
	}
	imported := func(g Gomega, cluster string) *servicesv1alpha1.ImportedService {
		im := &servicesv1alpha1.ImportedService{}
		g.Expect(hubCP.Client.Get(ctx, key(cluster), im)).To(Succeed())
		return im
	}
	absent := func(g Gomega, cluster string) {
		err := hubCP.Client.Get(ctx, key(cluster), &servicesv1alpha1.ImportedService{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no import on %s: %v", cluster, err)
	}

	// Default mode: an export from a cluster outside the hub namespace's set.
	now := time.Now()
	g.Expect(hubCP.Client.Create(ctx, export(same[0], ns, 80, "10.1.0.1", now.Add(-time.Minute)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(condition(g, same[0], string(mcsv1beta1.ServiceExportConditionValid)).Reason).To(Equal(servicesv1alpha1.ReasonClusterNotBound))
	}).Should(Succeed())

	// Sameness on: both clusters of the set import it.
	g.Expect(hubCP.Client.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: samenessSet,
		Labels: map[string]string{servicesv1alpha1.NamespaceSamenessLabel: servicesv1alpha1.NamespaceSamenessClusterSet}}},
		client.Merge)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(condition(g, same[0], string(mcsv1beta1.ServiceExportConditionValid)).Status).To(Equal(metav1.ConditionTrue))
		for _, c := range same {
			im := imported(g, c)
			g.Expect(im.Spec.NamespaceSameness).To(Equal(servicesv1alpha1.NamespaceSamenessClusterSet))
			g.Expect(im.Spec.Clusters).To(ConsistOf(same[0]))
			g.Expect(im.Spec.Service.Ports).To(ConsistOf(HaveField("Port", int32(80))))
		}
		absent(g, hubPlaced[0])
	}).Should(Succeed())

	// The hub-placed cluster exports the same name with another port: its own
	// domain, no conflict with the set's, and neither import mixes the other.
	g.Expect(hubCP.Client.Create(ctx, export(hubPlaced[0], ns, 9090, "10.2.0.1", now.Add(-2*time.Minute)))).To(Succeed())
	// A second export in the set, younger, with another port: in conflict
	// within the set.
	g.Expect(hubCP.Client.Create(ctx, export(same[1], ns, 8080, "10.1.0.2", now))).To(Succeed())
	g.Eventually(func(g Gomega) {
		hub := imported(g, hubPlaced[0])
		g.Expect(hub.Spec.Clusters).To(ConsistOf(hubPlaced[0]))
		g.Expect(hub.Spec.NamespaceSameness).To(BeEmpty())
		g.Expect(hub.Spec.Service.Ports).To(ConsistOf(HaveField("Port", int32(9090))))
		g.Expect(condition(g, hubPlaced[0], string(mcsv1beta1.ServiceExportConditionConflict)).Status).To(Equal(metav1.ConditionFalse))
		for _, c := range same {
			im := imported(g, c)
			g.Expect(im.Spec.Clusters).To(ConsistOf(same[0], same[1]))
			g.Expect(im.Spec.Service.Ports).To(ConsistOf(HaveField("Port", int32(80))), "the oldest export of the set wins")
			g.Expect(condition(g, c, string(mcsv1beta1.ServiceExportConditionConflict)).Status).To(Equal(metav1.ConditionTrue))
		}
	}).Should(Succeed())

	// Sameness off: the set's exports are refused again, their imports go;
	// the hub-placed domain keeps its own.
	g.Expect(hubCP.Client.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: samenessSet,
		Labels: map[string]string{servicesv1alpha1.NamespaceSamenessLabel: "off"}}}, client.Merge)).To(Succeed())
	g.Eventually(func(g Gomega) {
		for _, c := range same {
			g.Expect(condition(g, c, string(mcsv1beta1.ServiceExportConditionValid)).Reason).To(Equal(servicesv1alpha1.ReasonClusterNotBound))
			absent(g, c)
		}
		g.Expect(imported(g, hubPlaced[0]).Spec.Clusters).To(ConsistOf(hubPlaced[0]))
	}).Should(Succeed())
}

// An import lists its exporters oldest first, whatever their names: the
// endpoints an over-full import keeps are the oldest exports' (mcs.Fit).
func TestImportListsExportersOldestFirst(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, clusters := tenantPlacedOn(t, g, 2, 2)
	now := time.Now()
	// The second cluster's export is the older one.
	g.Expect(hubCP.Client.Create(ctx, export(clusters[0], ns, 80, "10.3.0.1", now))).To(Succeed())
	g.Expect(hubCP.Client.Create(ctx, export(clusters[1], ns, 80, "10.3.0.2", now.Add(-time.Hour)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		for _, c := range clusters {
			im := &servicesv1alpha1.ImportedService{}
			g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: names.ClusterNamespace(c), Name: names.ServiceObject(ns, "web")}, im)).To(Succeed())
			g.Expect(im.Spec.Clusters).To(Equal([]string{clusters[1], clusters[0]}))
			g.Expect(im.Spec.Sources).To(HaveLen(2))
			g.Expect(im.Spec.Sources[0].Cluster).To(Equal(clusters[1]))
		}
	}).Should(Succeed())
}
