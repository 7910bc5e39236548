package serviceimport_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	servicesv1alpha1 "github.com/lodestar-dev/lodestar/api/services/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/hub"
	"github.com/lodestar-dev/lodestar/controllers/hub/serviceimport"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

var hubCP *testenv.ControlPlane

// clusterSet is the cluster-set namespace of this package's clusters.
const clusterSet = "serviceimport-test-set"

// samenessSet is a second cluster set the controller manages, which
// TestNamespaceSamenessPerClusterSet makes and turns to namespace sameness.
const samenessSet = "serviceimport-sameness-set"

func TestMain(m *testing.M) {
	// The package's Gomega defaults, sized for a busy 2-core CI machine.
	testenv.SetGomegaDefaults()
	os.Exit(testenv.HubSuite(m, hub.ManagerOptions(ctrl.Options{}, ""), clusterSet, &hubCP, startServiceImport))
}

// startServiceImport runs only the service import controller on the hub.
func startServiceImport(mgr ctrl.Manager) error {
	if err := lookup.AddServiceIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	return (&serviceimport.Reconciler{Client: mgr.GetClient(), Scope: lookup.Scope{Sets: []string{clusterSet, samenessSet}}}).SetupWithManager(mgr)
}

// tenantPlacedOn makes a tenant namespace and n clusters of the set, and
// places the namespace (a Work of it) on the first placed of them.
func tenantPlacedOn(t *testing.T, g Gomega, n, placed int) (string, []string) {
	ctx := t.Context()
	ns, err := testenv.NewTenant(ctx, hubCP.Client, clusterSet)
	g.Expect(err).NotTo(HaveOccurred())
	clusters, err := testenv.NewClusters(ctx, hubCP.Client, clusterSet, ns, n)
	g.Expect(err).NotTo(HaveOccurred())
	for _, c := range clusters[:placed] {
		g.Expect(hubCP.Client.Create(ctx, &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: names.Work(ns, "app"), Namespace: names.ClusterNamespace(c),
			Labels: map[string]string{placementv1alpha1.PlacementNamespaceLabel: ns, placementv1alpha1.PlacementNameLabel: "app",
				placementv1alpha1.HubManagerLabel: placementv1alpha1.DefaultHubManager}}})).To(Succeed())
	}
	return ns, clusters
}

// export is cluster's report of its export of ns/web: port, and one ready
// endpoint at ip.
func export(cluster, ns string, port int32, ip string, created time.Time) *servicesv1alpha1.ExportedService {
	ready := true
	return &servicesv1alpha1.ExportedService{
		ObjectMeta: metav1.ObjectMeta{Name: names.ServiceObject(ns, "web"), Namespace: names.ClusterNamespace(cluster)},
		Spec: servicesv1alpha1.ExportedServiceSpec{Namespace: ns, Name: "web", ExportCreated: metav1.NewTime(created),
			Service: &servicesv1alpha1.ServiceProperties{Type: mcsv1beta1.ClusterSetIP, Ports: []mcsv1beta1.ServicePort{{Name: "http", Port: port, Protocol: corev1.ProtocolTCP}}},
			Slices: []servicesv1alpha1.Slice{{AddressType: discoveryv1.AddressTypeIPv4,
				Endpoints: []servicesv1alpha1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}}}}},
	}
}

// One export is imported on every cluster the namespace's objects are placed
// on, with its endpoints; a second export that disagrees on the ports is in
// conflict (the oldest wins), and says so; a cluster the namespace places
// nothing on imports nothing.
func TestExportsAreMergedIntoEveryImporter(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, clusters := tenantPlacedOn(t, g, 3, 2) // the namespace is placed on the first two
	now := time.Now()
	g.Expect(hubCP.Client.Create(ctx, export(clusters[0], ns, 80, "10.0.0.1", now.Add(-time.Minute)))).To(Succeed())

	imported := func(g Gomega, cluster string) *servicesv1alpha1.ImportedService {
		im := &servicesv1alpha1.ImportedService{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: names.ClusterNamespace(cluster), Name: names.ServiceObject(ns, "web")}, im)).To(Succeed())
		return im
	}
	condition := func(g Gomega, cluster, t string) *metav1.Condition {
		e := &servicesv1alpha1.ExportedService{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: names.ClusterNamespace(cluster), Name: names.ServiceObject(ns, "web")}, e)).To(Succeed())
		c := meta.FindStatusCondition(e.Status.Conditions, t)
		g.Expect(c).NotTo(BeNil(), "%s of %s's export", t, cluster)
		return c
	}
	g.Eventually(func(g Gomega) {
		for _, c := range clusters[:2] {
			im := imported(g, c)
			g.Expect(im.Spec.Service.Ports).To(ConsistOf(HaveField("Port", int32(80))))
			g.Expect(im.Spec.Sources).To(ConsistOf(And(HaveField("Cluster", clusters[0]), HaveField("Slices", HaveLen(1)))))
		}
		g.Expect(condition(g, clusters[0], string(mcsv1beta1.ServiceExportConditionValid)).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(condition(g, clusters[0], string(mcsv1beta1.ServiceExportConditionConflict)).Status).To(Equal(metav1.ConditionFalse))
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		err := hubCP.Client.Get(ctx, client.ObjectKey{Namespace: names.ClusterNamespace(clusters[2]), Name: names.ServiceObject(ns, "web")}, &servicesv1alpha1.ImportedService{})
		g.Expect(err).To(HaveOccurred(), "nothing of the namespace is placed on %s", clusters[2])
	}).WithTimeout(2 * time.Second).Should(Succeed())

	// A younger export with another port: in conflict, the oldest's port stays.
	g.Expect(hubCP.Client.Create(ctx, export(clusters[1], ns, 8080, "10.0.0.2", now))).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := condition(g, clusters[1], string(mcsv1beta1.ServiceExportConditionConflict))
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
		g.Expect(condition(g, clusters[0], string(mcsv1beta1.ServiceExportConditionConflict)).Status).To(Equal(metav1.ConditionTrue), "a conflict is on every export involved")
		g.Expect(imported(g, clusters[0]).Spec.Service.Ports).To(ConsistOf(HaveField("Port", int32(80))))
	}).Should(Succeed())
}

// An import carries at most 1 MiB of endpoints, the oldest exports' first:
// two exports of 12 000 endpoints each do not both fit, so the younger's
// endpoints are left out (its export says so, Ready=False ImportTooLarge)
// and the older's are imported, instead of an import no cluster ever gets.
func TestLargeExportsLeftOutOfTheImport(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, clusters := tenantPlacedOn(t, g, 2, 2)
	large := func(cluster string, octet int, created time.Time) *servicesv1alpha1.ExportedService {
		e := export(cluster, ns, 80, "10.0.0.1", created)
		ready := true
		e.Spec.Slices = nil
		for s := range 12 {
			slice := servicesv1alpha1.Slice{AddressType: discoveryv1.AddressTypeIPv4}
			for i := range 1000 {
				slice.Endpoints = append(slice.Endpoints, servicesv1alpha1.Endpoint{
					Addresses: []string{fmt.Sprintf("10.%d.%d.%d", octet, s*20+i/250, i%250)}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
			}
			e.Spec.Slices = append(e.Spec.Slices, slice)
		}
		return e
	}
	now := time.Now()
	g.Expect(hubCP.Client.Create(ctx, large(clusters[0], 1, now.Add(-time.Minute)))).To(Succeed())
	g.Expect(hubCP.Client.Create(ctx, large(clusters[1], 2, now))).To(Succeed())

	ready := func(g Gomega, cluster string) *metav1.Condition {
		e := &servicesv1alpha1.ExportedService{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: names.ClusterNamespace(cluster), Name: names.ServiceObject(ns, "web")}, e)).To(Succeed())
		c := meta.FindStatusCondition(e.Status.Conditions, string(mcsv1beta1.ServiceExportConditionReady))
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.ObservedGeneration).To(Equal(e.Generation))
		return c
	}
	g.Eventually(func(g Gomega) {
		for _, c := range clusters {
			im := &servicesv1alpha1.ImportedService{}
			g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: names.ClusterNamespace(c), Name: names.ServiceObject(ns, "web")}, im)).To(Succeed())
			g.Expect(im.Spec.Clusters).To(ConsistOf(clusters[0], clusters[1]), "both export")
			g.Expect(im.Spec.Sources).To(ConsistOf(HaveField("Cluster", clusters[0])), "the older's endpoints only")
		}
		g.Expect(ready(g, clusters[0]).Status).To(Equal(metav1.ConditionTrue))
		c := ready(g, clusters[1])
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(servicesv1alpha1.ReasonImportTooLarge))
		g.Expect(c.Message).To(ContainSubstring("left out of the import on 2 clusters"))
	}).Should(Succeed())

	// The older export withdrawn: the younger's endpoints fit, and are imported.
	g.Expect(hubCP.Client.Delete(ctx, large(clusters[0], 1, now))).To(Succeed())
	g.Eventually(func(g Gomega) {
		im := &servicesv1alpha1.ImportedService{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: names.ClusterNamespace(clusters[0]), Name: names.ServiceObject(ns, "web")}, im)).To(Succeed())
		g.Expect(im.Spec.Sources).To(ConsistOf(HaveField("Cluster", clusters[1])))
		g.Expect(ready(g, clusters[1]).Status).To(Equal(metav1.ConditionTrue))
	}).Should(Succeed())
}
