package main

import (
	"bytes"
	"encoding/json"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"
	"sigs.k8s.io/yaml"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/fleet"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/patch"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// fleetMember is a joined cluster whose status is written as the agent and the
// cluster health controller write it.
type fleetMember struct {
	name, set string
	labels    map[string]string
	healthy   metav1.ConditionStatus
	props     map[string]string
	taints    string
	heartbeat bool
	works     int
}

// joinMember joins the cluster and writes its status, Lease and Works.
func joinMember(t *testing.T, m fleetMember) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	args := []string{"join", m.name, "--cluster-set", m.set, "--cluster-id", "id-" + m.name, "--output", t.TempDir() + "/agent.kubeconfig"}
	for k, v := range m.labels {
		args = append(args, "--label", k+"="+v)
	}
	_, _, err := kubectlLodestar(t, args...)
	g.Expect(err).NotTo(HaveOccurred())

	p := &cpv1alpha1.ClusterProfile{}
	key := client.ObjectKey{Namespace: m.set, Name: m.name}
	g.Expect(hubCP.Client.Get(ctx, key, p)).To(Succeed())
	if m.taints != "" {
		p.Annotations = map[string]string{placementv1alpha1.TaintsAnnotation: m.taints}
		g.Expect(hubCP.Client.Update(ctx, p)).To(Succeed())
	}
	p.Status.Version.Kubernetes = "v1.36.3"
	meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: placementv1alpha1.ControlPlaneHealthyCondition, Status: m.healthy, Reason: "Checked", Message: "the member's /readyz says so"})
	reachable := metav1.ConditionTrue
	if !m.heartbeat {
		reachable = metav1.ConditionFalse
	}
	meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: placementv1alpha1.AgentReachableCondition, Status: reachable, Reason: "Lease"})
	for k, v := range m.props {
		p.Status.Properties = append(p.Status.Properties, cpv1alpha1.Property{Name: k, Value: v})
	}
	g.Expect(hubCP.Client.Status().Update(ctx, p)).To(Succeed())

	ns := names.ClusterNamespace(m.name)
	if m.heartbeat {
		g.Expect(hubCP.Client.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: placementv1alpha1.AgentLeaseName, Namespace: ns},
			Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: time.Now().Add(-5 * time.Second)}, LeaseDurationSeconds: ptr.To[int32](40)}})).To(Succeed())
	}
	for i := range m.works {
		g.Expect(hubCP.Client.Create(ctx, &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: "w" + string(rune('a'+i)), Namespace: ns}})).To(Succeed())
	}
}

// columns maps a table's header to each row's cells, by the row's first cell.
func columns(g Gomega, out string) map[string]map[string]string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	g.Expect(len(lines)).To(BeNumerically(">=", 1), out)
	header := regexp.MustCompile(`\S+`).FindAllStringIndex(lines[0], -1)
	rows := map[string]map[string]string{}
	for _, line := range lines[1:] {
		row := map[string]string{}
		for i, h := range header {
			end := len(line)
			if i+1 < len(header) {
				end = min(header[i+1][0], len(line))
			}
			if h[0] < len(line) {
				row[lines[0][h[0]:h[1]]] = strings.TrimSpace(line[h[0]:end])
			}
		}
		rows[row["NAME"]] = row
	}
	return rows
}

func TestGetAndDescribeClusters(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	set := "set-" + rand.String(5)
	g.Expect(hubCP.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: set}})).To(Succeed())
	joinMember(t, fleetMember{name: set + "-a", set: set, labels: map[string]string{"region": "eu", "env": "prod"}, healthy: metav1.ConditionTrue, heartbeat: true, works: 3,
		props: map[string]string{placementv1alpha1.PropertyNodeCount: "3", placementv1alpha1.PropertyCPUFree: "3500m", placementv1alpha1.PropertyMemoryFree: "12Gi",
			placementv1alpha1.PropertyCPUAllocatable: "6", placementv1alpha1.PropertyMemoryAllocatable: "24Gi", "cluster.clusterset.k8s.io": "uid-of-a"}})
	joinMember(t, fleetMember{name: set + "-b", set: set, labels: map[string]string{"region": "us", "env": "dev"}, healthy: metav1.ConditionFalse,
		taints: `[{"key":"placement.lodestar.dev/drain","effect":"NoExecute","timeAdded":"2026-11-01T00:00:00Z"},{"key":"gpu","value":"true","effect":"NoSchedule"}]`})

	out, _, err := kubectlLodestar(t, "get", "clusters", "--cluster-set", set, "-L", "region")
	g.Expect(err).NotTo(HaveOccurred())
	rows := columns(g, out)
	g.Expect(rows).To(HaveLen(2))
	a, b := rows[set+"-a"], rows[set+"-b"]
	g.Expect(a).To(And(HaveKeyWithValue("SET", set), HaveKeyWithValue("HEALTHY", "True"), HaveKeyWithValue("REACHABLE", "True"),
		HaveKeyWithValue("TAINTS", "-"), HaveKeyWithValue("VERSION", "v1.36.3"), HaveKeyWithValue("NODES", "3"), HaveKeyWithValue("CPU-FREE", "3500m"),
		HaveKeyWithValue("MEMORY-FREE", "12Gi"), HaveKeyWithValue("WORKS", "3"), HaveKeyWithValue("REGION", "eu")))
	g.Expect(a["HEARTBEAT"]).To(MatchRegexp(`^\d+s$`))
	g.Expect(b).To(And(HaveKeyWithValue("HEALTHY", "False"), HaveKeyWithValue("REACHABLE", "False"), HaveKeyWithValue("HEARTBEAT", "-"),
		HaveKeyWithValue("TAINTS", "placement.lodestar.dev/drain:NoExecute,gpu=true:NoSchedule"), HaveKeyWithValue("NODES", "-"),
		HaveKeyWithValue("WORKS", "0"), HaveKeyWithValue("REGION", "us")))

	// Clusters by name, as kubectl get takes them; a typo is told what it meant.
	out, _, err = kubectlLodestar(t, "get", "clusters", set+"-b", "--cluster-set", set)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(columns(g, out)).To(And(HaveLen(1), HaveKey(set+"-b")))
	_, _, err = kubectlLodestar(t, "get", "clusters", set+"-c", "--cluster-set", set)
	g.Expect(err).To(MatchError("no cluster " + set + "-c in cluster set " + set + ": did you mean " + set + "-a?"))

	// A set that does not exist is an error, not an empty table.
	_, _, err = kubectlLodestar(t, "get", "clusters", "--cluster-set", "nosuch-"+set)
	g.Expect(err).To(MatchError(ContainSubstring(`cluster set "nosuch-` + set + `" does not exist`)))
	_, _, err = kubectlLodestar(t, "get", "clusters", "--cluster-set", "default")
	g.Expect(err).To(MatchError(ContainSubstring("namespace default is not a cluster set")))

	// A label selector, wide columns, and every set.
	out, _, err = kubectlLodestar(t, "get", "clusters", "--cluster-set", set, "-l", "env=prod", "-o", "wide")
	g.Expect(err).NotTo(HaveOccurred())
	rows = columns(g, out)
	g.Expect(rows).To(HaveLen(1))
	g.Expect(rows[set+"-a"]).To(And(HaveKeyWithValue("CPU-ALLOCATABLE", "6"), HaveKeyWithValue("MEMORY-ALLOCATABLE", "24Gi"), HaveKeyWithValue("LABELS", ContainSubstring("env=prod,"))))
	g.Expect(rows[set+"-a"]["LABELS"]).To(ContainSubstring(",region=eu"))
	out, _, err = kubectlLodestar(t, "get", "clusters", "-A")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(columns(g, out)).To(And(HaveKey(set+"-a"), HaveKey(set+"-b")))

	// Printers: json parses to a ClusterProfileList, yaml too, name prints kinds.
	out, _, err = kubectlLodestar(t, "get", "clusters", "--cluster-set", set, "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	list := &cpv1alpha1.ClusterProfileList{}
	g.Expect(json.Unmarshal([]byte(out), list)).To(Succeed())
	g.Expect(list.Kind).To(Equal("ClusterProfileList"))
	g.Expect(list.Items).To(HaveLen(2))
	g.Expect(list.Items[0].Status.Properties).NotTo(BeEmpty())
	out, _, err = kubectlLodestar(t, "get", "clusters", "--cluster-set", set, "-o", "yaml")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(yaml.Unmarshal([]byte(out), list)).To(Succeed())
	g.Expect(list.Items).To(HaveLen(2))
	out, _, err = kubectlLodestar(t, "get", "clusters", "--cluster-set", set, "-o", "name")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.Fields(out)).To(Equal([]string{"clusterprofile.multicluster.x-k8s.io/" + set + "-a", "clusterprofile.multicluster.x-k8s.io/" + set + "-b"}))
	out, _, err = kubectlLodestar(t, "get", "clusters", "--cluster-set", set, "-o", "jsonpath={.items[*].metadata.name}")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal(set + "-a " + set + "-b"))
	_, _, err = kubectlLodestar(t, "get", "clusters", "-o", "table")
	g.Expect(err).To(HaveOccurred())

	// describe: the Placements choosing it, conditions, properties, events.
	tenant := "describe-" + rand.String(5)
	g.Expect(hubCP.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}})).To(Succeed())
	web := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: tenant},
		Spec: placementv1alpha1.PlacementSpec{ResourceSelectors: []placementv1alpha1.ResourceSelector{{Group: "apps", Version: "v1", Kind: "Deployment"}}, Scheduling: placementv1alpha1.Scheduling{ClusterSelector: &metav1.LabelSelector{}}}}
	g.Expect(hubCP.Client.Create(ctx, web)).To(Succeed())
	pd := &cpv1alpha1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: tenant, Labels: map[string]string{cpv1alpha1.PlacementKeyLabel: "web"}},
		Decisions: []cpv1alpha1.ClusterDecision{{ClusterProfileRef: cpv1alpha1.ClusterProfileReference{Name: set + "-a", Namespace: set}}}}
	g.Expect(controllerutil.SetControllerReference(web, pd, hubCP.Client.Scheme())).To(Succeed())
	g.Expect(hubCP.Client.Create(ctx, pd)).To(Succeed())
	profile := &cpv1alpha1.ClusterProfile{}
	g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: set, Name: set + "-a"}, profile)).To(Succeed())
	g.Expect(hubCP.Client.Create(ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "ev", Namespace: set},
		EventTime: metav1.NowMicro(), ReportingController: "lodestar-hub", ReportingInstance: "test", Action: "Check", Type: corev1.EventTypeWarning, Reason: "AgentUnreachable",
		Note: "the agent's lease expired", Regarding: corev1.ObjectReference{Kind: "ClusterProfile", Namespace: set, Name: profile.Name, UID: profile.UID}})).To(Succeed())

	out, _, err = kubectlLodestar(t, "describe", "cluster", set+"-a", "--cluster-set", set)
	g.Expect(err).NotTo(HaveOccurred())
	for _, want := range []string{
		`Name:\s+` + set + `-a`, `Cluster ID:\s+uid-of-a`, `Labels:\s+env=prod\n(\s+\S+\n)*\s+region=eu\n`, `Taints:\s+-\n`, `Kubernetes version:\s+v1.36.3`,
		`Heartbeat:\s+\d+s ago`, `Works:\s+3 \(in namespace lodestar-cluster-` + set + `-a\)`, `Chosen by:\s+` + tenant + `/web`,
		`ControlPlaneHealthy\s+True\s+Checked\s+\S+ ago\s+the member's /readyz says so`, `nodes.lodestar.dev:\s+3`,
		`Access providers:\s+<none>`, `Warning\s+AgentUnreachable\s+\S+ ago\s+the agent's lease expired`,
	} {
		g.Expect(out).To(MatchRegexp(want))
	}
	out, _, err = kubectlLodestar(t, "describe", "cluster", set+"-b", "--cluster-set", set)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(MatchRegexp(`Chosen by:\s+<none>`))
	g.Expect(out).To(MatchRegexp(`Events:\s+<none>`))
	g.Expect(out).To(MatchRegexp(`Taints:\s+placement.lodestar.dev/drain:NoExecute,gpu=true:NoSchedule`))
	_, _, err = kubectlLodestar(t, "describe", "cluster", "nowhere", "--cluster-set", set)
	g.Expect(err).To(MatchError(ContainSubstring("cluster nowhere not found in cluster set " + set)))
}

func TestWhy(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	set := "why-" + rand.String(5)
	g.Expect(hubCP.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: set}})).To(Succeed())
	joinMember(t, fleetMember{name: set + "-big", set: set, labels: map[string]string{"env": "prod"}, healthy: metav1.ConditionTrue, heartbeat: true,
		props: map[string]string{placementv1alpha1.PropertyCPUFree: "8", placementv1alpha1.PropertyMemoryFree: "32Gi"}})
	joinMember(t, fleetMember{name: set + "-small", set: set, labels: map[string]string{"env": "prod"}, healthy: metav1.ConditionTrue, heartbeat: true,
		props: map[string]string{placementv1alpha1.PropertyCPUFree: "500m", placementv1alpha1.PropertyMemoryFree: "32Gi"}})
	joinMember(t, fleetMember{name: set + "-gpu", set: set, labels: map[string]string{"env": "prod"}, healthy: metav1.ConditionTrue, heartbeat: true,
		props:  map[string]string{placementv1alpha1.PropertyCPUFree: "8", placementv1alpha1.PropertyMemoryFree: "32Gi"},
		taints: `[{"key":"gpu","value":"true","effect":"NoSchedule"}]`})
	joinMember(t, fleetMember{name: set + "-dev", set: set, labels: map[string]string{"env": "dev"}, healthy: metav1.ConditionTrue, heartbeat: true})
	other := "elsewhere-" + rand.String(5)
	g.Expect(hubCP.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}})).To(Succeed())
	joinMember(t, fleetMember{name: other + "-x", set: other, healthy: metav1.ConditionTrue, heartbeat: true})

	ns := "tenant-" + rand.String(5)
	g.Expect(hubCP.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	g.Expect(fleet.BindClusterSet(ctx, hubCP.Client, ns, set)).To(Succeed())
	// The binding's Bound condition, as the hub's binding controller writes it.
	b := &placementv1alpha1.ClusterSetBinding{}
	g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: set}, b)).To(Succeed())
	meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: placementv1alpha1.BoundCondition, Status: metav1.ConditionTrue, Reason: "ClusterSetBound"})
	g.Expect(hubCP.Client.Status().Update(ctx, b)).To(Succeed())

	web := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{{Group: "apps", Version: "v1", Kind: "Deployment"}},
			Scheduling:        placementv1alpha1.Scheduling{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}, RequiredCapacity: &placementv1alpha1.Capacity{CPU: "2"}, NumberOfClusters: ptr.To[int32](1)},
		}}
	g.Expect(hubCP.Client.Create(ctx, web)).To(Succeed())
	// The current decision names big, as the scheduler would have written it.
	pd := &cpv1alpha1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: ns, Labels: map[string]string{cpv1alpha1.PlacementKeyLabel: "web"}},
		Decisions: []cpv1alpha1.ClusterDecision{{ClusterProfileRef: cpv1alpha1.ClusterProfileReference{Name: set + "-big", Namespace: set}}}}
	g.Expect(controllerutil.SetControllerReference(web, pd, hubCP.Client.Scheme())).To(Succeed())
	g.Expect(hubCP.Client.Create(ctx, pd)).To(Succeed())

	why := func(cluster string) whyReport {
		t.Helper()
		out, _, err := kubectlLodestar(t, "why", "web", "-n", ns, "--cluster", cluster, "-o", "json")
		g.Expect(err).NotTo(HaveOccurred())
		var r whyReport
		g.Expect(json.Unmarshal([]byte(out), &r)).To(Succeed(), out)
		return r
	}
	verdict := func(r whyReport, filter string) []string {
		var out []string
		for _, v := range r.Verdicts {
			if v.Filter == filter {
				out = append(out, v.Detail)
			}
		}
		return out
	}

	// Its share of a divided workload, as the status aggregator wrote it.
	web.Status.Clusters = []placementv1alpha1.ClusterStatus{{Name: set + "-big", Applied: metav1.ConditionTrue,
		Shares: []placementv1alpha1.ShareStatus{{Object: "Deployment/api", Replicas: 6, Target: 6, Reason: "room for 12 more pods, steady"}}}}
	g.Expect(hubCP.Client.Status().Update(ctx, web)).To(Succeed())

	r := why(set + "-big")
	g.Expect(r.Chosen).To(BeTrue())
	g.Expect(r.Decided).To(BeTrue())
	g.Expect(r.ClusterSet).To(Equal(set))
	g.Expect(r.Shares).To(ConsistOf(HaveField("Reason", "room for 12 more pods, steady")))
	out, _, err := kubectlLodestar(t, "why", "web", "-n", ns, "--cluster", set+"-big")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(MatchRegexp(`Deployment/api\s+6\s+6\s+room for 12 more pods, steady`))

	r = why(set + "-small")
	g.Expect(r.Chosen).To(BeFalse())
	g.Expect(r.Reason).To(Equal("InsufficientCapacity"))
	g.Expect(verdict(r, "cpu")).To(ConsistOf("cpu free 500m < 2 asked"))
	g.Expect(r.Decided).To(BeFalse())

	r = why(set + "-gpu")
	g.Expect(r.Reason).To(Equal("Tainted"))
	g.Expect(verdict(r, "taint")).To(ConsistOf("gpu=true:NoSchedule not tolerated"))
	g.Expect(verdict(r, "cpu")).To(ConsistOf("cpu free 8 >= 2 asked"))

	r = why(set + "-dev")
	g.Expect(r.Reason).To(Equal("LabelsMismatch"))
	g.Expect(verdict(r, "clusterSelector")).To(ConsistOf(HavePrefix(`selector "env=prod" against labels "env=dev,`)))

	r = why(other + "-x")
	g.Expect(r.Reason).To(Equal(placementv1alpha1.ExclusionNotInClusterSets))
	g.Expect(r.Detail).To(ContainSubstring("bound to namespace " + ns + " (" + set + ")"))

	// Tolerating the taint, gpu passes every filter, and the ranking keeps big
	// (chosen before): gpu is not picked.
	web.Spec.Scheduling.Tolerations = []placementv1alpha1.Toleration{{Key: "gpu", Operator: placementv1alpha1.TolerationExists}}
	g.Expect(hubCP.Client.Update(ctx, web)).To(Succeed())
	r = why(set + "-gpu")
	g.Expect(r.Chosen).To(BeFalse())
	g.Expect(r.Reason).To(Equal("NotPicked"))
	g.Expect(r.Detail).To(ContainSubstring("numberOfClusters 1 picks 1 of 2 eligible"))
	g.Expect(verdict(r, "taint")).To(ConsistOf("gpu=true:NoSchedule tolerated"))

	// The text form.
	out, _, err = kubectlLodestar(t, "why", "web", "-n", ns, "--cluster", set+"-small")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("Cluster " + set + "-small for placement " + ns + "/web: not chosen (InsufficientCapacity)"))
	g.Expect(out).To(MatchRegexp(`cpu\s+FAIL InsufficientCapacity\s+cpu free 500m < 2 asked`))
	g.Expect(out).To(MatchRegexp(`clusterSelector\s+pass\s+selector "env=prod"`))
	g.Expect(out).To(ContainSubstring("current decisions do not name " + set + "-small"))

	// A tenant (lodestar:tenant only) may not read the clusters: why reads the
	// scheduler's explanation in the Placement's status instead.
	st := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}}
	st.Status.Scheduling = &placementv1alpha1.SchedulingStatus{Eligible: ptr.To[int32](2),
		Excluded: []placementv1alpha1.Exclusion{{Reason: "LabelsMismatch", Count: 1, Clusters: []string{set + "-dev"}}},
		Clusters: []placementv1alpha1.ExcludedCluster{{Name: set + "-dev", Reason: "LabelsMismatch", Verdicts: []placementv1alpha1.FilterVerdict{
			{Filter: "clusterSelector", Reason: "LabelsMismatch", Detail: `selector "env=prod" against labels "env=dev"`}}}}}
	g.Expect(patch.ApplyStatus(ctx, hubCP.Client, st, "lodestar-scheduler")).To(Succeed())
	g.Expect(hubCP.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: ns}})).To(Succeed())
	g.Expect(hubCP.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "lodestar:tenant"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "reader", Namespace: ns}}})).To(Succeed())
	cfg, err := testenv.ServiceAccountConfig(ctx, hubCP.Config, ns, "reader", time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	tenant := filepath.Join(t.TempDir(), "tenant.kubeconfig")
	g.Expect(testenv.WriteKubeconfig(cfg, "tenant", tenant)).To(Succeed())
	asTenant := func(cluster string) (string, error) {
		var stdout, stderr bytes.Buffer
		err := run(ctx, []string{"why", "web", "-n", ns, "--cluster", cluster, "--kubeconfig", tenant}, &stdout, &stderr)
		return stdout.String(), err
	}
	out, err = asTenant(set + "-dev")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("not chosen (LabelsMismatch)"))
	g.Expect(out).To(ContainSubstring("from the Placement's status"))
	g.Expect(out).To(MatchRegexp(`clusterSelector\s+FAIL LabelsMismatch\s+selector "env=prod" against labels "env=dev"`))
	out, err = asTenant(set + "-big")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring(": chosen"))
	out, err = asTenant(set + "-small")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("is not one of them"))

	_, _, err = kubectlLodestar(t, "why", "web", "-n", ns)
	g.Expect(err).To(MatchError(ContainSubstring("why needs --cluster")))
	_, _, err = kubectlLodestar(t, "why", "nothing", "-n", ns, "--cluster", set+"-big")
	g.Expect(err).To(MatchError(ContainSubstring("not found")))
}

// TestHelpAndCompletion walks the command tree: every verb has help with
// examples and kubectl's connection flags; completion scripts and the
// completion of names from the hub work.
func TestHelpAndCompletion(t *testing.T) {
	g := NewWithT(t)
	root := newRootCommand(genericiooptions.IOStreams{Out: io.Discard, ErrOut: io.Discard})
	root.InitDefaultCompletionCmd()
	var paths [][]string
	for _, c := range root.Commands() {
		if c.Name() == "help" {
			continue
		}
		if !c.HasSubCommands() || c.Name() == "completion" {
			paths = append(paths, []string{c.Name()})
		}
		for _, sub := range c.Commands() {
			if c.Name() != "completion" {
				paths = append(paths, []string{c.Name(), sub.Name()})
			}
		}
	}
	g.Expect(len(paths)).To(BeNumerically(">=", 16))
	for _, p := range paths {
		out, _, err := kubectlLodestar(t, append(p, "--help")...)
		g.Expect(err).NotTo(HaveOccurred(), "%v", p)
		if p[0] != "completion" {
			g.Expect(out).To(ContainSubstring("Examples:"), "%v", p)
		}
		g.Expect(out).To(And(ContainSubstring("--kubeconfig"), ContainSubstring("--context"), ContainSubstring("--as "), ContainSubstring("-n, --namespace")), "%v", p)
	}

	for _, shell := range []string{"bash", "zsh"} {
		out, _, err := kubectlLodestar(t, "completion", shell)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(ContainSubstring("kubectl-lodestar"))
	}

	_, _, err := join(t, "complete-me-1")
	g.Expect(err).NotTo(HaveOccurred())
	_, _, err = join(t, "complete-me-2")
	g.Expect(err).NotTo(HaveOccurred())
	complete := func(args ...string) string {
		var stdout, stderr bytes.Buffer
		g.Expect(run(t.Context(), append([]string{"__complete", "--kubeconfig", hubKubeconfig}, args...), &stdout, &stderr)).To(Succeed())
		return stdout.String()
	}
	out := complete("cordon", "complete-")
	g.Expect(strings.Fields(out)).To(ContainElements("complete-me-1", "complete-me-2", ":4"))
	out = complete("render", "web", "--cluster", "complete-me-")
	g.Expect(strings.Fields(out)).To(ContainElements("complete-me-1", "complete-me-2"))

	// The connection flags are kubectl's: impersonation is refused by the hub.
	_, _, err = kubectlLodestar(t, "get", "clusters", "--as", "nobody")
	g.Expect(err).To(MatchError(ContainSubstring("forbidden")))
}
