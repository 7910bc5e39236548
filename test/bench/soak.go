package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/hub/scheduler"
	lodestarfleet "github.com/lodestar-dev/lodestar/internal/fleet"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/scheme"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// The soak's fleet and pace.
const (
	soakMembers    = 3
	soakNamespace  = "soak"
	soakPlacements = 6
	// soakConverge is how long every member has to match its Placements after
	// the faults stop; soakCleanup how long deleting them all may take.
	soakConverge = 60 * time.Second
	soakCleanup  = 2 * time.Minute
	// soakMaxCut is the longest an agent's connection to the hub is cut.
	soakMaxCut = 2 * time.Minute
)

// The faults the soak injects.
const (
	faultHubManager   = "hub manager killed"
	faultAgent        = "agent killed"
	faultMemberServer = "member API server restarted"
	faultHubServer    = "hub API server restarted"
	faultCut          = "agent's connection to the hub cut"
)

var faultKinds = []string{faultHubManager, faultAgent, faultMemberServer, faultHubServer, faultCut}

// soakFleet is the soak's own hub (with its hub manager process) and members
// (API servers with agent processes reaching the hub through a TCP proxy each).
type soakFleet struct {
	dir, bin string
	hub      *testenv.ControlPlane
	manager  *exec.Cmd
	members  []*soakMember

	mu         sync.Mutex
	placements map[string]*soakPlacement
	// removed counts, per cluster and object, the removals from what the hub
	// is asked to place there that no deletion on the member has matched yet.
	removed    map[string]int
	violations []string
	faults     map[string]int
	ops        map[string]int
}

type soakMember struct {
	name  string
	cp    *testenv.ControlPlane
	proxy *testenv.Proxy
	agent *exec.Cmd
	args  []string
	cut   bool
}

// soakPlacement is what the soak asked of one Placement: the clusters it
// names and the version of its ConfigMap.
type soakPlacement struct {
	clusters []string
	version  int
	deleted  bool
}

// soak runs placements being created, edited, moved and deleted on a hub with
// real members while faults are injected at random for duration, then checks
// that every member converges to its Placements and that deleting them leaves
// nothing behind. A member object deleted while a live Placement still places
// it there is a violation, as is any convergence or cleanup that does not
// happen in time.
func (f *fleet) soak(ctx context.Context, duration time.Duration, record func(*Result) error) error {
	s, err := f.startSoakFleet(ctx, "soak")
	if err != nil {
		return err
	}
	defer s.stop()

	say("soak: %s of Placement changes and faults", duration)
	runCtx, stopRun := context.WithTimeout(ctx, duration)
	var wg sync.WaitGroup
	var opsErr, faultsErr error
	wg.Add(2)
	go func() { defer wg.Done(); opsErr = s.operate(runCtx) }()
	go func() { defer wg.Done(); faultsErr = s.inject(runCtx) }()
	wg.Wait()
	stopRun()
	if err := errors.Join(opsErr, faultsErr); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	for _, m := range s.members {
		s.reconnect(m) // every other fault restarted what it stopped
	}
	say("soak: faults stopped; waiting for every member to match its Placements")
	converged, err := waitFor(ctx, soakConverge, time.Second, func() (bool, error) { return s.converged(ctx), nil })
	if err != nil {
		s.violate("the members did not match their Placements within %s of the faults stopping: %s", soakConverge, s.mismatch(ctx))
	}
	say("soak: deleting every Placement")
	cleaned, err := s.deleteAll(ctx)
	if err != nil {
		s.violate("%v", err)
	}

	r := &Result{Scenario: "soak", Description: fmt.Sprintf("%s of Placements created, edited (rolled out), moved and deleted on a hub with %d real members (API servers, agent processes), with faults injected at random: %s (up to %s)", duration, soakMembers, strings.Join(faultKinds, ", "), soakMaxCut),
		Members: "real: kube-apiserver and etcd each, the lodestar-agent binary reaching the hub through a TCP proxy"}
	total := 0
	for _, k := range faultKinds {
		r.add("  "+k, float64(s.faults[k]), "")
		total += s.faults[k]
	}
	r.Metrics = append([]Metric{{Name: "faults injected (and survived)", Value: float64(total)}}, r.Metrics...)
	ops := 0
	for _, n := range s.ops {
		ops += n
	}
	r.add("Placement changes", float64(ops), "")
	r.add("after the faults, every member matched its Placements in", converged.Seconds(), "s")
	r.add("deleting every Placement left nothing (Works, AppliedWorks, member objects) after", cleaned.Seconds(), "s")
	r.add("invariant violations", float64(len(s.violations)), "")
	for _, v := range s.violations {
		say("soak: VIOLATION: %s", v)
	}
	say("soak: %d faults, %d Placement changes, %d violations", total, ops, len(s.violations))
	if err := record(r); err != nil {
		return err
	}
	if len(s.violations) > 0 {
		return fmt.Errorf("soak: %d invariant violations, the first: %s", len(s.violations), s.violations[0])
	}
	return nil
}

// startSoakFleet starts a soak fleet of its own (a hub, its manager and
// soakMembers members with their agents) for scenario name; the caller stops
// it.
func (f *fleet) startSoakFleet(ctx context.Context, name string) (*soakFleet, error) {
	s := &soakFleet{dir: filepath.Join(f.dir, name), bin: f.bin, placements: map[string]*soakPlacement{},
		removed: map[string]int{}, faults: map[string]int{}, ops: map[string]int{}}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, err
	}
	say("%s: starting a hub and %d members", name, soakMembers)
	if err := s.start(ctx); err != nil {
		s.stop()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return s, nil
}

func (s *soakFleet) violate(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.violations = append(s.violations, time.Now().Format("15:04:05 ")+fmt.Sprintf(format, args...))
}

// start starts the hub, its manager, the members and their agents, and the
// watches of the members' objects.
func (s *soakFleet) start(ctx context.Context) error {
	var err error
	if s.hub, err = testenv.StartHub(scheme.Hub(), testenv.QuickShutdown); err != nil {
		return err
	}
	for _, ns := range []string{scheduler.DefaultClusterSetNamespace, soakNamespace} {
		if err := s.hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	if err := lodestarfleet.BindClusterSet(ctx, s.hub.Client, soakNamespace, scheduler.DefaultClusterSetNamespace); err != nil {
		return err
	}
	if err := testenv.WriteKubeconfig(s.hub.Config, "hub", filepath.Join(s.dir, "hub.kubeconfig")); err != nil {
		return err
	}
	if err := s.startManager(); err != nil {
		return err
	}
	for i := range soakMembers {
		m := &soakMember{name: fmt.Sprintf("soak-%d", i+1)}
		s.members = append(s.members, m)
		if m.cp, err = testenv.StartMemberWith(m.name, scheme.Agent(), testenv.QuickShutdown); err != nil {
			return err
		}
		hubCfg, err := testenv.Register(ctx, s.hub, testenv.Member{Name: m.name, Labels: map[string]string{"soak": "yes"}})
		if err != nil {
			return err
		}
		if m.proxy, err = testenv.StartProxy(hostOf(hubCfg.Host)); err != nil {
			return err
		}
		hubCfg.Host = "https://" + m.proxy.Addr()
		hubKC, memberKC := filepath.Join(s.dir, m.name+"-hub.kubeconfig"), filepath.Join(s.dir, m.name+".kubeconfig")
		if err := errors.Join(testenv.WriteKubeconfig(hubCfg, "hub", hubKC), testenv.WriteKubeconfig(m.cp.Config, m.name, memberKC)); err != nil {
			return err
		}
		m.args = []string{"--cluster-name", m.name, "--hub-kubeconfig", hubKC, "--kubeconfig", memberKC,
			"--metrics-bind-address", "0", "--health-probe-bind-address", "0"}
		if err := s.startAgent(m); err != nil {
			return err
		}
		if err := s.watchMember(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// process starts one of bin/'s binaries with its output appended to a log.
func (s *soakFleet) process(name string, args ...string) (*exec.Cmd, error) {
	logFile, err := os.OpenFile(filepath.Join(s.dir, name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	binary := "lodestar-agent"
	if name == "lodestar-hub" {
		binary = name
	}
	cmd := exec.Command(filepath.Join(s.bin, binary), args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, err
	}
	go func() { _ = cmd.Wait(); _ = logFile.Close() }()
	return cmd, nil
}

func (s *soakFleet) startManager() (err error) {
	s.manager, err = s.process("lodestar-hub", "--kubeconfig", filepath.Join(s.dir, "hub.kubeconfig"),
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	return err
}

func (s *soakFleet) startAgent(m *soakMember) (err error) {
	m.agent, err = s.process("agent-"+m.name, m.args...)
	return err
}

// kill ends a process at once, as a crash or an OOM kill would.
func kill(cmd *exec.Cmd) {
	if cmd != nil {
		_ = cmd.Process.Signal(syscall.SIGKILL)
	}
}

func (s *soakFleet) stop() {
	kill(s.manager)
	for _, m := range s.members {
		kill(m.agent)
		if m.proxy != nil {
			m.proxy.Stop()
		}
		if m.cp != nil {
			_ = m.cp.Stop()
		}
	}
	if s.hub != nil {
		_ = s.hub.Stop()
	}
}

// object is the key of a placed object on a cluster.
func object(cluster, name string) string { return cluster + "/" + name }

// watchMember records every deletion of a ConfigMap of the soak's namespace on
// the member: one the soak still asks the member to have is a violation.
func (s *soakFleet) watchMember(ctx context.Context, m *soakMember) error {
	c, err := cache.New(m.cp.Config, cache.Options{Scheme: scheme.Agent(), DefaultNamespaces: map[string]cache.Config{soakNamespace: {}}})
	if err != nil {
		return err
	}
	inf, err := c.GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		return err
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok || !strings.HasPrefix(cm.Name, "cm-") {
			return
		}
		s.deleted(m.name, cm.Name)
	}}); err != nil {
		return err
	}
	go func() { _ = c.Start(ctx) }()
	return nil
}

// deleted judges a deletion of name on cluster.
func (s *soakFleet) deleted(cluster, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := object(cluster, name)
	if s.removed[key] > 0 {
		s.removed[key]--
		return
	}
	p := s.placements[strings.TrimPrefix(name, "cm-")]
	if p != nil && !p.deleted && slices.Contains(p.clusters, cluster) {
		s.violations = append(s.violations, time.Now().Format("15:04:05 ")+fmt.Sprintf("ConfigMap %s deleted on %s while its Placement still places it there", name, cluster))
	}
}

// ask records what the soak asks of a Placement before it asks the hub: a
// cluster it no longer names may then lose the object.
func (s *soakFleet) ask(name string, clusters []string, version int, deleted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.placements[name]
	if p == nil {
		p = &soakPlacement{}
		s.placements[name] = p
	}
	for _, c := range p.clusters {
		if deleted || !slices.Contains(clusters, c) {
			s.removed[object(c, "cm-"+name)]++
		}
	}
	if deleted {
		p.clusters = nil
	} else {
		p.clusters = clusters
	}
	p.version, p.deleted = version, deleted
}

// live returns the names of the Placements not deleted, sorted.
func (s *soakFleet) live() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for n, p := range s.placements {
		if !p.deleted {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// someClusters is a random non-empty set of the members, sorted.
func (s *soakFleet) someClusters() []string {
	var out []string
	for _, m := range s.members {
		if rand.IntN(2) == 0 { //nolint:gosec // a random workload, not security
			out = append(out, m.name)
		}
	}
	if len(out) == 0 {
		out = append(out, s.members[rand.IntN(len(s.members))].name) //nolint:gosec // as above
	}
	return out
}

// operate changes the Placements every few seconds until ctx ends.
func (s *soakFleet) operate(ctx context.Context) error {
	next := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Duration(2000+rand.IntN(4000)) * time.Millisecond): //nolint:gosec // pacing, not security
		}
		live := s.live()
		var kind string
		var err error
		switch r := rand.IntN(10); { //nolint:gosec // as above
		case len(live) < soakPlacements/2 || (r < 2 && len(live) < soakPlacements):
			kind, err = "create", s.create(ctx, fmt.Sprintf("p%03d", next))
			next++
		case r < 5:
			kind, err = "edit", s.edit(ctx, live[rand.IntN(len(live))]) //nolint:gosec // as above
		case r < 8:
			kind, err = "move", s.move(ctx, live[rand.IntN(len(live))]) //nolint:gosec // as above
		default:
			kind, err = "delete", s.remove(ctx, live[rand.IntN(len(live))]) //nolint:gosec // as above
		}
		switch {
		case ctx.Err() != nil:
			return nil //nolint:nilerr // the soak's time is up: an operation cut short is no failure
		case err != nil:
			return fmt.Errorf("%s: %w", kind, err)
		}
		s.mu.Lock()
		s.ops[kind]++
		s.mu.Unlock()
	}
}

// onHub retries fn while the hub API server restarts (up to two minutes).
func onHub(ctx context.Context, fn func() error) error {
	var err error
	for range 120 {
		if err = retry.RetryOnConflict(retry.DefaultRetry, fn); err == nil || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return err
}

func (s *soakFleet) create(ctx context.Context, name string) error {
	clusters := s.someClusters()
	s.ask(name, clusters, 1, false)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-" + name, Namespace: soakNamespace}, Data: map[string]string{"version": "1"}}
	if err := onHub(ctx, func() error { return s.hub.Client.Create(ctx, cm.DeepCopy()) }); err != nil {
		return err
	}
	p := &placementv1alpha1.Placement{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: soakNamespace},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{{Version: "v1", Kind: "ConfigMap", Name: "cm-" + name}},
			Scheduling:        placementv1alpha1.Scheduling{ClusterNames: clusters},
		},
	}
	return onHub(ctx, func() error { return s.hub.Client.Create(ctx, p.DeepCopy()) })
}

func (s *soakFleet) edit(ctx context.Context, name string) error {
	s.mu.Lock()
	p := s.placements[name]
	clusters, version := p.clusters, p.version+1
	s.mu.Unlock()
	s.ask(name, clusters, version, false)
	return onHub(ctx, func() error {
		cm := &corev1.ConfigMap{}
		if err := s.hub.Client.Get(ctx, client.ObjectKey{Namespace: soakNamespace, Name: "cm-" + name}, cm); err != nil {
			return err
		}
		cm.Data = map[string]string{"version": strconv.Itoa(version)}
		return s.hub.Client.Update(ctx, cm)
	})
}

func (s *soakFleet) move(ctx context.Context, name string) error {
	s.mu.Lock()
	version := s.placements[name].version
	s.mu.Unlock()
	clusters := s.someClusters()
	s.ask(name, clusters, version, false)
	return onHub(ctx, func() error {
		p := &placementv1alpha1.Placement{}
		if err := s.hub.Client.Get(ctx, client.ObjectKey{Namespace: soakNamespace, Name: name}, p); err != nil {
			return err
		}
		p.Spec.Scheduling.ClusterNames = clusters
		return s.hub.Client.Update(ctx, p)
	})
}

func (s *soakFleet) remove(ctx context.Context, name string) error {
	s.ask(name, nil, 0, true)
	return onHub(ctx, func() error {
		return s.hub.Client.Delete(ctx, &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: soakNamespace}})
	})
}

// inject injects a fault every 15 to 45 s until ctx ends; cuts last up to
// soakMaxCut while the next faults go on.
func (s *soakFleet) inject(ctx context.Context) error {
	var order []string
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Duration(15+rand.IntN(30)) * time.Second): //nolint:gosec // pacing, not security
		}
		// Every kind once in each round of five, in a random order.
		if len(order) == 0 {
			order = slices.Clone(faultKinds)
			rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		kind := order[0]
		order = order[1:]
		m := s.members[rand.IntN(len(s.members))]                  //nolint:gosec // as above
		pause := time.Duration(rand.IntN(5000)) * time.Millisecond //nolint:gosec // as above
		say("soak: fault: %s (%s)", kind, m.name)
		var err error
		switch kind {
		case faultHubManager:
			kill(s.manager)
			pauseFor(ctx, pause) // the time a crashed pod takes to start again
			err = s.startManager()
		case faultAgent:
			kill(m.agent)
			pauseFor(ctx, pause)
			err = s.startAgent(m)
		case faultMemberServer:
			err = m.cp.RestartAPIServer()
		case faultHubServer:
			err = s.hub.RestartAPIServer()
		case faultCut:
			if m.cut {
				continue
			}
			m.cut = true
			m.proxy.Stop()
			cut := time.Duration(10+rand.IntN(int(soakMaxCut/time.Second)-10)) * time.Second //nolint:gosec // as above
			go func() {
				pauseFor(ctx, cut)
				s.reconnect(m)
			}()
		}
		if err != nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
		s.mu.Lock()
		s.faults[kind]++
		s.mu.Unlock()
	}
}

// pauseFor waits d or until ctx ends.
func pauseFor(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// reconnect ends a cut of the member's connection.
func (s *soakFleet) reconnect(m *soakMember) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.cut {
		if err := m.proxy.Start(); err != nil {
			s.violations = append(s.violations, fmt.Sprintf("the proxy of %s did not listen again: %v", m.name, err))
		}
		m.cut = false
	}
}

// expected is, per cluster, the soak's ConfigMaps there and their version.
func (s *soakFleet) expected() map[string]map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]map[string]string{}
	for _, m := range s.members {
		out[m.name] = map[string]string{}
	}
	for name, p := range s.placements {
		for _, c := range p.clusters {
			out[c]["cm-"+name] = strconv.Itoa(p.version)
		}
	}
	return out
}

// actual is, per cluster, the soak's ConfigMaps there and their version.
func (s *soakFleet) actual(ctx context.Context) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, m := range s.members {
		out[m.name] = map[string]string{}
		list := &corev1.ConfigMapList{}
		if err := m.cp.Client.List(ctx, list, client.InNamespace(soakNamespace)); err != nil {
			out[m.name]["error"] = err.Error()
			continue
		}
		for _, cm := range list.Items {
			if strings.HasPrefix(cm.Name, "cm-") {
				out[m.name][cm.Name] = cm.Data["version"]
			}
		}
	}
	return out
}

func (s *soakFleet) converged(ctx context.Context) bool {
	want, got := s.expected(), s.actual(ctx)
	for c := range want {
		if !maps.Equal(want[c], got[c]) {
			return false
		}
	}
	return true
}

// mismatch describes how the members differ from what they should have.
func (s *soakFleet) mismatch(ctx context.Context) string {
	want, got := s.expected(), s.actual(ctx)
	var out []string
	for _, m := range s.members {
		if !maps.Equal(want[m.name], got[m.name]) {
			out = append(out, fmt.Sprintf("%s has %v, should have %v", m.name, got[m.name], want[m.name]))
		}
	}
	return strings.Join(out, "; ")
}

// deleteAll deletes every Placement and waits until nothing of them is left:
// no Work in the clusters' namespaces, no AppliedWork and no ConfigMap of the
// soak on any member.
func (s *soakFleet) deleteAll(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	for _, name := range s.live() {
		if err := s.remove(ctx, name); err != nil {
			return 0, err
		}
	}
	var left string
	if _, err := waitFor(ctx, soakCleanup, time.Second, func() (bool, error) {
		left = s.leftovers(ctx)
		return left == "", nil
	}); err != nil {
		return 0, fmt.Errorf("%s after deleting every Placement: %s", soakCleanup, left)
	}
	return time.Since(start), nil
}

// leftovers describes what of the soak's Placements is left, "" for nothing.
func (s *soakFleet) leftovers(ctx context.Context) string {
	var out []string
	placements := &placementv1alpha1.PlacementList{}
	if err := s.hub.Client.List(ctx, placements, client.InNamespace(soakNamespace)); err != nil || len(placements.Items) > 0 {
		out = append(out, fmt.Sprintf("%d Placements (%v)", len(placements.Items), err))
	}
	for _, m := range s.members {
		works := &workv1alpha1.WorkList{}
		if err := s.hub.Client.List(ctx, works, client.InNamespace(names.ClusterNamespace(m.name))); err != nil || len(works.Items) > 0 {
			out = append(out, fmt.Sprintf("%d Works for %s (%v)", len(works.Items), m.name, err))
		}
		applied := &lodestarworkv1alpha1.AppliedWorkList{}
		if err := m.cp.Client.List(ctx, applied); err != nil || len(applied.Items) > 0 {
			out = append(out, fmt.Sprintf("%d AppliedWorks on %s (%v)", len(applied.Items), m.name, err))
		}
	}
	for c, objs := range s.actual(ctx) {
		if len(objs) > 0 {
			out = append(out, fmt.Sprintf("%v on %s", objs, c))
		}
	}
	return strings.Join(out, "; ")
}
