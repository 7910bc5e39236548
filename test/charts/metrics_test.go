package charts

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/fleet"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// documentedSeries reads docs/metrics.md's table: series name to processes.
func documentedSeries(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "docs", "metrics.md"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	row := regexp.MustCompile("^\\| `([a-z_]+)` \\| (hub|agent) \\|")
	out := map[string][]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		if m := row.FindStringSubmatch(s.Text()); m != nil {
			out[m[1]] = append(out[m[1]], m[2])
		}
	}
	return out
}

// freeAddress is a loopback address with a port nothing listens on.
func freeAddress(t *testing.T) string {
	t.Helper()
	addr, err := testenv.FreeAddress()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return addr
}

// runBinary runs one of bin/'s binaries until the test ends, with env added to
// the test's environment, its output in a file printed when the test fails; it
// returns the process.
func runBinary(t *testing.T, name string, env []string, args ...string) *os.Process {
	t.Helper()
	return startBinary(t, name, env, args...).process
}

// running is a process startBinary started.
type running struct {
	process *os.Process
	exited  chan struct{}
	logPath string
}

// startBinary is runBinary, telling also when the process has exited.
func startBinary(t *testing.T, name string, env []string, args ...string) *running {
	t.Helper()
	g := NewWithT(t)
	bin, err := testenv.Binary(name)
	g.Expect(err).NotTo(HaveOccurred())
	logPath := filepath.Join(t.TempDir(), name+".log")
	logFile, err := os.Create(logPath)
	g.Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	g.Expect(cmd.Start()).To(Succeed())
	r := &running{process: cmd.Process, exited: make(chan struct{}), logPath: logPath}
	go func() { _ = cmd.Wait(); close(r.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-r.exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-r.exited
		}
		_ = logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s's log:\n%s", name, tail(string(b), 6000))
		}
	})
	return r
}

// serving starts a process by start with a free loopback address for it to
// serve on, and waits until something answers there. A process that exits
// first because another took the port meanwhile is started again on another.
func serving(t *testing.T, start func(addr string) *running) (addr string, r *running) {
	t.Helper()
	g := NewWithT(t)
	for range 5 {
		addr = freeAddress(t)
		r = start(addr)
		up := false
		g.Eventually(func() bool {
			select {
			case <-r.exited:
				return true
			default:
			}
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				_ = c.Close()
				up = true
			}
			return up
		}).WithTimeout(time.Minute).Should(BeTrue(), "the process neither served on %s nor exited", addr)
		if up {
			return addr, r
		}
		b, _ := os.ReadFile(r.logPath)
		g.Expect(string(b)).To(ContainSubstring("address already in use"), "the process exited before it served on %s", addr)
		t.Logf("%s was taken before the process bound it; starting it on another port", addr)
	}
	t.Fatalf("five ports taken in turn before the process could bind one")
	return "", nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// binaryFleet is a hub and a member with the charts installed, the hub manager
// and the agent running as bin/'s binaries, as the charts' ServiceAccounts.
type binaryFleet struct {
	hub, member              *testenv.ControlPlane
	hubMetrics, agentMetrics string
	hubProcess               *os.Process
}

// runFleet starts a binaryFleet whose member has joined as edge-1, on a hub
// started by startHub.
func runFleet(t *testing.T, startHub startFunc) binaryFleet {
	g := NewWithT(t)
	hubCP, memberCP, dir, debugAddr := chartedFleet(t, startHub, testenv.StartEmpty)
	memberKubeconfig := filepath.Join(dir, "member")

	hubSA := filepath.Join(dir, "hub-sa")
	g.Expect(testenv.WriteKubeconfig(serviceAccountConfig(t, hubCP.Config, "lodestar-hub"), "hub", hubSA)).To(Succeed())
	f := binaryFleet{hub: hubCP, member: memberCP}
	var hub *running
	f.hubMetrics, hub = serving(t, func(addr string) *running {
		return startBinary(t, "lodestar-hub", nil, "--kubeconfig", hubSA, "--metrics-bind-address", addr, "--health-probe-bind-address", "0",
			"--debug-bind-address", debugAddr, "--debug-namespace", releaseNamespace)
	})
	f.hubProcess = hub.process

	joined, err := fleet.Join(t.Context(), hubCP.Config, hubCP.Client, fleet.JoinOptions{Name: "edge-1", TokenTTL: time.Hour})
	g.Expect(err).NotTo(HaveOccurred())
	joinKubeconfig := filepath.Join(dir, "edge-1.kubeconfig")
	g.Expect(testenv.WriteKubeconfig(joined, "hub", joinKubeconfig)).To(Succeed())
	out, err := helm(t, "install", "lodestar-agent", filepath.Join(chartsDir, "lodestar-agent"), "--kubeconfig", memberKubeconfig,
		"--namespace", releaseNamespace, "--create-namespace", "--set", "clusterName=edge-1",
		"--set-file", "hubKubeconfig.kubeconfig="+joinKubeconfig)
	g.Expect(err).NotTo(HaveOccurred(), out)
	memberSA := filepath.Join(dir, "member-sa")
	g.Expect(testenv.WriteKubeconfig(serviceAccountConfig(t, memberCP.Config, "lodestar-agent"), "member", memberSA)).To(Succeed())
	f.agentMetrics, _ = serving(t, func(addr string) *running {
		return startBinary(t, "lodestar-agent", nil, "--kubeconfig", memberSA, "--hub-kubeconfig", joinKubeconfig, "--cluster-name", "edge-1",
			"--agent-namespace", releaseNamespace, "--metrics-bind-address", addr, "--health-probe-bind-address", "0")
	})
	return f
}

// scrape reads a /metrics endpoint.
func scrape(g Gomega, addr string) map[string]*dto.MetricFamily {
	resp, err := http.Get("http://" + addr + "/metrics")
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	g.Expect(err).NotTo(HaveOccurred())
	return families
}

// value is the value of the family's series whose labels include want (a
// histogram's sample count), and false when there is none.
func value(families map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f, ok := families[name]
	if !ok {
		return 0, false
	}
	var sum float64
	found := false
series:
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue series
			}
		}
		found = true
		switch {
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum, found
}

// TestMetrics runs the hub manager and the agent as processes (bin/, as `make
// build` writes them), each as its chart's ServiceAccount, places a ConfigMap,
// changes it on the member and gives the agent a manifest it cannot apply, then
// scrapes both /metrics endpoints: every series docs/metrics.md lists is served
// by its process (and a lodestar_* series only by its own), and each moved.
func TestMetrics(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	f := runFleet(t, testenv.StartEmptyHub)
	hubCP, memberCP, hubMetrics, agentMetrics := f.hub, f.member, f.hubMetrics, f.agentMetrics

	// A ConfigMap placed on edge-1.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}
	g.Expect(hubCP.Client.Create(ctx, ns)).To(Succeed())
	g.Expect(fleet.BindClusterSet(ctx, hubCP.Client, ns.Name, placementv1alpha1.DefaultClusterSet)).To(Succeed())
	g.Expect(hubCP.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "settings"}, Data: map[string]string{"k": "v"}})).To(Succeed())
	p := &placementv1alpha1.Placement{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "settings"},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{{Version: "v1", Kind: "ConfigMap", Name: "settings"}},
			Scheduling:        placementv1alpha1.Scheduling{ClusterSelector: &metav1.LabelSelector{}},
		},
	}
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, placementv1alpha1.AvailableCondition)).To(BeTrue(), "%v", got.Status.Conditions)
	}).WithTimeout(2 * testenv.EventuallyTimeout).Should(Succeed())

	// Drift on the member, set back by the agent.
	key := client.ObjectKey{Namespace: "shop", Name: "settings"}
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm := &corev1.ConfigMap{}
		if err := memberCP.Client.Get(ctx, key, cm); err != nil {
			return err
		}
		cm.Data["k"] = "changed on the member"
		return memberCP.Client.Update(ctx, cm)
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(memberCP.Client.Get(ctx, key, cm)).To(Succeed())
		g.Expect(cm.Data).To(HaveKeyWithValue("k", "v"))
	}).Should(Succeed())

	// A Work whose manifest the member cannot apply.
	bad := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: names.ClusterNamespace("edge-1")},
		Spec: workv1alpha1.WorkSpec{Workload: workv1alpha1.WorkloadTemplate{Manifests: []workv1alpha1.Manifest{{RawExtension: runtime.RawExtension{
			Raw: []byte(`{"apiVersion":"example.com/v1","kind":"Nothing","metadata":{"name":"x","namespace":"shop"}}`)}}}}}}
	g.Expect(hubCP.Client.Create(ctx, bad)).To(Succeed())

	documented := documentedSeries(t)
	g.Expect(documented).To(HaveLen(17), "docs/metrics.md's table")
	g.Eventually(func(g Gomega) {
		hubFamilies, agentFamilies := scrape(g, hubMetrics), scrape(g, agentMetrics)
		for name, processes := range documented {
			for _, process := range []string{"hub", "agent"} {
				families := map[string]map[string]*dto.MetricFamily{"hub": hubFamilies, "agent": agentFamilies}[process]
				_, served := families[name]
				if slices.Contains(processes, process) {
					g.Expect(served).To(BeTrue(), "%s is documented for the %s but not served", name, process)
				} else if strings.HasPrefix(name, "lodestar_") {
					g.Expect(served).To(BeFalse(), "%s is served by the %s, documented only for %v", name, process, processes)
				}
			}
		}
		atLeast := func(families map[string]*dto.MetricFamily, name string, labels map[string]string, min float64) {
			v, ok := value(families, name, labels)
			g.Expect(ok).To(BeTrue(), "%s%v", name, labels)
			g.Expect(v).To(BeNumerically(">=", min), "%s%v", name, labels)
		}
		atLeast(hubFamilies, "lodestar_placements", map[string]string{"condition": "Available", "status": "True"}, 1)
		atLeast(hubFamilies, "lodestar_clusters", map[string]string{"cluster_set": placementv1alpha1.DefaultClusterSet, "health": "healthy"}, 1)
		// The placed Work; the hand-written one is not the manager's, and its
		// cache holds only its own.
		works, _ := value(hubFamilies, "lodestar_cluster_works", map[string]string{"cluster": "edge-1"})
		g.Expect(works).To(BeEquivalentTo(1), "lodestar_cluster_works{cluster: edge-1}")
		atLeast(hubFamilies, "lodestar_placement_change_applied_seconds", nil, 1)
		atLeast(hubFamilies, "lodestar_placement_change_available_seconds", nil, 1)
		atLeast(hubFamilies, "lodestar_watched_kinds", map[string]string{"group": "", "kind": "ConfigMap"}, 1)
		for _, c := range []string{"workgenerator", "status", "scheduler"} {
			atLeast(hubFamilies, "workqueue_queue_duration_seconds", map[string]string{"name": c}, 1)
		}
		atLeast(agentFamilies, "lodestar_agent_apply_duration_seconds", nil, 1)
		atLeast(agentFamilies, "lodestar_agent_apply_errors_total", map[string]string{"reason": "UnknownKind"}, 1)
		atLeast(agentFamilies, "lodestar_agent_drift_corrections_total", nil, 1)
		atLeast(agentFamilies, "lodestar_agent_heartbeats_total", nil, 1)
		atLeast(agentFamilies, "lodestar_agent_token_renewals_total", map[string]string{"result": "failure"}, 0)
		atLeast(agentFamilies, "lodestar_agent_member_token_renewals_total", map[string]string{"result": "success"}, 0)
		atLeast(agentFamilies, "lodestar_agent_watched_kinds", map[string]string{"group": "", "kind": "ConfigMap"}, 1)
		atLeast(agentFamilies, "workqueue_queue_duration_seconds", map[string]string{"name": "work"}, 1)
		age, _ := value(agentFamilies, "lodestar_agent_heartbeat_age_seconds", nil)
		g.Expect(age).To(And(BeNumerically(">=", 0), BeNumerically("<", 60)), "heartbeat age")
	}).WithTimeout(2 * testenv.EventuallyTimeout).Should(Succeed())
}
