package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	servicesv1alpha1 "github.com/lodestar-dev/lodestar/api/services/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/config"
	"github.com/lodestar-dev/lodestar/controllers/agent"
	"github.com/lodestar-dev/lodestar/controllers/agent/services"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/scheme"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// webService is the Service of webObjects' Deployment.
func webService(ns string, ports ...corev1.ServicePort) *corev1.Service {
	if len(ports) == 0 {
		ports = []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}
	}
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: ports}}
}

// exportOn writes a ServiceExport of ns/name on cluster, deleted when the test
// ends.
func exportOn(t *testing.T, cluster, ns, name string) {
	t.Helper()
	se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	NewWithT(t).Expect(members[cluster].Client.Create(t.Context(), se)).To(Succeed())
	t.Cleanup(func() { _ = members[cluster].Client.Delete(context.Background(), se) })
}

// webOn writes webObjects' Deployment (one replica) and its Service in ns on
// cluster, as the member's own admin would, deleted when the test ends.
func webOn(t *testing.T, cluster, ns string) {
	t.Helper()
	_, deploy, _ := webObjects(ns)
	deploy.Spec.Replicas = ptr.To[int32](1)
	createOn(t, cluster, deploy)
	createOn(t, cluster, webService(ns))
}

// createOn creates obj on cluster, deleted when the test ends.
func createOn(t *testing.T, cluster string, obj client.Object) {
	t.Helper()
	NewWithT(t).Expect(members[cluster].Client.Create(t.Context(), obj)).To(Succeed())
	t.Cleanup(func() { _ = members[cluster].Client.Delete(context.Background(), obj) })
}

// serviceImportOn is the ServiceImport of ns/name on cluster, or nil.
func serviceImportOn(g Gomega, cluster, ns, name string) *mcsv1beta1.ServiceImport {
	si := &mcsv1beta1.ServiceImport{}
	err := members[cluster].Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, si)
	if apierrors.IsNotFound(err) {
		return nil
	}
	g.Expect(err).NotTo(HaveOccurred())
	return si
}

// importedEndpoints are the addresses of the imported slices of ns/web on
// cluster, by source cluster; each slice carries the MCS labels and one source.
func importedEndpoints(g Gomega, cluster, ns string) map[string][]string {
	list := &discoveryv1.EndpointSliceList{}
	g.Expect(members[cluster].Client.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{mcsv1beta1.LabelServiceName: "web"})).To(Succeed())
	out := map[string][]string{}
	for _, s := range list.Items {
		source := s.Labels[mcsv1beta1.LabelSourceCluster]
		g.Expect(source).NotTo(BeEmpty(), "slice %s names its source cluster", s.Name)
		g.Expect(s.Labels[discoveryv1.LabelManagedBy]).To(Equal(servicesv1alpha1.ManagedBy), "slice %s is Lodestar's, not the EndpointSlice controller's", s.Name)
		g.Expect(s.OwnerReferences).To(ContainElement(HaveField("Kind", "ServiceImport")))
		for _, ep := range s.Endpoints {
			out[source] = append(out[source], ep.Addresses...)
		}
	}
	for _, a := range out {
		slices.Sort(a)
	}
	return out
}

// readyPodIPs are the IPs of the ready pods labelled app=web in ns on cluster.
func readyPodIPs(g Gomega, cluster, ns string) []string {
	pods := &corev1.PodList{}
	g.Expect(members[cluster].Client.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{"app": "web"})).To(Succeed())
	var ips []string
	for _, p := range pods.Items {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.Status.PodIP != "" && p.DeletionTimestamp.IsZero() {
				ips = append(ips, p.Status.PodIP)
			}
		}
	}
	slices.Sort(ips)
	return ips
}

// exportCondition is a condition of the ServiceExport ns/name on cluster.
func exportCondition(g Gomega, cluster, ns, name string, t mcsv1beta1.ServiceExportConditionType) *metav1.Condition {
	se := &mcsv1beta1.ServiceExport{}
	g.Expect(members[cluster].Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, se)).To(Succeed())
	c := meta.FindStatusCondition(se.Status.Conditions, string(t))
	g.Expect(c).NotTo(BeNil(), "ServiceExport %s/%s on %s has a %s condition", ns, name, cluster, t)
	return c
}

// A Service exported from member-1 and member-3 (the app placed there, the
// ServiceExports written on the members) is imported on every member where
// the namespace exists: one ServiceImport with both exporters and an IP of
// its own on each, and one slice per source cluster holding that cluster's
// pod IPs. Unexporting one leaves the other's endpoints, with the same import
// (UID, IPs); unexporting both removes the imports everywhere.
func TestServicesAcrossTheFleet(t *testing.T) {
	extraMembers(t)
	g := NewWithT(t)
	ctx := t.Context()
	ns := rolloutNamespace(t)
	all := []string{member1, member2, member3, member4}
	// The namespace on every member: the web ConfigMap placed to all four.
	g.Expect(hubCP.Client.Create(ctx, greetingPlacement(ns, all, placementv1alpha1.RolloutStrategy{}))).To(Succeed())
	_, deploy, _ := webObjects(ns)
	g.Expect(hubCP.Client.Create(ctx, deploy)).To(Succeed())
	g.Expect(hubCP.Client.Create(ctx, webService(ns))).To(Succeed())
	app := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns}, Spec: placementv1alpha1.PlacementSpec{
		ResourceSelectors: []placementv1alpha1.ResourceSelector{{Group: "apps", Version: "v1", Kind: "Deployment", Name: "web"}, {Version: "v1", Kind: "Service", Name: "web"}},
		Scheduling:        placementv1alpha1.Scheduling{ClusterNames: []string{member1, member3}},
	}}
	g.Expect(hubCP.Client.Create(ctx, app)).To(Succeed())
	ips := map[string][]string{}
	g.Eventually(func(g Gomega) {
		for _, c := range []string{member1, member3} {
			ips[c] = readyPodIPs(g, c, ns)
			g.Expect(ips[c]).To(HaveLen(2), "web runs on %s", c)
		}
		for _, c := range all {
			g.Expect(members[c].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-config"}, &corev1.ConfigMap{})).To(Succeed())
		}
	}).Should(Succeed())
	exportOn(t, member1, ns, "web")
	exportOn(t, member3, ns, "web")

	uids, clusterIPs := map[string]types.UID{}, map[string][]string{}
	g.Eventually(func(g Gomega) {
		for _, c := range all {
			si := serviceImportOn(g, c, ns, "web")
			g.Expect(si).NotTo(BeNil(), "a ServiceImport on %s", c)
			g.Expect(si.Spec.Type).To(Equal(mcsv1beta1.ClusterSetIP))
			g.Expect(si.Spec.Ports).To(ConsistOf(HaveField("Port", int32(80))))
			g.Expect(si.Spec.IPs).NotTo(BeEmpty(), "the import's IP on %s", c)
			g.Expect(si.Status.Clusters).To(ConsistOf(mcsv1beta1.ClusterStatus{Cluster: member1}, mcsv1beta1.ClusterStatus{Cluster: member3}))
			g.Expect(importedEndpoints(g, c, ns)).To(Equal(map[string][]string{member1: ips[member1], member3: ips[member3]}), "the slices on %s", c)
			// kube-proxy routes the import's IP: a derived Service without
			// selector holds it, and the slices name it.
			derived := &corev1.Service{}
			g.Expect(members[c].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: services.DerivedName(types.NamespacedName{Namespace: ns, Name: "web"})}, derived)).To(Succeed())
			g.Expect(derived.Spec.Selector).To(BeEmpty())
			g.Expect(si.Spec.IPs).To(Equal(derived.Spec.ClusterIPs))
			uids[c], clusterIPs[c] = si.UID, si.Spec.IPs
		}
		for _, c := range []string{member1, member3} {
			g.Expect(exportCondition(g, c, ns, "web", mcsv1beta1.ServiceExportConditionValid).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(exportCondition(g, c, ns, "web", mcsv1beta1.ServiceExportConditionReady).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(exportCondition(g, c, ns, "web", mcsv1beta1.ServiceExportConditionConflict).Status).To(Equal(metav1.ConditionFalse))
		}
	}).Should(Succeed())

	// A new pod on each exporter reaches every importer.
	g.Expect(updateOnHub(deploy, func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](3) })).To(Succeed())
	g.Eventually(func(g Gomega) {
		for _, c := range []string{member1, member3} {
			ips[c] = readyPodIPs(g, c, ns)
			g.Expect(ips[c]).To(HaveLen(3))
		}
		for _, c := range all {
			g.Expect(importedEndpoints(g, c, ns)).To(Equal(map[string][]string{member1: ips[member1], member3: ips[member3]}), "the slices on %s", c)
		}
	}).Should(Succeed())

	// Unexport member-3: its endpoints leave; the imports stay as they are.
	g.Expect(members[member3].Client.Delete(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		for _, c := range all {
			si := serviceImportOn(g, c, ns, "web")
			g.Expect(si).NotTo(BeNil())
			g.Expect(si.UID).To(Equal(uids[c]), "the same ServiceImport on %s", c)
			g.Expect(si.Spec.IPs).To(Equal(clusterIPs[c]), "the same IP on %s", c)
			g.Expect(si.Status.Clusters).To(ConsistOf(mcsv1beta1.ClusterStatus{Cluster: member1}))
			g.Expect(importedEndpoints(g, c, ns)).To(Equal(map[string][]string{member1: ips[member1]}), "the slices on %s", c)
		}
	}).Should(Succeed())

	// Unexport member-1: nothing exports web; the imports go everywhere.
	g.Expect(members[member1].Client.Delete(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		for _, c := range all {
			g.Expect(serviceImportOn(g, c, ns, "web")).To(BeNil(), "the ServiceImport on %s", c)
			g.Expect(importedEndpoints(g, c, ns)).To(BeEmpty())
			err := members[c].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: services.DerivedName(types.NamespacedName{Namespace: ns, Name: "web"})}, &corev1.Service{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the derived Service on %s: %v", c, err)
		}
		// The app's own Service stays where it was placed.
		g.Expect(members[member1].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &corev1.Service{})).To(Succeed())
	}).Should(Succeed())
}

// Conflicts as the KEP says: the oldest export's values win, and every export
// involved is told, naming it; ExternalName and missing Services are invalid,
// and so is an export from default unless the platform opens it. On member-2
// and member-4 (API servers only: the Services have no endpoints).
// shareNamespace has the hub place namespace ns's web ConfigMap
// (rolloutNamespace) on clusters, which may then export and import the
// namespace's Services: a cluster shares a namespace's Services only where
// the hub places it.
func shareNamespace(t *testing.T, ns string, clusters ...string) {
	t.Helper()
	g := NewWithT(t)
	p := greetingPlacement(ns, clusters, placementv1alpha1.RolloutStrategy{})
	p.Name = "share"
	g.Expect(hubCP.Client.Create(t.Context(), p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		for _, c := range clusters {
			g.Expect(workOf(g, p, c)).NotTo(BeNil(), "a Work on %s", c)
		}
	}).Should(Succeed())
}

func TestServiceExportConflicts(t *testing.T) {
	extraMembers(t)
	g := NewWithT(t)
	ctx := t.Context()
	ns := rolloutNamespace(t)
	for _, c := range []string{member2, member4} {
		createOn(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	shareNamespace(t, ns, member2, member4)
	// Ports: member-2 exports http 80 first; member-4 http 8080.
	createOn(t, member2, webService(ns))
	exportOn(t, member2, ns, "web")
	g.Eventually(func(g Gomega) {
		g.Expect(exportCondition(g, member2, ns, "web", mcsv1beta1.ServiceExportConditionReady).Status).To(Equal(metav1.ConditionTrue))
	}).Should(Succeed())
	createOn(t, member4, webService(ns, corev1.ServicePort{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}))
	exportOn(t, member4, ns, "web")
	g.Eventually(func(g Gomega) {
		for _, c := range []string{member2, member4} {
			si := serviceImportOn(g, c, ns, "web")
			g.Expect(si).NotTo(BeNil())
			g.Expect(si.Spec.Ports).To(Equal([]mcsv1beta1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}), "the oldest export's port")
			conflict := exportCondition(g, c, ns, "web", mcsv1beta1.ServiceExportConditionConflict)
			g.Expect(conflict.Status).To(Equal(metav1.ConditionTrue), "Conflict on %s's export", c)
			g.Expect(conflict.Reason).To(Equal(string(mcsv1beta1.ServiceExportReasonPortConflict)))
			g.Expect(conflict.Message).To(ContainSubstring("the oldest export (member-2's) wins"))
		}
	}).Should(Succeed())

	// Type: headless on member-2 (older), ClusterIP on member-4: the import is
	// Headless, without IP; with member-2's export gone it is ClusterSetIP.
	db := func(headless bool) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "db"},
			Ports: []corev1.ServicePort{{Name: "pg", Port: 5432, Protocol: corev1.ProtocolTCP}}}}
		if headless {
			s.Spec.ClusterIP = corev1.ClusterIPNone
		}
		return s
	}
	createOn(t, member2, db(true))
	exportOn(t, member2, ns, "db")
	g.Eventually(func(g Gomega) {
		g.Expect(exportCondition(g, member2, ns, "db", mcsv1beta1.ServiceExportConditionReady).Status).To(Equal(metav1.ConditionTrue))
	}).Should(Succeed())
	createOn(t, member4, db(false))
	exportOn(t, member4, ns, "db")
	g.Eventually(func(g Gomega) {
		for _, c := range []string{member2, member4} {
			si := serviceImportOn(g, c, ns, "db")
			g.Expect(si).NotTo(BeNil())
			g.Expect(si.Spec.Type).To(Equal(mcsv1beta1.Headless))
			g.Expect(si.Spec.IPs).To(BeEmpty())
			g.Expect(exportCondition(g, c, ns, "db", mcsv1beta1.ServiceExportConditionConflict).Reason).To(Equal(string(mcsv1beta1.ServiceExportReasonTypeConflict)))
		}
	}).Should(Succeed())
	g.Expect(members[member2].Client.Delete(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		si := serviceImportOn(g, member4, ns, "db")
		g.Expect(si).NotTo(BeNil())
		g.Expect(si.Spec.Type).To(Equal(mcsv1beta1.ClusterSetIP))
		g.Expect(si.Spec.IPs).NotTo(BeEmpty())
		g.Expect(exportCondition(g, member4, ns, "db", mcsv1beta1.ServiceExportConditionConflict).Status).To(Equal(metav1.ConditionFalse))
	}).Should(Succeed())

	// Invalid: an ExternalName Service, no Service, an export from default.
	createOn(t, member2, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ext", Namespace: ns}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}})
	exportOn(t, member2, ns, "ext")
	exportOn(t, member2, ns, "ghost")
	dflt := "mcs-" + names.Hash(ns)[:8]
	createOn(t, member2, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: dflt, Namespace: "default"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}})
	exportOn(t, member2, "default", dflt)
	g.Eventually(func(g Gomega) {
		for _, tt := range []struct{ ns, name, reason string }{
			{ns, "ext", string(mcsv1beta1.ServiceExportReasonInvalidServiceType)},
			{ns, "ghost", string(mcsv1beta1.ServiceExportReasonNoService)},
			{"default", dflt, servicesv1alpha1.ReasonNamespaceNotExported},
		} {
			valid := exportCondition(g, member2, tt.ns, tt.name, mcsv1beta1.ServiceExportConditionValid)
			g.Expect(valid.Status).To(Equal(metav1.ConditionFalse), "%s/%s", tt.ns, tt.name)
			g.Expect(valid.Reason).To(Equal(tt.reason), "%s/%s", tt.ns, tt.name)
			g.Expect(serviceImportOn(g, member4, tt.ns, tt.name)).To(BeNil(), "no import of %s/%s", tt.ns, tt.name)
		}
	}).Should(Succeed())

	// The clusters the hub places nothing of the namespace on (member-1,
	// member-3) get no import.
	for _, c := range []string{member1, member3} {
		err := hubCP.Client.Get(ctx, client.ObjectKey{Namespace: names.ClusterNamespace(c), Name: ns + ".web"}, &servicesv1alpha1.ImportedService{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no import for %s: %v", c, err)
		g.Expect(serviceImportOn(g, c, ns, "web")).To(BeNil())
	}
}

// An exporting cluster whose agent stops has its endpoints withdrawn from
// every importer within 60 s (the exports lease, not the paced heartbeat),
// and served again once its agent is back.
func TestLostExporterWithdrawn(t *testing.T) {
	extraMembers(t)
	g := NewWithT(t)
	ns := rolloutNamespace(t)
	createOn(t, member1, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	createOn(t, member3, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	shareNamespace(t, ns, member1, member3)
	webOn(t, member3, ns)
	exportOn(t, member3, ns, "web")
	g.Eventually(func(g Gomega) {
		ips := readyPodIPs(g, member3, ns)
		g.Expect(ips).To(HaveLen(1))
		g.Expect(importedEndpoints(g, member1, ns)).To(Equal(map[string][]string{member3: ips}))
	}).Should(Succeed())

	stopped := time.Now()
	stopExtraAgent(member3)
	t.Cleanup(func() { restartExtraAgent(t, member3) })
	g.Eventually(func(g Gomega) {
		g.Expect(importedEndpoints(g, member1, ns)).To(BeEmpty())
		si := serviceImportOn(g, member1, ns, "web")
		g.Expect(si).NotTo(BeNil(), "the import stays: the export still exists")
	}).WithTimeout(60 * time.Second).Should(Succeed())
	t.Logf("member-3's endpoints left member-1 %s after its agent stopped", time.Since(stopped).Round(time.Second))

	restartExtraAgent(t, member3)
	g.Eventually(func(g Gomega) {
		g.Expect(importedEndpoints(g, member1, ns)).To(HaveKey(member3))
	}).Should(Succeed())
}

// Tenants cannot place a ServiceImport, or EndpointSlices with the MCS labels:
// a Work that carries them is refused by the agent, whatever the member's
// policy.
func TestWorkCannotCarryImports(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	w := newWork(t, member1, "imports", nil,
		manifest(t, map[string]any{"apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
			"metadata": map[string]any{"name": "web", "namespace": ns}, "spec": map[string]any{"type": "ClusterSetIP", "ports": []any{map[string]any{"port": 80}}}}),
		manifest(t, map[string]any{"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
			"metadata": map[string]any{"name": "web-forged", "namespace": ns, "labels": map[string]any{mcsv1beta1.LabelServiceName: "web", mcsv1beta1.LabelSourceCluster: member2}}}),
		cmManifest(t, ns, "fine", map[string]any{"k": "v"}),
	)
	g.Expect(eventuallyManifest(t, w, 0, metav1.ConditionFalse, lodestarworkv1alpha1.ReasonDeniedByPolicy)).To(ContainSubstring("ServiceImports are made by Lodestar"))
	g.Expect(eventuallyManifest(t, w, 1, metav1.ConditionFalse, lodestarworkv1alpha1.ReasonDeniedByPolicy)).To(ContainSubstring("multicluster.kubernetes.io/service-name"))
	eventuallyManifest(t, w, 2, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)
}

// trafficSample is what one importer serves of web at one moment, and whether
// the moved copy's Service is still on member-1.
type trafficSample struct {
	at        time.Time
	sources   map[string]int
	uid       types.UID
	ips       []string
	oldCopy   bool
	readError error
}

// A move of a Placement exporting web from member-1 to member-3 keeps the
// traffic: an importer (member-2) sampled every 100 ms always serves ready
// endpoints, member-3's appear there before member-1's go, member-1's copy
// runs on after its endpoints left (the drain), and the ServiceImport's UID
// and IP never change.
func TestMoveKeepsTraffic(t *testing.T) {
	extraMembers(t)
	g := NewWithT(t)
	ctx := t.Context()
	ns := rolloutNamespace(t)
	createOn(t, member2, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	shareNamespace(t, ns, member2)
	_, deploy, _ := webObjects(ns)
	g.Expect(hubCP.Client.Create(ctx, deploy)).To(Succeed())
	g.Expect(hubCP.Client.Create(ctx, webService(ns))).To(Succeed())
	p := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns}, Spec: placementv1alpha1.PlacementSpec{
		ResourceSelectors: []placementv1alpha1.ResourceSelector{{Group: "apps", Version: "v1", Kind: "Deployment", Name: "web"}, {Version: "v1", Kind: "Service", Name: "web"}},
		Scheduling:        placementv1alpha1.Scheduling{ClusterNames: []string{member1}},
		Services:          &placementv1alpha1.PlacedServices{Export: placementv1alpha1.ServiceExportAll, DrainSeconds: ptr.To[int32](3)},
	}}
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	var before *mcsv1beta1.ServiceImport
	g.Eventually(func(g Gomega) {
		ips := readyPodIPs(g, member1, ns)
		g.Expect(ips).To(HaveLen(2))
		g.Expect(importedEndpoints(g, member2, ns)).To(Equal(map[string][]string{member1: ips}))
		before = serviceImportOn(g, member2, ns, "web")
		g.Expect(before.Spec.IPs).NotTo(BeEmpty())
	}).Should(Succeed())

	samples := make(chan trafficSample, 10000)
	sampling, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		defer close(samples)
		for sampling.Err() == nil {
			smp := trafficSample{at: time.Now(), sources: map[string]int{}}
			list := &discoveryv1.EndpointSliceList{}
			si := &mcsv1beta1.ServiceImport{}
			smp.readError = members[member2].Client.List(sampling, list, client.InNamespace(ns), client.MatchingLabels{mcsv1beta1.LabelServiceName: "web"})
			if smp.readError == nil {
				smp.readError = members[member2].Client.Get(sampling, client.ObjectKey{Namespace: ns, Name: "web"}, si)
			}
			err := members[member1].Client.Get(sampling, client.ObjectKey{Namespace: ns, Name: "web"}, &corev1.Service{})
			smp.oldCopy = err == nil
			for _, s := range list.Items {
				for _, ep := range s.Endpoints {
					if ptr.Deref(ep.Conditions.Ready, true) {
						smp.sources[s.Labels[mcsv1beta1.LabelSourceCluster]]++
					}
				}
			}
			smp.uid, smp.ips = si.UID, si.Spec.IPs
			if sampling.Err() == nil {
				samples <- smp
			}
			select {
			case <-sampling.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()

	g.Expect(updateOnHub(p, func(p *placementv1alpha1.Placement) { p.Spec.Scheduling.ClusterNames = []string{member3} })).To(Succeed())
	g.Eventually(func(g Gomega) {
		ips := readyPodIPs(g, member3, ns)
		g.Expect(ips).To(HaveLen(2))
		g.Expect(importedEndpoints(g, member2, ns)).To(Equal(map[string][]string{member3: ips}))
		err := members[member1].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &corev1.Service{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the moved copy's Service is gone: %v", err)
	}).Should(Succeed())
	gone := time.Now()
	stop()

	var got []trafficSample
	for smp := range samples {
		got = append(got, smp)
	}
	g.Expect(len(got)).To(BeNumerically(">", 10))
	firstNew, lastOld, firstWithdrawn := -1, -1, -1
	for i, smp := range got {
		g.Expect(smp.readError).NotTo(HaveOccurred(), "sample %d", i)
		total := 0
		for _, n := range smp.sources {
			total += n
		}
		g.Expect(total).To(BeNumerically(">", 0), "sample %d at %s: member-2 serves no ready endpoint of web", i, smp.at.Format(time.StampMilli))
		g.Expect(smp.uid).To(Equal(before.UID), "sample %d: the same ServiceImport", i)
		g.Expect(smp.ips).To(Equal(before.Spec.IPs), "sample %d: the same IP", i)
		if smp.sources[member3] > 0 && firstNew < 0 {
			firstNew = i
		}
		if smp.sources[member1] > 0 {
			lastOld = i
		} else if firstWithdrawn < 0 {
			firstWithdrawn = i
		}
	}
	g.Expect(firstNew).To(BeNumerically(">=", 0))
	g.Expect(firstNew).To(BeNumerically("<=", lastOld), "member-3's endpoints reached member-2 before member-1's left")
	g.Expect(got[firstWithdrawn].oldCopy).To(BeTrue(), "member-1's copy outlived the withdrawal of its endpoints (the drain)")
	t.Logf("%d samples; both clusters served for %s; member-1's copy was gone at most %s after its endpoints left member-2",
		len(got), got[lastOld].at.Sub(got[firstNew].at).Round(100*time.Millisecond), gone.Sub(got[firstWithdrawn].at).Round(100*time.Millisecond))
}

// The examples of docs/services.md, each applied to a namespace of its own.
func TestServicesExamples(t *testing.T) {
	expect := map[string]func(t *testing.T, ns string){
		"01-export-all.yaml": func(t *testing.T, ns string) {
			g := NewWithT(t)
			g.Eventually(func(g Gomega) {
				ips := readyPodIPs(g, member1, ns)
				g.Expect(ips).To(HaveLen(2))
				for _, c := range []string{member1, member2} {
					si := serviceImportOn(g, c, ns, "web")
					g.Expect(si).NotTo(BeNil(), "on %s", c)
					g.Expect(si.Status.Clusters).To(ConsistOf(mcsv1beta1.ClusterStatus{Cluster: member1}, mcsv1beta1.ClusterStatus{Cluster: member2}))
					// member-2 runs no controllers: its copy has no endpoints.
					g.Expect(importedEndpoints(g, c, ns)).To(Equal(map[string][]string{member1: ips}), "on %s", c)
				}
			}).Should(Succeed())
		},
		"02-exported-labels.yaml": func(t *testing.T, ns string) {
			g := NewWithT(t)
			g.Eventually(func(g Gomega) {
				for _, c := range []string{member1, member2} {
					si := serviceImportOn(g, c, ns, "api")
					g.Expect(si).NotTo(BeNil(), "on %s", c)
					g.Expect(si.Labels).To(HaveKeyWithValue("tier", "backend"))
					g.Expect(si.Annotations).To(HaveKeyWithValue("example.com/owner", "team-api"))
					g.Expect(si.Spec.Ports).To(ConsistOf(And(HaveField("Name", "grpc"), HaveField("Port", int32(9090)), HaveField("AppProtocol", HaveValue(Equal("grpc"))))))
				}
			}).Should(Succeed())
		},
	}
	applyExamples(t, "services", 2, expect)
}

// A member that does not serve the MCS API (no CRDs) says so on each of its
// imports, so that a move waits for it no more than for a missing namespace.
func TestImporterWithoutMCS(t *testing.T) {
	extraMembers(t)
	g := NewWithT(t)
	ctx := t.Context()
	s := scheme.Agent()
	g.Expect(apiextensionsv1.AddToScheme(s)).To(Succeed())
	cp, err := testenv.StartEmpty("no-mcs", s)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = cp.Stop() })
	crds, err := config.MemberCRDs()
	g.Expect(err).NotTo(HaveOccurred())
	for _, crd := range crds {
		if crd.Spec.Group != mcsv1beta1.GroupName {
			g.Expect(cp.Client.Create(ctx, crd)).To(Succeed())
		}
	}
	name, hubCfg := joinAux(t, "no-mcs", time.Hour)
	startAgent(t, agent.Options{ClusterName: name, ClusterSet: auxSet, Hub: hubCfg, Member: cp.Config, LeaseDuration: 2 * time.Second})

	ns := rolloutNamespace(t)
	createOn(t, member3, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	shareNamespace(t, ns, member3, name)
	createOn(t, member3, webService(ns))
	exportOn(t, member3, ns, "web")
	g.Eventually(func(g Gomega) {
		im := &servicesv1alpha1.ImportedService{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: names.ClusterNamespace(name), Name: ns + ".web"}, im)).To(Succeed())
		ready := meta.FindStatusCondition(im.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady))
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(servicesv1alpha1.ReasonNotServed))
		g.Expect(im.Status.ObservedGeneration).To(Equal(im.Generation))
	}).Should(Succeed())
}

// A cluster shares a namespace's Services only where the hub places that
// namespace: an export from a namespace the hub places nothing of on the
// cluster is refused (NamespaceNotPlaced) and imported nowhere; once the hub
// places the namespace there, it is exported, and imported only on the
// clusters the hub places the namespace on. Only the EndpointSlice
// controller's slices are exported: a slice anyone else wrote on the member
// (any address) never reaches an importer. On earlier mains the export was
// taken at once, imported on every member of the set, with the forged slice.
func TestServicesOnlyWhereTheHubPlaces(t *testing.T) {
	extraMembers(t)
	g := NewWithT(t)
	ctx := t.Context()
	ns := rolloutNamespace(t)
	createOn(t, member3, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	webOn(t, member3, ns)
	// 192.0.2.0/24 is documentation space: an address nothing is sent to.
	createOn(t, member3, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-forged", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "someone-else"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"192.0.2.10"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	})
	exportOn(t, member3, ns, "web")
	g.Eventually(func(g Gomega) {
		c := exportCondition(g, member3, ns, "web", mcsv1beta1.ServiceExportConditionValid)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(servicesv1alpha1.ReasonNamespaceNotPlaced))
	}).Should(Succeed())
	imported := func(cluster string) error {
		return hubCP.Client.Get(ctx, client.ObjectKey{Namespace: names.ClusterNamespace(cluster), Name: ns + ".web"}, &servicesv1alpha1.ImportedService{})
	}
	for _, c := range []string{member1, member2, member3} {
		g.Expect(apierrors.IsNotFound(imported(c))).To(BeTrue(), "no import on %s", c)
	}

	shareNamespace(t, ns, member3, member2)
	g.Eventually(func(g Gomega) {
		ips := readyPodIPs(g, member3, ns)
		g.Expect(ips).To(HaveLen(1))
		g.Expect(importedEndpoints(g, member2, ns)).To(Equal(map[string][]string{member3: ips}), "the EndpointSlice controller's addresses alone")
		g.Expect(exportCondition(g, member3, ns, "web", mcsv1beta1.ServiceExportConditionValid).Status).To(Equal(metav1.ConditionTrue))
	}).Should(Succeed())
	g.Expect(apierrors.IsNotFound(imported(member1))).To(BeTrue(), "member-1, where the hub places nothing of the namespace, imports nothing")
}

// Removing a namespace's ClusterSetBinding revokes at once a Placement that
// exports Services: its Works go without waiting to move traffic to clusters
// it may no longer use. On earlier mains they stayed until the progress
// deadline (600 s).
func TestRevocationDoesNotWaitForTraffic(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	_, deploy, _ := webObjects(ns)
	deploy.Spec.Replicas = ptr.To[int32](1)
	g.Expect(hubCP.Client.Create(ctx, deploy)).To(Succeed())
	g.Expect(hubCP.Client.Create(ctx, webService(ns))).To(Succeed())
	p := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns}, Spec: placementv1alpha1.PlacementSpec{
		ResourceSelectors: []placementv1alpha1.ResourceSelector{{Group: "apps", Version: "v1", Kind: "Deployment", Name: "web"}, {Version: "v1", Kind: "Service", Name: "web"}},
		Scheduling:        placementv1alpha1.Scheduling{ClusterNames: []string{member1}},
		Services:          &placementv1alpha1.PlacedServices{Export: placementv1alpha1.ServiceExportAll},
	}}
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(exportCondition(g, member1, ns, "web", mcsv1beta1.ServiceExportConditionValid).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(readyPodIPs(g, member1, ns)).To(HaveLen(1))
	}).Should(Succeed())
	work := workOf(g, p, member1)

	g.Expect(hubCP.Client.Delete(ctx, newBinding(ns, placementv1alpha1.DefaultClusterSet))).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := hubCP.Client.Get(ctx, client.ObjectKeyFromObject(work), &workv1alpha1.Work{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Work is gone: %v", err)
		err = members[member1].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &corev1.Service{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the member's copy is gone: %v", err)
	}).Should(Succeed())
}

// KEP-1645's namespace sameness, as the upstream conformance suite uses it: the
// namespace made on each member by hand (nothing of it on the hub), a Service
// exported there. By default the export is refused (NamespaceNotPlaced, and
// the message names the label that changes it); with the cluster set labelled
// services.lodestar.dev/namespace-sameness=ClusterSet it is imported on every
// member, with its endpoints; a second export with other ports is in
// conflict; unexporting both removes the imports.
func TestServicesInNamespaceSameness(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := "same-" + strings.ToLower(rand.String(6))
	for _, c := range []string{member1, member2} {
		createOn(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	webOn(t, member1, ns)
	exportOn(t, member1, ns, "web")
	g.Eventually(func(g Gomega) {
		c := exportCondition(g, member1, ns, "web", mcsv1beta1.ServiceExportConditionValid)
		g.Expect(c.Reason).To(Equal(servicesv1alpha1.ReasonNamespaceNotPlaced))
		g.Expect(c.Message).To(ContainSubstring(servicesv1alpha1.NamespaceSamenessLabel + "=" + servicesv1alpha1.NamespaceSamenessClusterSet))
	}).Should(Succeed())

	setSameness(t, placementv1alpha1.DefaultClusterSet)
	g.Eventually(func(g Gomega) {
		g.Expect(exportCondition(g, member1, ns, "web", mcsv1beta1.ServiceExportConditionValid).Status).To(Equal(metav1.ConditionTrue))
		ips := readyPodIPs(g, member1, ns)
		g.Expect(ips).To(HaveLen(1))
		for _, c := range []string{member1, member2} {
			si := serviceImportOn(g, c, ns, "web")
			g.Expect(si).NotTo(BeNil(), "a ServiceImport on %s", c)
			g.Expect(si.Spec.Type).To(Equal(mcsv1beta1.ClusterSetIP))
			g.Expect(si.Status.Clusters).To(ConsistOf(mcsv1beta1.ClusterStatus{Cluster: member1}))
			g.Expect(importedEndpoints(g, c, ns)).To(Equal(map[string][]string{member1: ips}))
		}
	}).Should(Succeed())

	// member-2 exports the name with another port: a conflict, the older's
	// port kept.
	other := webService(ns, corev1.ServicePort{Name: "http", Port: 81, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP})
	createOn(t, member2, other)
	se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	createOn(t, member2, se)
	g.Eventually(func(g Gomega) {
		for _, c := range []string{member1, member2} {
			g.Expect(exportCondition(g, c, ns, "web", mcsv1beta1.ServiceExportConditionConflict).Status).To(Equal(metav1.ConditionTrue), "on %s", c)
			si := serviceImportOn(g, c, ns, "web")
			g.Expect(si).NotTo(BeNil())
			g.Expect(si.Spec.Ports).To(ConsistOf(HaveField("Port", int32(80))))
			g.Expect(si.Status.Clusters).To(ConsistOf(mcsv1beta1.ClusterStatus{Cluster: member1}, mcsv1beta1.ClusterStatus{Cluster: member2}))
		}
	}).Should(Succeed())

	// Unexported on both: the imports go from every member.
	g.Expect(members[member2].Client.Delete(ctx, se)).To(Succeed())
	g.Expect(members[member1].Client.Delete(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		for _, c := range []string{member1, member2} {
			g.Expect(serviceImportOn(g, c, ns, "web")).To(BeNil(), "no ServiceImport on %s", c)
		}
	}).Should(Succeed())
}

// setSameness labels the cluster set set for namespace sameness until the
// test ends.
func setSameness(t *testing.T, set string) {
	t.Helper()
	label := func(value any) error {
		return hubCP.Client.Patch(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: set}},
			client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, servicesv1alpha1.NamespaceSamenessLabel, value))))
	}
	NewWithT(t).Expect(label(`"` + servicesv1alpha1.NamespaceSamenessClusterSet + `"`)).To(Succeed())
	t.Cleanup(func() {
		if err := label("null"); err != nil {
			t.Errorf("taking namespace sameness off %s: %v", set, err)
		}
	})
}
