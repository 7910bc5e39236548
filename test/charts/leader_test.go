package charts

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/agent"
	"github.com/lodestar-dev/lodestar/controllers/hub/scheduler"
	"github.com/lodestar-dev/lodestar/internal/fleet"
	"github.com/lodestar-dev/lodestar/internal/scheme"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// hubReplica is one replica of the hub chart's Deployment, run as a local
// process with the chart's arguments.
type hubReplica struct {
	process *os.Process
	metrics string
}

// leads tells whether the replica is the leader, by its own metrics.
func (r *hubReplica) leads() bool {
	resp, err := http.Get("http://" + r.metrics + "/metrics") //nolint:noctx // a loopback scrape in a test
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "leader_election_master_status{") && strings.HasSuffix(line, " 1") {
			return true
		}
	}
	return false
}

// violations collects what must never happen, seen by watches.
type violations struct {
	mu   sync.Mutex
	list []string
}

func (v *violations) add(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.list = append(v.list, fmt.Sprintf(format, args...))
}

func (v *violations) all() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.list...)
}

// watchAll runs a watch of list (cl's objects in namespace, "" for all) until
// the test ends, handing each event to seen; a watch the server ends is
// started again from the last resource version seen.
func watchAll(t *testing.T, cl client.WithWatch, list client.ObjectList, namespace string, seen func(watch.Event)) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(cl.List(t.Context(), list, client.InNamespace(namespace))).To(Succeed())
	rv := list.(metav1.ListInterface).GetResourceVersion()
	w, err := cl.Watch(t.Context(), list, client.InNamespace(namespace), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
	g.Expect(err).NotTo(HaveOccurred())
	go func() {
		for {
			for e := range w.ResultChan() {
				if o, ok := e.Object.(client.Object); ok {
					rv = o.GetResourceVersion()
				}
				seen(e)
			}
			if t.Context().Err() != nil {
				return
			}
			if w, err = cl.Watch(t.Context(), list, client.InNamespace(namespace), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}}); err != nil {
				return
			}
		}
	}()
	t.Cleanup(w.Stop)
}

// The hub chart runs two replicas with leader election. Killed mid-rollout
// (Rolling, four members), the leader is replaced by the other replica within
// the lease duration and a retry period; the rollout completes; no Work is
// deleted (and re-created), no member object is deleted, no Placement's status
// goes backwards (its rollout's progress, its observed generation), and a
// Placement that read Available never reads otherwise through the handover.
func TestHubSurvivesLosingItsLeader(t *testing.T) {
	g := NewWithT(t)
	hubCP, dir := emptyHub(t)
	// The chart's defaults but the debug API (no process could serve the
	// APIService's one port for both local replicas).
	release := installHubRelease(t, hubCP, dir, "lodestar-hub", "lodestar-hub", "--set", "debug.enabled=false")
	chart := release.chart
	g.Expect(chart.Args).To(ContainElement("--leader-elect=true"))
	leaseDuration, retryPeriod := chartDuration(g, chart.Args, "leader-election-lease-duration"), chartDuration(g, chart.Args, "leader-election-retry-period")
	startReplica := func() *hubReplica {
		addr, p := serving(t, release.startBinary)
		return &hubReplica{metrics: addr, process: p.process}
	}
	replicas := []*hubReplica{startReplica(), startReplica()}

	// Four members (API servers), each with its agent.
	clusters := []string{"edge-1", "edge-2", "edge-3", "edge-4"}
	memberCPs := map[string]*testenv.ControlPlane{}
	for _, name := range clusters {
		cp, err := testenv.StartMember(name, scheme.Agent())
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = cp.Stop() })
		memberCPs[name] = cp
		cfg, err := fleet.Join(t.Context(), hubCP.Config, hubCP.Client, fleet.JoinOptions{Name: name, TokenTTL: time.Hour})
		g.Expect(err).NotTo(HaveOccurred())
		a, err := agent.NewManager(agent.Options{ClusterName: name, Hub: cfg, Member: cp.Config, AgentNamespace: releaseNamespace,
			Manager: ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"}})
		g.Expect(err).NotTo(HaveOccurred())
		start(t, a)
	}

	// An application: a steady Placement (Available before the kill, never
	// changed) and one that rolls out, one cluster at a time, each held 3 s.
	ns := "shop"
	g.Expect(hubCP.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	g.Expect(fleet.BindClusterSet(t.Context(), hubCP.Client, ns, scheduler.DefaultClusterSetNamespace)).To(Succeed())
	for _, name := range []string{"steady", "web"} {
		g.Expect(hubCP.Client.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"greeting": "v1"}})).To(Succeed())
		g.Expect(hubCP.Client.Create(t.Context(), &placementv1alpha1.Placement{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: placementv1alpha1.PlacementSpec{
				ResourceSelectors: []placementv1alpha1.ResourceSelector{{Version: "v1", Kind: "ConfigMap", Name: name}},
				Scheduling:        placementv1alpha1.Scheduling{ClusterNames: clusters},
				Strategy: placementv1alpha1.RolloutStrategy{Type: placementv1alpha1.RolloutRolling,
					Rolling: &placementv1alpha1.RollingStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(1)), MinAvailableSeconds: 3}},
			},
		})).To(Succeed())
	}
	for _, name := range []string{"steady", "web"} {
		expectRollout(g, hubCP.Client, client.ObjectKey{Namespace: ns, Name: name}, 1, memberCPs, "v1")
	}

	// From here on: nothing deleted, nothing going backwards.
	var bad violations
	watcher, err := client.NewWithWatch(hubCP.Config, client.Options{Scheme: scheme.Hub()})
	g.Expect(err).NotTo(HaveOccurred())
	watchAll(t, watcher, &workv1alpha1.WorkList{}, "", func(e watch.Event) {
		if e.Type == watch.Deleted {
			bad.add("Work %s deleted", client.ObjectKeyFromObject(e.Object.(client.Object)))
		}
	})
	watchPlacements(t, watcher, ns, &bad)
	for _, name := range clusters {
		mc, err := client.NewWithWatch(memberCPs[name].Config, client.Options{Scheme: scheme.Agent()})
		g.Expect(err).NotTo(HaveOccurred())
		watchAll(t, mc, &corev1.ConfigMapList{}, ns, func(e watch.Event) {
			if e.Type == watch.Deleted {
				bad.add("ConfigMap %s deleted on %s", client.ObjectKeyFromObject(e.Object.(client.Object)), name)
			}
		})
	}

	// Roll out v2; once the first cluster has it, kill the leader.
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm := &corev1.ConfigMap{}
		if err := hubCP.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web"}, cm); err != nil {
			return err
		}
		cm.Data["greeting"] = "v2"
		return hubCP.Client.Update(t.Context(), cm)
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		p := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web"}, p)).To(Succeed())
		g.Expect(p.Status.Rollout).NotTo(BeNil())
		g.Expect(p.Status.Rollout.TargetRevisionNumber).To(BeEquivalentTo(2))
		g.Expect(ptr.Deref(p.Status.Rollout.UpdatedClusters, 0)).To(BeNumerically(">=", 1))
		g.Expect(ptr.Deref(p.Status.Rollout.UpdatedClusters, 0)).To(BeNumerically("<", len(clusters)), "the rollout ended before the leader could be killed mid-way")
	}).Should(Succeed())
	var leader, standby *hubReplica
	g.Eventually(func() bool {
		for i, r := range replicas {
			if r.leads() {
				leader, standby = r, replicas[1-i]
				return true
			}
		}
		return false
	}).Should(BeTrue(), "neither replica leads")
	holder := leaseHolder(hubCP.Client, chart.Args)
	g.Expect(leader.process.Signal(syscall.SIGKILL)).To(Succeed())
	killed := time.Now()
	g.Eventually(func() string { return leaseHolder(hubCP.Client, chart.Args) }).WithPolling(100 * time.Millisecond).ShouldNot(Equal(holder))
	takeover := time.Since(killed)
	t.Logf("the standby replica took over %s after the leader was killed (lease duration %s, retry period %s)", takeover.Round(10*time.Millisecond), leaseDuration, retryPeriod)
	// client-go: a candidate takes over once it has seen the Lease unchanged for
	// the lease duration, and it looks every retry period stretched by up to
	// 1.2 times more (2 to 4.4 s): from the kill, at most the lease duration and
	// two such waits (noticing the last renewal, then acquiring), 23.8 s here.
	g.Expect(takeover).To(BeNumerically("<=", leaseDuration+5*retryPeriod), "took over within the lease duration and the candidate's two jittered retry periods")
	g.Eventually(standby.leads).Should(BeTrue())
	// The killed replica starts again, as its pod would, and stands by.
	replicas = []*hubReplica{standby, startReplica()}

	expectRollout(g, hubCP.Client, client.ObjectKey{Namespace: ns, Name: "web"}, 2, memberCPs, "v2")
	g.Consistently(func() []string { return bad.all() }).WithTimeout(5 * time.Second).Should(BeEmpty())
	g.Expect(replicas[1].leads()).To(BeFalse(), "the restarted replica stands by")
}

// expectRollout waits until the Placement has rolled out revision number
// everywhere, with the greeting on every member.
func expectRollout(g Gomega, hub client.Client, key client.ObjectKey, number int64, members map[string]*testenv.ControlPlane, greeting string) {
	g.Eventually(func(g Gomega) {
		p := &placementv1alpha1.Placement{}
		g.Expect(hub.Get(context.Background(), key, p)).To(Succeed())
		c := meta.FindStatusCondition(p.Status.Conditions, placementv1alpha1.ProgressingCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonRolloutComplete), c.Message)
		g.Expect(p.Status.Rollout.TargetRevisionNumber).To(Equal(number))
		a := meta.FindStatusCondition(p.Status.Conditions, placementv1alpha1.AvailableCondition)
		g.Expect(a).NotTo(BeNil())
		g.Expect(a.Status).To(Equal(metav1.ConditionTrue), "%s: %s (generation %d, observed %d; clusters %+v)", a.Reason, a.Message, p.Generation, a.ObservedGeneration, p.Status.Clusters)
		for name, cp := range members {
			cm := &corev1.ConfigMap{}
			g.Expect(cp.Client.Get(context.Background(), key, cm)).To(Succeed(), "on %s", name)
			g.Expect(cm.Data["greeting"]).To(Equal(greeting), "on %s", name)
		}
	}).WithTimeout(3 * time.Minute).Should(Succeed())
}

// watchPlacements reports a Placement whose status goes backwards: its
// observed generation or its rollout's target falling, fewer clusters updated
// to the same target, or Available True then not.
func watchPlacements(t *testing.T, cl client.WithWatch, ns string, bad *violations) {
	type seen struct {
		generation, target int64
		updated            int32
		available          bool
	}
	last := map[string]seen{}
	watchAll(t, cl, &placementv1alpha1.PlacementList{}, ns, func(e watch.Event) {
		p, ok := e.Object.(*placementv1alpha1.Placement)
		if !ok {
			return
		}
		if e.Type == watch.Deleted {
			bad.add("Placement %s deleted", p.Name)
			return
		}
		now := seen{generation: p.Status.ObservedGeneration, available: meta.IsStatusConditionTrue(p.Status.Conditions, placementv1alpha1.AvailableCondition)}
		if r := p.Status.Rollout; r != nil {
			now.target, now.updated = r.TargetRevisionNumber, ptr.Deref(r.UpdatedClusters, 0)
		}
		before, known := last[p.Name]
		last[p.Name] = now
		switch {
		case !known:
		case now.generation < before.generation:
			bad.add("Placement %s: observed generation %d after %d", p.Name, now.generation, before.generation)
		case now.target < before.target:
			bad.add("Placement %s: rollout target %d after %d", p.Name, now.target, before.target)
		case now.target == before.target && now.updated < before.updated:
			bad.add("Placement %s: %d clusters updated to revision %d after %d", p.Name, now.updated, now.target, before.updated)
		case p.Name == "steady" && before.available && !now.available:
			bad.add("Placement steady: Available, then not")
		}
	})
}

// chartDuration reads a duration flag of the chart's arguments.
func chartDuration(g Gomega, args []string, flag string) time.Duration {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+flag+"="); ok {
			d, err := time.ParseDuration(v)
			g.Expect(err).NotTo(HaveOccurred())
			return d
		}
	}
	g.Expect(args).To(ContainElement(HavePrefix("--" + flag + "=")))
	return 0
}

// leaseHolder is the holder of the hub manager's leader election Lease.
func leaseHolder(c client.Client, args []string) string {
	var id string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--leader-election-id="); ok {
			id = v
		}
	}
	lease := &coordinationv1.Lease{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: releaseNamespace, Name: id}, lease); err != nil {
		return ""
	}
	return ptr.Deref(lease.Spec.HolderIdentity, "")
}
