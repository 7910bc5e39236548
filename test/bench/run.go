package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/scheme"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// baseline measures B_w: how many Work-sized objects per second this API server
// accepts from an unthrottled client, and how many updates of them.
func (f *fleet) baseline(ctx context.Context, record func(*Result) error) (float64, error) {
	const n, workers = 3000, 32
	say("baseline: creating %d Work-sized objects", n)
	ns := "bench-baseline"
	if err := f.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return 0, err
	}
	start := time.Now()
	if err := parallel(n, workers, func(i int) error {
		return f.admin.Create(ctx, workObject(ns, fmt.Sprintf("w-%05d", i)))
	}); err != nil {
		return 0, err
	}
	bw := float64(n) / time.Since(start).Seconds()
	start = time.Now()
	if err := parallel(n, workers, func(i int) error {
		w := workObject(ns, fmt.Sprintf("w-%05d", i))
		if err := f.admin.Get(ctx, client.ObjectKeyFromObject(w), w); err != nil {
			return err
		}
		w.Annotations = map[string]string{"bench": "updated"}
		return f.admin.Update(ctx, w)
	}); err != nil {
		return 0, err
	}
	updates := float64(n) / time.Since(start).Seconds()
	if err := f.admin.DeleteAllOf(ctx, workObject(ns, "x"), client.InNamespace(ns)); err != nil {
		return 0, err
	}
	r := &Result{Scenario: "baseline", Description: fmt.Sprintf("raw API server rate for %d Work-sized objects (1 KB ConfigMap + Deployment), %d unthrottled writers", n, workers)}
	r.add("B_w creates", bw, "objects/s")
	r.add("updates (get + update)", updates, "objects/s")
	say("baseline: B_w %.0f creates/s, %.0f updates/s", bw, updates)
	return bw, record(r)
}

func (f *fleet) simulatedScenarios(ctx context.Context, bw float64, record func(*Result) error) error {
	if err := f.startSimulator(); err != nil {
		return err
	}
	if err := f.startManager(200, 400); err != nil {
		return err
	}
	say("registering 1000 simulated clusters")
	group := func(i int) map[string]string { return map[string]string{"fleet": "sim", "group": fmt.Sprint(i % 10)} }
	start := time.Now()
	if err := f.register(ctx, 1000, group); err != nil {
		return err
	}
	say("registered in %s", time.Since(start).Round(time.Millisecond))

	var latency []*Result // P1's, given their ratio to B_work once it is measured
	// P1, with the client rate controller-runtime defaults to (20 QPS, burst 30),
	// then with the manager's own defaults.
	p1 := func(name, desc string, reps, qps, burst int, restart bool) error {
		if restart {
			f.stopManager()
			args := []int{qps, burst}
			if err := f.startManager(args[0], args[1]); err != nil {
				return err
			}
		}
		var ds []time.Duration
		perStage := make([][]time.Duration, len(stageNames))
		for i := range reps {
			ns := fmt.Sprintf("bench-%s-%02d", strings.ToLower(name), i)
			if err := f.app(ctx, ns); err != nil {
				return err
			}
			p := placementFor(ns, "web", map[string]string{"group": "0"})
			stages, err := f.timeStages(ctx, p, 100, func() (time.Duration, error) { return f.place(ctx, p, 100, 2*time.Minute) })
			if err != nil {
				return err
			}
			if err := f.remove(ctx, client.ObjectKeyFromObject(p), 2*time.Minute); err != nil {
				return err
			}
			ds = append(ds, stages.total)
			for s, d := range stages.each {
				perStage[s] = append(perStage[s], d)
			}
		}
		p50, p90, maxS := percentiles(ds)
		r := &Result{Scenario: name, Description: desc, Members: simulated}
		r.add("p50", p50, "s")
		r.add("p90", p90, "s")
		r.add("max", maxS, "s")
		for s, name := range stageNames {
			p50, _, _ := percentiles(perStage[s])
			r.add("stage p50: "+name, p50, "s")
		}
		r.FractionOfBw = 100 / p50 / bw
		say("%s: p50 %.2fs p90 %.2fs max %.2fs", name, p50, p90, maxS)
		latency = append(latency, r)
		return record(r)
	}
	if f.want("p1") {
		if err := p1("P1-qps20", "latency, 1 of 1000 clusters' Placement to 100 (ConfigMap 1 KB + Deployment), create to Available on all 100; hub manager at controller-runtime's default client rate (20 QPS, burst 30); 3 runs", 3, 20, 30, true); err != nil {
			return err
		}
		if err := p1("P1", "latency as above with the hub manager's defaults (200 QPS, burst 400); 20 runs", 20, 200, 400, true); err != nil {
			return err
		}
	}
	// B_work after P1, so that P1 runs on the API server as before it was
	// measured; P1's p90 against it then.
	if err := f.recordWorkBaseline(ctx, bw, record); err != nil {
		return err
	}
	for _, r := range latency {
		p50, p90 := r.value("p50"), r.value("p90")
		r.FractionOfBwork = 100 / p50 / f.bwork
		// The API server alone takes 100/B_work s for the 100 Works' writes.
		r.add("p90 as a multiple of the API server's time for the writes (100 / B_work)", p90/(100/f.bwork), "")
		if err := record(r); err != nil {
			return err
		}
	}
	if f.want("l1") {
		if err := f.takeover(ctx, bw, record); err != nil {
			return err
		}
		f.stopManager() // the scenarios after run one manager, as before
	}
	if f.manager == nil {
		if err := f.startManager(200, 400); err != nil {
			return err
		}
	}
	if !f.want("p1-busy", "p2", "r1", "d1", "s1", "p3") {
		return nil
	}

	say("P1 with 1000 Placements present: creating them")
	bg := "bench-background"
	if err := f.app(ctx, bg); err != nil {
		return err
	}
	start = time.Now()
	if err := parallel(1000, 32, func(i int) error {
		p := placementFor(bg, fmt.Sprintf("bg-%04d", i), nil)
		p.Spec.Scheduling.ClusterSelector = nil
		p.Spec.Scheduling.ClusterNames = []string{fmt.Sprintf("sim-%05d", i)}
		return f.admin.Create(ctx, p)
	}); err != nil {
		return err
	}
	// Set-up ends when the hub has nothing left to do for them: available, and
	// their rollout reported complete (the work generator's last write).
	if err := f.waitPlacements(ctx, bg, 1000, func(p *placementv1alpha1.Placement) bool {
		c := meta.FindStatusCondition(p.Status.Conditions, placementv1alpha1.ProgressingCondition)
		return ptr.Deref(p.Status.AvailableClusters, 0) == 1 && c != nil && c.Reason == placementv1alpha1.ReasonRolloutComplete
	}); err != nil {
		return fmt.Errorf("1000 background Placements: %w", err)
	}
	say("1000 Placements available in %s", time.Since(start).Round(time.Millisecond))
	rss1000 := f.managerRSS()
	if f.want("p1-busy") {
		if err := p1("P1-busy", "latency as above with 1000 other Placements (1000 Works) present; 10 runs", 10, 0, 0, false); err != nil {
			return err
		}
	}

	if !f.want("p2", "r1", "d1", "s1", "p3") {
		return nil
	}
	// P2: fan-out to 1000, then 5000 clusters, each recorded as soon as measured.
	if err := f.app(ctx, "bench-p2"); err != nil {
		return err
	}
	before, err := f.hubWritesByKind(ctx)
	if err != nil {
		return err
	}
	to1000 := placementFor("bench-p2", "to-1000", map[string]string{"fleet": "sim"})
	reads, err := f.hubRequestsByKind(ctx, "GET", "LIST")
	if err != nil {
		return err
	}
	cpuBefore := cpuSeconds()
	profiled := f.profileHub(ctx, "P2-1000", 8*time.Second)
	d, err := f.place(ctx, to1000, 1000, 5*time.Minute)
	if err != nil {
		return err
	}
	after, err := f.hubWritesByKind(ctx)
	if err != nil {
		return err
	}
	cpuAfter := cpuSeconds()
	profiled()
	if err := f.sayReads(ctx, "P2-1000", reads, 1000); err != nil {
		return err
	}
	if err := f.remove(ctx, client.ObjectKeyFromObject(to1000), 5*time.Minute); err != nil {
		return err
	}
	p2 := &Result{Scenario: "P2-1000", Description: "fan-out, one Placement to all 1000 clusters, create to Available everywhere", Members: simulated}
	p2.add("end to end", d.Seconds(), "s")
	p2.add("throughput", 1000/d.Seconds(), "Works/s")
	writesPerWork(p2, before, after, 1000)
	cpuShares(p2, cpuBefore, cpuAfter)
	apiServerCPUPerWork(p2, cpuBefore, cpuAfter, 1000)
	p2.FractionOfBw = 1000 / d.Seconds() / bw
	p2.FractionOfBwork = 1000 / d.Seconds() / f.bwork
	say("P2: 1000 clusters in %.2fs", d.Seconds())
	if err := record(p2); err != nil {
		return err
	}
	if f.want("r1") {
		if err := f.rolling(ctx, bw, record); err != nil {
			return err
		}
	}
	if f.want("d1") {
		if err := f.divided(ctx, bw, record); err != nil {
			return err
		}
		if err := f.dividedScaled(ctx, record); err != nil {
			return err
		}
	}
	if f.want("s1") {
		if err := f.exported(ctx, record); err != nil {
			return err
		}
	}
	if !f.want("p2", "p3") {
		return nil
	}
	say("registering 4000 more simulated clusters")
	start = time.Now()
	if err := f.register(ctx, 5000, group); err != nil {
		return err
	}
	registered := time.Since(start)
	say("registered and taken in by the hub in %s", registered.Round(time.Millisecond))
	rss5000 := f.managerRSS()
	if before, err = f.hubWritesByKind(ctx); err != nil {
		return err
	}
	if reads, err = f.hubRequestsByKind(ctx, "GET", "LIST"); err != nil {
		return err
	}
	cpuBefore = cpuSeconds()
	profiled = f.profileHub(ctx, "P2-5000", 40*time.Second)
	d, err = f.place(ctx, withSummaries(placementFor("bench-p2", "to-5000", map[string]string{"fleet": "sim"})), 5000, 10*time.Minute)
	if err != nil {
		return err
	}
	if after, err = f.hubWritesByKind(ctx); err != nil {
		return err
	}
	cpuAfter = cpuSeconds()
	profiled()
	if err := f.sayReads(ctx, "P2-5000", reads, 5000); err != nil {
		return err
	}
	if err := f.summarized(ctx, client.ObjectKey{Namespace: "bench-p2", Name: "to-5000"}, 5000); err != nil {
		return err
	}
	p2 = &Result{Scenario: "P2-5000", Description: "fan-out, one Placement with 3 status summaries to all 5000 clusters, create to Available everywhere", Members: simulated}
	p2.add("end to end", d.Seconds(), "s")
	p2.add("throughput", 5000/d.Seconds(), "Works/s")
	p2.add("registering the 4000 clusters before (until the hub took them in)", registered.Seconds(), "s")
	writesPerWork(p2, before, after, 5000)
	cpuShares(p2, cpuBefore, cpuAfter)
	apiServerCPUPerWork(p2, cpuBefore, cpuAfter, 5000)
	p2.FractionOfBw = 5000 / d.Seconds() / bw
	p2.FractionOfBwork = 5000 / d.Seconds() / f.bwork
	say("P2: 5000 clusters in %.2fs", d.Seconds())
	if err := record(p2); err != nil {
		return err
	}

	if !f.want("p3") {
		return nil
	}
	// P3: restart with more than 10 000 Works.
	if err := f.app(ctx, "bench-p3"); err != nil {
		return err
	}
	if _, err := f.place(ctx, placementFor("bench-p3", "to-5000", map[string]string{"fleet": "sim"}), 5000, 10*time.Minute); err != nil {
		return err
	}
	works := 1000 + 5000 + 5000
	// The change: the ConfigMap that bench-p3/to-5000 places on every cluster.
	changed := client.ObjectKey{Namespace: "bench-p3", Name: "to-5000"}
	p := &placementv1alpha1.Placement{}
	if err := f.admin.Get(ctx, changed, p); err != nil {
		return err
	}
	oldMessage := meta.FindStatusCondition(p.Status.Conditions, placementv1alpha1.WorkSynchronizedCondition).Message
	say("P3: restarting the hub manager with %d Works; one Placement's ConfigMap (on 5000 clusters) changes meanwhile", works)
	f.stopManager()
	cm := &corev1.ConfigMap{}
	if err := f.admin.Get(ctx, client.ObjectKey{Namespace: changed.Namespace, Name: "web-config"}, cm); err != nil {
		return err
	}
	cm.Data["payload"] = strings.Repeat("y", 1024)
	if err := f.admin.Update(ctx, cm); err != nil {
		return err
	}
	start = time.Now()
	if before, err = f.hubWritesByKind(ctx); err != nil {
		return err
	}
	cpuBefore = cpuSeconds()
	if err := f.startManager(200, 400); err != nil {
		return err
	}
	if _, err := waitFor(ctx, 10*time.Minute, time.Second, func() (bool, error) {
		p := &placementv1alpha1.Placement{}
		if err := f.admin.Get(ctx, changed, p); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(p.Status.Conditions, placementv1alpha1.WorkSynchronizedCondition)
		return c != nil && c.Message != oldMessage && ptr.Deref(p.Status.AppliedClusters, 0) == 5000 &&
			meta.IsStatusConditionTrue(p.Status.Conditions, placementv1alpha1.AppliedCondition), nil
	}); err != nil {
		return fmt.Errorf("P3: %w", err)
	}
	d = time.Since(start)
	if after, err = f.hubWritesByKind(ctx); err != nil {
		return err
	}
	cpuAfter = cpuSeconds()
	p3 := &Result{Scenario: "P3", Description: fmt.Sprintf("hub manager restart with %d Works present; a change made while it was down to one Placement's ConfigMap, until applied on all 5000 clusters it reaches", works), Members: simulated}
	p3.add("to reflected everywhere", d.Seconds(), "s")
	p3.add("manager RSS after", f.managerRSS(), "MiB")
	writesPerWork(p3, before, after, 5000)
	cpuShares(p3, cpuBefore, cpuAfter)
	p3.FractionOfBw = 5000 / d.Seconds() / bw
	p3.FractionOfBwork = 5000 / d.Seconds() / f.bwork
	say("P3: %.2fs", d.Seconds())
	if err := record(p3); err != nil {
		return err
	}

	fp := &Result{Scenario: "footprint-hub", Description: "hub manager resident memory with 1000 Placements (one Work each) present, at 1000 and at 5000 registered clusters", Members: simulated}
	fp.add("at 1000 clusters", rss1000, "MiB")
	fp.add("at 5000 clusters", rss5000, "MiB")
	fp.add("per registered cluster", (rss5000-rss1000)/4000*1024, "KiB")
	return record(fp)
}

// realMembersDesc describes P4's members.
const realMembersDesc = "real: kube-apiserver, etcd, kube-controller-manager, kube-scheduler and a kwok node each, lodestar-agent processes"

// realMembers runs P4 and the agent footprint on two real members.
// It runs on the hub manager as the scenarios before left it (with H1's
// clusters still heartbeating), not on a restarted one: a restart with 16 000
// Works and clusters is P3's subject.
func (f *fleet) realMembers(ctx context.Context, record func(*Result) error) error {
	if f.manager == nil {
		if err := f.startManager(200, 400); err != nil {
			return err
		}
	}
	say("P4: starting two real members")
	var agents []*exec.Cmd
	defer func() {
		for _, a := range agents {
			_ = a.Process.Kill()
			_, _ = a.Process.Wait()
		}
	}()
	memberClients := map[string]client.Client{}
	var first *testenv.ControlPlane
	var agentMetrics []string
	hubHost := ""
	for _, m := range testenv.DefaultMembers() {
		cp, err := testenv.StartFullMember(m.Name, scheme.Agent())
		if err != nil {
			return err
		}
		defer func() { _ = cp.Stop() }()
		memberClients[m.Name] = cp.Client
		if first == nil {
			first = cp
		}
		m.Labels["real"] = "yes"
		hubCfg, err := testenv.Register(ctx, f.hub, m)
		if err != nil {
			return err
		}
		hubHost = hostOf(hubCfg.Host)
		hubKC, memberKC := filepath.Join(f.dir, m.Name+"-hub.kubeconfig"), filepath.Join(f.dir, m.Name+".kubeconfig")
		if err := testenv.WriteKubeconfig(hubCfg, "hub", hubKC); err != nil {
			return err
		}
		if err := testenv.WriteKubeconfig(cp.Config, m.Name, memberKC); err != nil {
			return err
		}
		logFile, err := os.Create(filepath.Join(f.dir, "agent-"+m.Name+".log"))
		if err != nil {
			return err
		}
		metricsAddr, err := testenv.FreeAddress()
		if err != nil {
			return err
		}
		agentMetrics = append(agentMetrics, metricsAddr)
		args := []string{"--cluster-name", m.Name, "--hub-kubeconfig", hubKC,
			"--kubeconfig", memberKC, "--metrics-bind-address", metricsAddr, "--health-probe-bind-address", "0"}
		if f.pprof != "" {
			// The agents' profiling endpoints follow the hub manager's.
			args = append(args, "--pprof-bind-address", nextPort(f.pprof, 1+len(agents)))
		}
		cmd := exec.Command(filepath.Join(f.bin, "lodestar-agent"), args...)
		cmd.Stdout, cmd.Stderr = logFile, logFile
		if err := cmd.Start(); err != nil {
			return err
		}
		agents = append(agents, cmd)
	}

	var applied, available []time.Duration
	perStage := make([][]time.Duration, len(stageNames))
	for i := range 10 {
		ns := fmt.Sprintf("bench-p4-%02d", i)
		if err := f.app(ctx, ns); err != nil {
			return err
		}
		p := placementFor(ns, "web", map[string]string{"real": "yes"})
		var firstApplied atomic.Int64
		stages, err := f.timeStages(ctx, p, 2, func() (time.Duration, error) { return f.placeOnReal(ctx, p, memberClients, &firstApplied) })
		if err != nil {
			return err
		}
		applied = append(applied, time.Duration(firstApplied.Load()))
		available = append(available, stages.total)
		for s, d := range stages.each {
			perStage[s] = append(perStage[s], d)
		}
	}
	r := &Result{Scenario: "P4", Description: "two real members: Placement create on the hub to the objects on both members, and to Available (Deployment running on kwok nodes) reported on the hub; 10 runs",
		Members: realMembersDesc}
	p50, p90, _ := percentiles(applied)
	r.add("applied p50", p50, "s")
	r.add("applied p90", p90, "s")
	p50, p90, _ = percentiles(available)
	r.add("Available p50", p50, "s")
	r.add("Available p90", p90, "s")
	for s, name := range stageNames {
		p50, _, _ := percentiles(perStage[s])
		r.add("stage p50: "+name, p50, "s")
	}
	if err := record(r); err != nil {
		return err
	}
	if err := f.agentFootprint(ctx, agentMetrics[0], hubHost, agents[0].Process.Pid, record); err != nil {
		return err
	}
	// After the footprint, which the tunnel's streams would add to.
	if err := f.tunnelList(ctx, first, record); err != nil {
		return fmt.Errorf("X1: %w", err)
	}
	return nil
}

// placeOnReal creates the Placement and waits until its objects are on every
// real member (that time, from the create, in firstApplied) and it reads
// Available on them; it returns the time from the create to Available.
func (f *fleet) placeOnReal(ctx context.Context, p *placementv1alpha1.Placement, memberClients map[string]client.Client, firstApplied *atomic.Int64) (time.Duration, error) {
	ns := p.Namespace
	start := time.Now()
	if err := f.admin.Create(ctx, p); err != nil {
		return 0, err
	}
	return waitFor(ctx, 2*time.Minute, 10*time.Millisecond, func() (bool, error) {
		if firstApplied.Load() == 0 {
			all := true
			for _, c := range memberClients {
				if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-config"}, &corev1.ConfigMap{}); err != nil {
					all = false
				}
			}
			if all {
				firstApplied.Store(int64(time.Since(start)))
			}
		}
		ok, err := f.available(ctx, client.ObjectKeyFromObject(p), 2)
		return ok && firstApplied.Load() > 0, err
	})
}

// agentFootprint is footprint-agent: the first real member's agent with 100
// Works applied, and its requests in a quiet minute after.
func (f *fleet) agentFootprint(ctx context.Context, metricsAddr, hubHost string, pid int, record func(*Result) error) error {
	say("footprint: 100 Works on member-1")
	bg := "bench-agent-footprint"
	if err := f.app(ctx, bg); err != nil {
		return err
	}
	if err := parallel(100, 16, func(i int) error {
		name := fmt.Sprintf("fp-%03d", i)
		if err := f.admin.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: bg}, Data: map[string]string{"k": "v"}}); err != nil {
			return err
		}
		p := placementFor(bg, name, nil)
		p.Spec.Scheduling.ClusterSelector, p.Spec.Scheduling.ClusterNames = nil, []string{"member-1"}
		p.Spec.ResourceSelectors = []placementv1alpha1.ResourceSelector{{Version: "v1", Kind: "ConfigMap", Name: name}}
		return f.admin.Create(ctx, p)
	}); err != nil {
		return err
	}
	// Every Work available and reported: nothing left for the agent to finish.
	if err := f.waitPlacements(ctx, bg, 100, func(p *placementv1alpha1.Placement) bool {
		return ptr.Deref(p.Status.AvailableClusters, 0) == 1 && meta.IsStatusConditionTrue(p.Status.Conditions, placementv1alpha1.AvailableCondition)
	}); err != nil {
		return err
	}
	// Steady state: what the agent asks of the hub and of its member in a quiet
	// minute, from its own client metrics.
	const window = time.Minute
	before, after, err := overWindow(ctx, window, func(ctx context.Context) (map[string]float64, error) {
		return agentRequests(ctx, metricsAddr)
	})
	if err != nil {
		return err
	}
	toHub, toMember := map[string]float64{}, map[string]float64{}
	for key, n := range after {
		host, method, _ := strings.Cut(key, " ")
		if host == hubHost {
			toHub[method] += n - before[key]
		} else {
			toMember[method] += n - before[key]
		}
	}
	fa := &Result{Scenario: "footprint-agent", Description: "lodestar-agent with 100 Works applied (real member): resident memory, and its API requests in a quiet minute after", Members: realMembersDesc}
	fa.add("agent RSS", rssMiB(pid, "VmRSS"), "MiB")
	fa.add("of which its own memory (heap, stacks)", rssMiB(pid, "RssAnon"), "MiB")
	fa.add("of which its binary's mapped pages", rssMiB(pid, "RssFile"), "MiB")
	for _, side := range []struct {
		name     string
		byMethod map[string]float64
	}{{"hub", toHub}, {"member", toMember}} {
		var all float64
		methods := make([]string, 0, len(side.byMethod))
		for m, n := range side.byMethod {
			all += n
			if n > 0 {
				methods = append(methods, m)
			}
		}
		slices.Sort(methods)
		fa.add("requests to the "+side.name, all/window.Minutes(), "per minute")
		for _, m := range methods {
			fa.add(fmt.Sprintf("requests to the %s, %s", side.name, m), side.byMethod[m]/window.Minutes(), "per minute")
		}
	}
	return record(fa)
}

// waitPlacements waits until n Placements of namespace ns are done.
func (f *fleet) waitPlacements(ctx context.Context, ns string, n int, done func(*placementv1alpha1.Placement) bool) error {
	_, err := waitFor(ctx, 5*time.Minute, time.Second, func() (bool, error) {
		list := &placementv1alpha1.PlacementList{}
		if err := f.admin.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		count := 0
		for i := range list.Items {
			if done(&list.Items[i]) {
				count++
			}
		}
		return count == n, nil
	})
	return err
}
