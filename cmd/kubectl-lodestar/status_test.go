package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	servicesv1alpha1 "github.com/lodestar-dev/lodestar/api/services/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/fleet"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/scheme"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// tenantKubeconfig writes a kubeconfig of a ServiceAccount of ns that may only
// read the Placements of ns, and returns its path.
func tenantKubeconfig(t *testing.T, ns string) string {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	g.Expect(hubCP.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: ns}})).To(Succeed())
	g.Expect(hubCP.Client.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "placement-reader", Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{placementv1alpha1.GroupVersion.Group}, Resources: []string{"placements"}, Verbs: []string{"get"}}}})).To(Succeed())
	g.Expect(hubCP.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "placement-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "tenant", Namespace: ns}}})).To(Succeed())
	cfg, err := testenv.ServiceAccountConfig(ctx, hubCP.Config, ns, "tenant", time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(t.TempDir(), "tenant.kubeconfig")
	g.Expect(testenv.WriteKubeconfig(cfg, "tenant", path)).To(Succeed())
	return path
}

func TestStatusReadsOnlyThePlacement(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := "status-" + rand.String(5)
	g.Expect(hubCP.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	g.Expect(fleet.BindClusterSet(ctx, hubCP.Client, ns, placementv1alpha1.DefaultClusterSet)).To(Succeed())
	p := &placementv1alpha1.Placement{
		ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: ns},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{{Group: "apps", Version: "v1", Kind: "Deployment"}},
			Scheduling:        placementv1alpha1.Scheduling{ClusterSelector: &metav1.LabelSelector{}},
		},
	}
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	// The status as the hub's controllers write it (none run in this package).
	p.Status = placementv1alpha1.PlacementStatus{
		SelectedClusters: ptr.To[int32](2), AppliedClusters: ptr.To[int32](2), AvailableClusters: ptr.To[int32](1),
		Conditions: []metav1.Condition{{Type: placementv1alpha1.AvailableCondition, Status: metav1.ConditionFalse, Reason: placementv1alpha1.ReasonNotAvailable,
			Message: "1 of 2 clusters available; not yet: edge-2", LastTransitionTime: metav1.Now()}},
		Clusters: []placementv1alpha1.ClusterStatus{
			{Name: "edge-1", Applied: metav1.ConditionTrue, Available: metav1.ConditionTrue, Objects: []placementv1alpha1.ObjectStatus{
				{Group: "apps", Kind: "Deployment", Namespace: ns, Name: "api", State: placementv1alpha1.ObjectAvailable, Feedback: &placementv1alpha1.JSON{Raw: []byte(`{"ready":3}`)}}},
				Shares: []placementv1alpha1.ShareStatus{{Object: "Deployment/api", Replicas: 4, Target: 3,
					Reason: "weight 1 of 3; keeps 4 until the increases elsewhere are Available"}}},
			{Name: "edge-2", Applied: metav1.ConditionTrue, Available: metav1.ConditionFalse,
				Reasons: []string{"PersistentVolumeClaim " + ns + "/uploads: the claim is Pending"},
				Objects: []placementv1alpha1.ObjectStatus{{Kind: "PersistentVolumeClaim", Namespace: ns, Name: "uploads", State: placementv1alpha1.ObjectProgressing, Message: "the claim is Pending"}},
				Claims: []placementv1alpha1.ClaimStatus{{Name: "uploads", Workload: "PersistentVolumeClaim " + ns + "/uploads", Phase: "Pending", StorageClass: "fast",
					AccessModes: []string{"ReadWriteOnce"}, Requested: "10Gi", Reason: `storageclass.storage.k8s.io "fast" not found`}}},
		},
		Summaries: []placementv1alpha1.SummaryStatus{{Name: "ready", Value: "3", Count: ptr.To[int32](1), Stale: ptr.To[int32](1)}},
	}
	g.Expect(hubCP.Client.Status().Update(ctx, p)).To(Succeed())

	tenant := tenantKubeconfig(t, ns)
	var stdout, stderr bytes.Buffer
	g.Expect(run(ctx, []string{"status", "shop", "-n", ns, "--kubeconfig", tenant}, &stdout, &stderr)).To(Succeed(), stderr.String())
	out := stdout.String()
	g.Expect(out).To(ContainSubstring("Placement " + ns + "/shop: 2 clusters selected, 2 applied, 1 available"))
	g.Expect(out).To(MatchRegexp(`edge-2\s+True\s+False\s+PersistentVolumeClaim ` + ns + `/uploads: the claim is Pending`))
	g.Expect(out).To(MatchRegexp(`edge-1\s+Deployment ` + ns + `/api\s+Available\s+\{"ready":3\}`))
	g.Expect(out).To(MatchRegexp(`ready\s+3\s+1\s+1`))
	g.Expect(out).To(MatchRegexp(`edge-1\s+Deployment/api\s+4\s+3\s+weight 1 of 3; keeps 4 until the increases elsewhere are Available`))
	g.Expect(out).To(MatchRegexp(`edge-2\s+uploads\s+PersistentVolumeClaim ` + ns + `/uploads\s+Pending\s+fast\s+ReadWriteOnce\s+10Gi\s+-\s+-\s+-\s+storageclass.storage.k8s.io "fast" not found`))

	stdout.Reset()
	g.Expect(run(ctx, []string{"status", "shop", "-n", ns, "-o", "json", "--cluster", "edge-2", "--kubeconfig", tenant}, &stdout, &stderr)).To(Succeed(), stderr.String())
	var report statusReport
	g.Expect(json.Unmarshal(stdout.Bytes(), &report)).To(Succeed())
	g.Expect(report.Clusters).To(ConsistOf(HaveField("Name", "edge-2")))
	g.Expect(report.Summaries).To(ConsistOf(HaveField("Value", "3")))

	// The tenant's identity cannot read the Works in the clusters' namespaces,
	// and status did not need it to.
	cfg, err := clientcmd.BuildConfigFromFlags("", tenant)
	g.Expect(err).NotTo(HaveOccurred())
	tc, err := client.New(cfg, client.Options{Scheme: scheme.Hub()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tc.List(ctx, &workv1alpha1.WorkList{}, client.InNamespace(names.ClusterNamespace("edge-2")))).To(MatchError(ContainSubstring("forbidden")))

	g.Expect(run(ctx, []string{"status", "shop", "-n", ns, "--cluster", "nowhere", "--kubeconfig", tenant}, &stdout, &stderr)).
		To(MatchError(ContainSubstring("cluster nowhere is not listed")))
}

// status shows the namespace's exported Services to an identity that may
// read them: exporters with their ready endpoints, importers, withdrawn
// sources and conflicts; a tenant who may not gets a note, not an error.
func TestStatusShowsExportedServices(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := "svc-" + rand.String(5)
	g.Expect(hubCP.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	g.Expect(hubCP.Client.Create(ctx, &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: ns},
		Spec: placementv1alpha1.PlacementSpec{ResourceSelectors: []placementv1alpha1.ResourceSelector{{Version: "v1", Kind: "Service"}}}})).To(Succeed())
	ready := func(n int) []servicesv1alpha1.Slice {
		s := servicesv1alpha1.Slice{AddressType: discoveryv1.AddressTypeIPv4}
		for i := range n {
			s.Endpoints = append(s.Endpoints, servicesv1alpha1.Endpoint{Addresses: []string{fmt.Sprintf("10.0.0.%d", i+1)}})
		}
		return []servicesv1alpha1.Slice{s}
	}
	props := &servicesv1alpha1.ServiceProperties{Type: mcsv1beta1.ClusterSetIP}
	for _, e := range []struct {
		cluster   string
		endpoints int
		conflict  *metav1.Condition
	}{
		{"east-" + ns, 2, nil},
		{"west-" + ns, 3, &metav1.Condition{Type: "Conflict", Status: metav1.ConditionTrue, Reason: "PortConflict", Message: "port http is 8080/TCP, not 80/TCP"}},
	} {
		cns := names.ClusterNamespace(e.cluster)
		g.Expect(hubCP.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cns}})).To(Succeed())
		exp := &servicesv1alpha1.ExportedService{ObjectMeta: metav1.ObjectMeta{Namespace: cns, Name: ns + ".web"},
			Spec: servicesv1alpha1.ExportedServiceSpec{Namespace: ns, Name: "web", ExportCreated: metav1.Now(), Service: props, Slices: ready(e.endpoints)}}
		g.Expect(hubCP.Client.Create(ctx, exp)).To(Succeed())
		exp.Status.Conditions = []metav1.Condition{{Type: "Valid", Status: metav1.ConditionTrue, Reason: "Valid", LastTransitionTime: metav1.Now()}}
		if e.conflict != nil {
			e.conflict.LastTransitionTime = metav1.Now()
			exp.Status.Conditions = append(exp.Status.Conditions, *e.conflict)
		}
		g.Expect(hubCP.Client.Status().Update(ctx, exp)).To(Succeed())
		im := &servicesv1alpha1.ImportedService{ObjectMeta: metav1.ObjectMeta{Namespace: cns, Name: ns + ".web"},
			Spec: servicesv1alpha1.ImportedServiceSpec{Namespace: ns, Name: "web", Service: *props, Clusters: []string{"east-" + ns, "west-" + ns},
				Sources: []servicesv1alpha1.SourceSlices{{Cluster: "east-" + ns, Slices: ready(2)}}}}
		g.Expect(hubCP.Client.Create(ctx, im)).To(Succeed())
	}
	out, errOut, err := kubectlLodestar(t, "status", "shop", "-n", ns)
	g.Expect(err).NotTo(HaveOccurred(), errOut)
	g.Expect(out).To(MatchRegexp(`web\s+ClusterSetIP\s+east-` + ns + ` \(2\), west-` + ns + ` \(3\)\s+2 \(0\)\s+west-` + ns + `\s+west-` + ns + `: PortConflict: port http is 8080/TCP, not 80/TCP`))

	g.Expect(fleet.BindClusterSet(ctx, hubCP.Client, ns, placementv1alpha1.DefaultClusterSet)).To(Succeed())
	var stdout, stderr bytes.Buffer
	g.Expect(run(ctx, []string{"status", "shop", "-n", ns, "--kubeconfig", tenantKubeconfig(t, ns)}, &stdout, &stderr)).To(Succeed(), stderr.String())
	g.Expect(stdout.String()).To(ContainSubstring("exported services: not shown"))
}

// The objects table is printed only when a cluster lists objects (those not
// available or reporting feedback): no header alone.
func TestStatusPrintsNoEmptyObjectsTable(t *testing.T) {
	g := NewWithT(t)
	var out bytes.Buffer
	r := statusReport{Namespace: "shop", Name: "web", Clusters: []placementv1alpha1.ClusterStatus{{Name: "a", Applied: metav1.ConditionTrue}}}
	printStatus(&out, r)
	g.Expect(out.String()).NotTo(ContainSubstring("MESSAGE / FEEDBACK"))
	r.Clusters[0].Objects = []placementv1alpha1.ObjectStatus{{Kind: "Deployment", Namespace: "shop", Name: "web", State: placementv1alpha1.ObjectAvailable}}
	out.Reset()
	printStatus(&out, r)
	g.Expect(out.String()).To(MatchRegexp(`a\s+Deployment shop/web\s+Available`))
}

// A CEL error (its message spans lines, with the source and a caret) is
// printed on one line of the table, and once: the rows that repeat it say so.
func TestStatusPrintsAMultiLineErrorOnce(t *testing.T) {
	g := NewWithT(t)
	celErr := "override size on member-1: ERROR: <input>:1:9: Syntax error: mismatched input '?'\n | self.a ? ? 1 : 2\n | ........^"
	r := statusReport{Namespace: "shop", Name: "web",
		Conditions: []metav1.Condition{{Type: "WorkSynchronized", Status: metav1.ConditionFalse, Reason: "OverrideFailed", Message: celErr}},
		Clusters: []placementv1alpha1.ClusterStatus{
			{Name: "member-1", Applied: metav1.ConditionFalse, Message: celErr},
			{Name: "member-2", Applied: metav1.ConditionFalse, Message: celErr},
		}}
	var out bytes.Buffer
	printStatus(&out, r)
	g.Expect(out.String()).NotTo(ContainSubstring("^"), "no caret line")
	g.Expect(out.String()).NotTo(ContainSubstring("| self.a"), "no source line")
	g.Expect(strings.Count(out.String(), "Syntax error")).To(Equal(1), out.String())
	g.Expect(out.String()).To(MatchRegexp(`member-1\s+False\s+Unknown\s+\(the message above\)`))
}
