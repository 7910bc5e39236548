package services_test

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
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	servicesv1alpha1 "github.com/lodestar-dev/lodestar/api/services/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/agent/services"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/scheme"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// The package's hub and member API servers, and the member's cluster
// namespace on the hub.
var hubCP, memberCP *testenv.ControlPlane

const clusterName = "services-test"

var clusterNS = names.ClusterNamespace(clusterName)

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	testenv.SetGomegaDefaults()
	os.Exit(run(m))
}

// run starts a hub and a member, and the agent's exporter and importer as the
// agent runs them: the hub cache scoped to the cluster's namespace, the
// member's own cache.
func run(m *testing.M) int {
	var err error
	if hubCP, err = testenv.StartHub(scheme.Hub()); err != nil {
		return fail(err)
	}
	defer func() { _ = hubCP.Stop() }()
	if memberCP, err = testenv.StartMember(clusterName, scheme.Agent()); err != nil {
		return fail(err)
	}
	defer func() { _ = memberCP.Stop() }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := hubCP.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clusterNS}}); err != nil {
		return fail(err)
	}
	mgr, err := ctrl.NewManager(hubCP.Config, ctrl.Options{Scheme: scheme.Agent(), Metrics: metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0", Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{clusterNS: {}}}})
	if err != nil {
		return fail(err)
	}
	member, err := cluster.New(memberCP.Config, func(o *cluster.Options) { o.Scheme = scheme.Agent() })
	if err != nil {
		return fail(err)
	}
	lease := &services.ExportsLease{Hub: mgr.GetClient(), Namespace: clusterNS, Cluster: clusterName}
	for _, add := range []func() error{
		func() error { return mgr.Add(member) },
		func() error { return mgr.Add(lease) },
		func() error {
			return (&services.Exporter{Hub: mgr.GetClient(), Member: member.GetClient(), MemberCache: member.GetCache(), Namespace: clusterNS, Lease: lease}).SetupWithManager(mgr)
		},
		func() error {
			return (&services.Importer{Hub: mgr.GetClient(), Member: member.GetClient(), MemberCache: member.GetCache(), Namespace: clusterNS}).SetupWithManager(mgr)
		},
	} {
		if err := add(); err != nil {
			return fail(err)
		}
	}
	go func() { _ = mgr.Start(ctx) }()
	return m.Run()
}

func fail(err error) int {
	_, _ = os.Stderr.WriteString(err.Error() + "\n")
	return 1
}

// A ServiceExport on the member is reported to the hub with its Service's
// ports and its ready endpoints; the hub's answer comes back as the
// ServiceExport's conditions.
func TestExportIsReportedAndAnswered(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	mc := memberCP.Client
	g.Expect(mc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}})).To(Succeed())
	g.Expect(mc.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}})).To(Succeed())
	g.Expect(mc.Create(ctx, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop",
		Labels: map[string]string{discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: services.EndpointSliceController}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8080)), Protocol: ptr.To(corev1.ProtocolTCP)}}})).To(Succeed())
	g.Expect(mc.Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"}})).To(Succeed())

	report := &servicesv1alpha1.ExportedService{}
	g.Eventually(func(g Gomega) {
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: clusterNS, Name: names.ServiceObject("shop", "web")}, report)).To(Succeed())
		g.Expect(report.Spec.Service).NotTo(BeNil())
		g.Expect(report.Spec.Service.Ports).To(ConsistOf(HaveField("Port", int32(80))))
		g.Expect(report.Spec.Slices).To(ConsistOf(HaveField("Endpoints", ConsistOf(HaveField("Addresses", ConsistOf("10.1.0.7"))))))
	}).Should(Succeed())

	// The hub answers (as its service import controller does).
	answer := report.DeepCopy()
	answer.Status.ObservedGeneration = report.Generation
	answer.Status.Conditions = []metav1.Condition{
		{Type: string(mcsv1beta1.ServiceExportConditionValid), Status: metav1.ConditionTrue, Reason: string(mcsv1beta1.ServiceExportReasonValid), Message: "valid", LastTransitionTime: metav1.Now()},
		{Type: string(mcsv1beta1.ServiceExportConditionReady), Status: metav1.ConditionTrue, Reason: string(mcsv1beta1.ServiceExportReasonReady), Message: "imported", LastTransitionTime: metav1.Now()},
	}
	g.Expect(hubCP.Client.Status().Update(ctx, answer)).To(Succeed())
	g.Eventually(func(g Gomega) {
		export := &mcsv1beta1.ServiceExport{}
		g.Expect(mc.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "web"}, export)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(export.Status.Conditions, string(mcsv1beta1.ServiceExportConditionValid))).To(BeTrue())
		g.Expect(meta.IsStatusConditionTrue(export.Status.Conditions, string(mcsv1beta1.ServiceExportConditionReady))).To(BeTrue())
	}).Should(Succeed())

	// The export withdrawn: its report goes.
	g.Expect(mc.Delete(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"}})).To(Succeed())
	g.Eventually(func() error {
		return hubCP.Client.Get(ctx, client.ObjectKeyFromObject(report), &servicesv1alpha1.ExportedService{})
	}).Should(MatchError(ContainSubstring("not found")))
}

// An ImportedService of a namespace the hub places here is served on the
// member (a ServiceImport and its EndpointSlices) and reported Ready; one of a
// namespace the hub places nothing of is not served, and says why.
func TestImportIsServedWhereTheHubPlaces(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	mc := memberCP.Client
	for _, ns := range []string{"billing", "elsewhere"} {
		g.Expect(mc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	g.Expect(hubCP.Client.Create(ctx, &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: names.Work("billing", "app"), Namespace: clusterNS,
		Labels: map[string]string{placementv1alpha1.PlacementNamespaceLabel: "billing", placementv1alpha1.PlacementNameLabel: "app"}}})).To(Succeed())
	imported := func(ns string) *servicesv1alpha1.ImportedService {
		return &servicesv1alpha1.ImportedService{ObjectMeta: metav1.ObjectMeta{Name: names.ServiceObject(ns, "db"), Namespace: clusterNS},
			Spec: servicesv1alpha1.ImportedServiceSpec{Namespace: ns, Name: "db",
				Service:  servicesv1alpha1.ServiceProperties{Type: mcsv1beta1.ClusterSetIP, Ports: []mcsv1beta1.ServicePort{{Name: "pg", Port: 5432, Protocol: corev1.ProtocolTCP}}},
				Clusters: []string{"other"},
				Sources: []servicesv1alpha1.SourceSlices{{Cluster: "other", Slices: []servicesv1alpha1.Slice{{AddressType: discoveryv1.AddressTypeIPv4,
					Ports:     []discoveryv1.EndpointPort{{Name: ptr.To("pg"), Port: ptr.To(int32(5432)), Protocol: ptr.To(corev1.ProtocolTCP)}},
					Endpoints: []servicesv1alpha1.Endpoint{{Addresses: []string{"10.2.0.9"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}}}}}}}
	}
	for _, ns := range []string{"billing", "elsewhere"} {
		g.Expect(hubCP.Client.Create(ctx, imported(ns))).To(Succeed())
	}
	ready := func(g Gomega, ns string) *metav1.Condition {
		im := &servicesv1alpha1.ImportedService{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: clusterNS, Name: names.ServiceObject(ns, "db")}, im)).To(Succeed())
		g.Expect(im.Status.ObservedGeneration).To(Equal(im.Generation))
		c := meta.FindStatusCondition(im.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady))
		g.Expect(c).NotTo(BeNil())
		return c
	}
	g.Eventually(func(g Gomega) {
		g.Expect(ready(g, "billing").Status).To(Equal(metav1.ConditionTrue))
		si := &mcsv1beta1.ServiceImport{}
		g.Expect(mc.Get(ctx, client.ObjectKey{Namespace: "billing", Name: "db"}, si)).To(Succeed())
		g.Expect(si.Spec.Ports).To(ConsistOf(HaveField("Port", int32(5432))))
		g.Expect(meta.IsStatusConditionTrue(si.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady))).To(BeTrue())
		slices := &discoveryv1.EndpointSliceList{}
		g.Expect(mc.List(ctx, slices, client.InNamespace("billing"))).To(Succeed())
		g.Expect(slices.Items).To(ContainElement(HaveField("Endpoints", ContainElement(HaveField("Addresses", ConsistOf("10.2.0.9"))))))

		c := ready(g, "elsewhere")
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(servicesv1alpha1.ReasonNamespaceNotPlaced))
	}).Should(Succeed())
	g.Consistently(func() error {
		return mc.Get(ctx, client.ObjectKey{Namespace: "elsewhere", Name: "db"}, &mcsv1beta1.ServiceImport{})
	}).WithTimeout(2*time.Second).Should(HaveOccurred(), "nothing served where the hub places nothing")
}

// A Service whose ready endpoints are more than an export may carry
// (servicesv1alpha1.MaxEndpointBytes) is reported without them and said
// invalid on its ServiceExport, ExportTooLarge; an export beside it is
// reported as before; once the endpoints fit again they are reported.
func TestAnExportTooLargeIsSaidAndFailsAlone(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	mc := memberCP.Client
	g.Expect(mc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "crowd"}})).To(Succeed())
	port := []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}
	slice := func(service string, n, first int) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", service, n), Namespace: "crowd",
			Labels: map[string]string{discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: services.EndpointSliceController}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8080)), Protocol: ptr.To(corev1.ProtocolTCP)}}}
		for i := range first {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", n, i/256, i%256)},
				Hostname: ptr.To(fmt.Sprintf("pod-%056d", i)), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
		}
		return s
	}
	// 10 slices of 1 000 endpoints, about 1.3 MiB reported; and a small
	// Service beside it.
	const slices = 10
	for _, svc := range []string{"huge", "small"} {
		g.Expect(mc.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: svc, Namespace: "crowd"}, Spec: corev1.ServiceSpec{Ports: port}})).To(Succeed())
	}
	for n := range slices {
		g.Expect(mc.Create(ctx, slice("huge", n, 1000))).To(Succeed())
	}
	g.Expect(mc.Create(ctx, slice("small", 0, 3))).To(Succeed())
	for _, svc := range []string{"huge", "small"} {
		g.Expect(mc.Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: svc, Namespace: "crowd"}})).To(Succeed())
	}

	reported := func(g Gomega, svc string) *servicesv1alpha1.ExportedService {
		r := &servicesv1alpha1.ExportedService{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: clusterNS, Name: names.ServiceObject("crowd", svc)}, r)).To(Succeed())
		return r
	}
	g.Eventually(func(g Gomega) {
		huge := reported(g, "huge")
		g.Expect(huge.Spec.Invalid).NotTo(BeNil())
		g.Expect(huge.Spec.Invalid.Reason).To(Equal(servicesv1alpha1.ReasonExportTooLarge))
		g.Expect(huge.Spec.Invalid.Message).To(ContainSubstring("10000 ready endpoints"))
		g.Expect(huge.Spec.Slices).To(BeEmpty())
		g.Expect(huge.Spec.Service).NotTo(BeNil())

		small := reported(g, "small")
		g.Expect(small.Spec.Invalid).To(BeNil())
		g.Expect(small.Spec.Slices).To(ConsistOf(HaveField("Endpoints", HaveLen(3))))

		export := &mcsv1beta1.ServiceExport{}
		g.Expect(mc.Get(ctx, client.ObjectKey{Namespace: "crowd", Name: "huge"}, export)).To(Succeed())
		valid := meta.FindStatusCondition(export.Status.Conditions, string(mcsv1beta1.ServiceExportConditionValid))
		g.Expect(valid).NotTo(BeNil())
		g.Expect(valid.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(valid.Reason).To(Equal(servicesv1alpha1.ReasonExportTooLarge))
	}).Should(Succeed())

	// Scaled down to 2 000 endpoints: they fit, and are reported.
	for n := 2; n < slices; n++ {
		g.Expect(mc.Delete(ctx, slice("huge", n, 0))).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		huge := reported(g, "huge")
		g.Expect(huge.Spec.Invalid).To(BeNil())
		g.Expect(huge.Spec.Slices).To(HaveLen(2))
		g.Expect(huge.Spec.Slices).To(HaveEach(HaveField("Endpoints", HaveLen(1000))))
	}).Should(Succeed())
}
