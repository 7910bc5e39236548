package integration

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// A FleetQuota counts what the namespace runs over the fleet (replicas times
// copies); a revision that would take it past the quota is not rolled out
// and the Placement says which resource, used and asked; raised, it rolls
// out: the docs' examples.
func TestFleetQuota(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	placementsGoAtEnd(t, ns)
	files, doc := examples(t, "quota", 3)
	for _, file := range files[:2] {
		for _, obj := range exampleObjects(t, file, doc, ns) {
			g.Expect(hubCP.Client.Create(ctx, obj)).To(Succeed(), "%s %s", obj.GetKind(), obj.GetName())
		}
	}
	key := client.ObjectKey{Namespace: ns, Name: "web"}
	replicasOn := func(g Gomega, cluster string) int32 {
		d := &appsv1.Deployment{}
		g.Expect(members[cluster].Client.Get(ctx, key, d)).To(Succeed())
		return ptr.Deref(d.Spec.Replicas, 1)
	}
	quota := func(g Gomega) *placementv1alpha1.FleetQuota {
		fq := &placementv1alpha1.FleetQuota{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "team"}, fq)).To(Succeed())
		return fq
	}
	q := resource.MustParse
	g.Eventually(func(g Gomega) {
		g.Expect(replicasOn(g, member1)).To(BeEquivalentTo(1))
		g.Expect(replicasOn(g, member2)).To(BeEquivalentTo(1))
		c := placementCondition(g, t, key, placementv1alpha1.QuotaAdmittedCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
		fq := quota(g)
		g.Expect(fq.Status.Used).To(HaveLen(5))
		for name, want := range map[string]resource.Quantity{"requests.cpu": q("1"), "pods": q("2"), "clusters": q("2"), "limits.memory": q("1Gi"), "requests.nvidia.com/gpu": q("0")} {
			got := fq.Status.Used[name]
			g.Expect(got.Cmp(want)).To(BeZero(), "%s used: %s", name, got.String())
		}
		g.Expect(fq.Status.Clusters).To(HaveLen(2))
		g.Expect(meta.IsStatusConditionTrue(fq.Status.Conditions, placementv1alpha1.ReadyCondition)).To(BeTrue())
	}).Should(Succeed())

	// 3 replicas on each of two clusters: 3 CPUs and 6 pods, past the quota.
	g.Eventually(func() error {
		return updateOnHub(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}, func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](3) })
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		c := placementCondition(g, t, key, placementv1alpha1.QuotaAdmittedCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonQuotaExceeded))
		g.Expect(c.Message).To(ContainSubstring("revision 2 is not rolled out"))
		g.Expect(c.Message).To(ContainSubstring("FleetQuota team: pods: 0 used by the other Placements it bounds and 6 asked, more than the 4 allowed; requests.cpu: 0 used by the other Placements it bounds and 3 asked, more than the 2 allowed"))
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(replicasOn(g, member1)).To(BeEquivalentTo(1), "revision 1 stays")
		g.Expect(replicasOn(g, member2)).To(BeEquivalentTo(1), "revision 1 stays")
	}, 3*time.Second, 500*time.Millisecond).Should(Succeed())
	// Revision 1 runs everywhere, but the Placement is not done: READY
	// (Available) False and Reconciling True with the quota's reason, so
	// kstatus (helm --wait, Flux, Argo CD) reads it as in progress.
	g.Eventually(func(g Gomega) {
		p := &unstructured.Unstructured{}
		p.SetAPIVersion(placementv1alpha1.GroupVersion.String())
		p.SetKind("Placement")
		g.Expect(hubCP.Client.Get(ctx, key, p)).To(Succeed())
		res, err := kstatus.Compute(p)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Status).To(Equal(kstatus.InProgressStatus), res.Message)
		available := placementCondition(g, t, key, placementv1alpha1.AvailableCondition)
		g.Expect(available.Status).To(Equal(metav1.ConditionFalse), available.Message)
		g.Expect(available.Reason).To(Equal(placementv1alpha1.ReasonWaitingForQuota))
		g.Expect(available.Message).To(ContainSubstring("revision 2 is not rolled out"))
		reconciling := placementCondition(g, t, key, "Reconciling")
		g.Expect(reconciling.Status).To(Equal(metav1.ConditionTrue), reconciling.Message)
		g.Expect(reconciling.Reason).To(Equal(placementv1alpha1.ReasonQuotaExceeded))
	}).Should(Succeed())

	// The quota raised: revision 2 rolls out.
	g.Eventually(func() error {
		return updateOnHub(&placementv1alpha1.FleetQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team"}}, func(fq *placementv1alpha1.FleetQuota) {
			fq.Spec.Hard["requests.cpu"], fq.Spec.Hard["pods"] = q("4"), q("8")
		})
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(replicasOn(g, member1)).To(BeEquivalentTo(3))
		g.Expect(replicasOn(g, member2)).To(BeEquivalentTo(3))
		g.Expect(placementCondition(g, t, key, placementv1alpha1.QuotaAdmittedCondition).Status).To(Equal(metav1.ConditionTrue))
		used := quota(g).Status.Used["requests.cpu"]
		g.Expect(used.Cmp(q("3"))).To(BeZero(), "used %s", used.String())
	}).Should(Succeed())

	// 5 replicas (10 pods) do not fit; the quota deleted, they roll out and
	// the condition goes.
	g.Eventually(func() error {
		return updateOnHub(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}, func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](5) })
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		c := placementCondition(g, t, key, placementv1alpha1.QuotaAdmittedCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Message).To(ContainSubstring("revision 3 is not rolled out"))
	}).Should(Succeed())
	g.Expect(replicasOn(g, member1)).To(BeEquivalentTo(3))
	out, err := hubTool(t, testenv.EventuallyTimeout, filepath.Join(os.Getenv("LODESTAR_BIN"), "kubectl-lodestar"), "describe", "quota", "team", "-n", ns)
	g.Expect(hubCP.Client.Delete(ctx, &placementv1alpha1.FleetQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team"}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(replicasOn(g, member1)).To(BeEquivalentTo(5))
		g.Expect(replicasOn(g, member2)).To(BeEquivalentTo(5))
		p := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, key, p)).To(Succeed())
		g.Expect(meta.FindStatusCondition(p.Status.Conditions, placementv1alpha1.QuotaAdmittedCondition)).To(BeNil())
	}).Should(Succeed())

	// kubectl lodestar describe quota (read before the deletion): hard, used,
	// and the use per cluster.
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`requests\.cpu\s+3\s+4`))
	g.Expect(out).To(MatchRegexp(`pods\s+6\s+8`))
	g.Expect(out).To(MatchRegexp(`member-1\s+.*1500m`))
	g.Expect(out).To(MatchRegexp(`member-2\s+.*1500m`))
}

// Widening an admitted Placement (more clusters, the same revision) is
// admitted again before any Work grows: the cluster added gets nothing while
// the quota does not fit it, the clusters that run it keep it, and the
// Placement says why; the quota raised, the cluster added gets its copy.
func TestWideningIsAdmittedAgain(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	placementsGoAtEnd(t, ns)
	createYAML(t, ns, `apiVersion: placement.lodestar.dev/v1alpha1
kind: FleetQuota
metadata: {name: team}
spec:
  hard: {pods: "1", requests.cpu: 500m}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: nginx:1.27, resources: {requests: {cpu: 500m}}}
---
apiVersion: placement.lodestar.dev/v1alpha1
kind: Placement
metadata: {name: web}
spec:
  resourceSelectors:
  - {group: apps, version: v1, kind: Deployment, name: web}
  scheduling:
    clusterNames: [member-1]`)
	key := client.ObjectKey{Namespace: ns, Name: "web"}
	on := func(cluster string) error { return members[cluster].Client.Get(ctx, key, &appsv1.Deployment{}) }
	g.Eventually(func(g Gomega) {
		g.Expect(on(member1)).To(Succeed())
		g.Expect(placementCondition(g, t, key, placementv1alpha1.QuotaAdmittedCondition).Status).To(Equal(metav1.ConditionTrue))
	}).Should(Succeed())

	g.Eventually(func() error {
		return updateOnHub(&placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}, func(p *placementv1alpha1.Placement) {
			p.Spec.Scheduling.ClusterNames = []string{member1, member2}
		})
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		c := placementCondition(g, t, key, placementv1alpha1.QuotaAdmittedCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Message).To(And(ContainSubstring("the clusters chosen changed since revision 1 was admitted"),
			ContainSubstring("FleetQuota team: pods: 0 used by the other Placements it bounds and 2 asked, more than the 1 allowed")))
	}).Should(Succeed())
	g.Consistently(func() bool { return apierrors.IsNotFound(on(member2)) }, 3*time.Second, 500*time.Millisecond).Should(BeTrue(), "the cluster added gets nothing")
	g.Expect(on(member1)).To(Succeed(), "the cluster that runs it keeps it")

	g.Eventually(func() error {
		return updateOnHub(&placementv1alpha1.FleetQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team"}}, func(fq *placementv1alpha1.FleetQuota) {
			fq.Spec.Hard["pods"], fq.Spec.Hard["requests.cpu"] = resource.MustParse("2"), resource.MustParse("1")
		})
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(on(member2)).To(Succeed())
		g.Expect(placementCondition(g, t, key, placementv1alpha1.QuotaAdmittedCondition).Status).To(Equal(metav1.ConditionTrue))
	}).Should(Succeed())
}

// What a quota cannot count it refuses, unless told to ignore it: a custom
// kind without an interpretation that gives its replicas waits, with a
// message; set uncounted: Ignore, it is placed. A DaemonSet counts a pod on
// each node of each cluster, as the clusters report their nodes.
func TestQuotaCountsDaemonSetsAndRefusesWhatItCannotCount(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	placementsGoAtEnd(t, ns)
	group := "g" + strings.ToLower(rand.String(6)) + ".example.com"
	createWidgetCRD(t, hubCP.Client, group, apiextensionsv1.NamespaceScoped, "v1")
	createYAML(t, ns, `apiVersion: placement.lodestar.dev/v1alpha1
kind: FleetQuota
metadata: {name: team}
spec:
  hard: {pods: "100"}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers:
      - {name: agent, image: busybox:1.36}
---
apiVersion: placement.lodestar.dev/v1alpha1
kind: Placement
metadata: {name: agent}
spec:
  resourceSelectors:
  - {group: apps, version: v1, kind: DaemonSet, name: agent}
  scheduling:
    clusterNames: [member-1, member-2]`)
	var nodes int64
	g.Eventually(func(g Gomega) {
		nodes = 0
		for _, cluster := range []string{member1, member2} {
			profile := &cpv1alpha1.ClusterProfile{}
			g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: placementv1alpha1.DefaultClusterSet, Name: cluster}, profile)).To(Succeed())
			for _, p := range profile.Status.Properties {
				if p.Name == placementv1alpha1.PropertyNodeCount {
					n, err := strconv.ParseInt(p.Value, 10, 64)
					g.Expect(err).NotTo(HaveOccurred())
					nodes += n
				}
			}
		}
		g.Expect(nodes).To(BeNumerically(">", 0), "the full member reports its node")
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		fq := &placementv1alpha1.FleetQuota{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "team"}, fq)).To(Succeed())
		pods := fq.Status.Used["pods"]
		g.Expect(pods.Value()).To(Equal(nodes), "a pod on each node of each cluster")
	}).Should(Succeed())

	createYAML(t, ns, `apiVersion: `+group+`/v1
kind: Widget
metadata: {name: w}
spec: {size: 3}
---
apiVersion: placement.lodestar.dev/v1alpha1
kind: Placement
metadata: {name: widgets}
spec:
  resourceSelectors:
  - {group: `+group+`, version: v1, kind: Widget}
  scheduling:
    clusterNames: [member-1]`)
	key := client.ObjectKey{Namespace: ns, Name: "widgets"}
	g.Eventually(func(g Gomega) {
		c := placementCondition(g, t, key, placementv1alpha1.QuotaAdmittedCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Message).To(And(ContainSubstring("revision 1 is not rolled out"), ContainSubstring("FleetQuota team: 1 workloads it cannot count"),
			ContainSubstring("set spec.uncounted: Ignore")))
	}).Should(Succeed())
	works := &workv1alpha1.WorkList{}
	g.Expect(hubCP.Client.List(ctx, works, client.MatchingLabels{placementv1alpha1.PlacementNamespaceLabel: ns,
		placementv1alpha1.PlacementNameLabel: "widgets"})).To(Succeed())
	g.Expect(works.Items).To(BeEmpty(), "nothing of it is placed")
	g.Eventually(func() error {
		return updateOnHub(&placementv1alpha1.FleetQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team"}}, func(fq *placementv1alpha1.FleetQuota) {
			fq.Spec.Uncounted = placementv1alpha1.UncountedIgnore
		})
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(placementCondition(g, t, key, placementv1alpha1.QuotaAdmittedCondition).Status).To(Equal(metav1.ConditionTrue))
	}).Should(Succeed())
}

// A ClusterFleetQuota bounds several namespaces together: the docs'
// example over two namespaces labelled team=payments, each placing the web
// app (2 pods, 3 allowed): the second waits until the first goes.
func TestClusterFleetQuota(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	files, doc := examples(t, "quota", 3)
	for _, obj := range exampleObjects(t, files[2], doc, "") {
		obj.SetNamespace("")
		g.Expect(hubCP.Client.Create(ctx, obj)).To(Succeed())
		t.Cleanup(func() { _ = hubCP.Client.Delete(context.Background(), obj) })
	}
	var keys []client.ObjectKey
	for range 2 {
		ns := newNamespace(t)
		placementsGoAtEnd(t, ns)
		g.Eventually(func() error {
			return updateOnHub(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, func(n *corev1.Namespace) {
				if n.Labels == nil {
					n.Labels = map[string]string{}
				}
				n.Labels["team"] = "payments"
			})
		}).Should(Succeed())
		for _, obj := range exampleObjects(t, files[1], doc, ns) {
			g.Expect(hubCP.Client.Create(ctx, obj)).To(Succeed(), "%s %s", obj.GetKind(), obj.GetName())
		}
		keys = append(keys, client.ObjectKey{Namespace: ns, Name: "web"})
		// The first is admitted before the second is made: oldest first.
		g.Eventually(func(g Gomega) {
			c := placementCondition(g, t, keys[0], placementv1alpha1.QuotaAdmittedCondition)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
		}).Should(Succeed())
	}
	g.Eventually(func(g Gomega) {
		c := placementCondition(g, t, keys[1], placementv1alpha1.QuotaAdmittedCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Message).To(ContainSubstring("ClusterFleetQuota payments: pods: 2 used by the other Placements it bounds and 2 asked, more than the 3 allowed"))
		cq := &placementv1alpha1.ClusterFleetQuota{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Name: "payments"}, cq)).To(Succeed())
		pods := cq.Status.Used["pods"]
		g.Expect(pods.Value()).To(BeEquivalentTo(2))
	}).Should(Succeed())
	g.Expect(members[member1].Client.Get(ctx, keys[1], &appsv1.Deployment{})).NotTo(Succeed(), "nothing of the second is placed")

	deletePlacement(t, &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: keys[0].Namespace, Name: "web"}})
	g.Eventually(func(g Gomega) {
		g.Expect(placementCondition(g, t, keys[1], placementv1alpha1.QuotaAdmittedCondition).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(members[member1].Client.Get(ctx, keys[1], &appsv1.Deployment{})).To(Succeed())
	}).Should(Succeed())
}
