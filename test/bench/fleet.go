package main

import (
	"context"
	"errors"
	"fmt"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/hub/clusterhealth"
	"github.com/lodestar-dev/lodestar/controllers/hub/scheduler"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/scheme"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// fleet is a hub API server, the hub manager as its own process (as in
// production), and simulated members.
type fleet struct {
	dir      string
	bin      string
	hub      *testenv.ControlPlane
	admin    client.Client // unthrottled
	watcher  client.WithWatch
	adminCfg *rest.Config
	manager  *exec.Cmd
	sim      *simulator
	simStop  context.CancelFunc
	clusters int
	// set is the cluster set new clusters join (default lodestar-fleet).
	set string
	// stopHeartbeats, when set, stops H1's heartbeats.
	stopHeartbeats func()
	// bwork is B_work, measured once the hub manager runs (Works/s).
	bwork float64
	// only, when not empty, names the scenario groups to run (p1, p1-busy, p2, r1,
	// p3, p4); earlier groups still set up what later ones need.
	only []string
	// pprof is the address of the hub manager's profiling endpoint; empty for none.
	pprof string
	// profiles, when not empty, is where the hub API server's CPU profiles
	// of the fan-out scenarios go (with --pprof).
	profiles string
	// debugAddr is where the hub manager serves the debug API (as the hub
	// chart has it do); empty for none.
	debugAddr string
}

// want tells whether any of the scenario groups is to run.
func (f *fleet) want(groups ...string) bool {
	if len(f.only) == 0 {
		return true
	}
	for _, g := range groups {
		if slices.Contains(f.only, g) {
			return true
		}
	}
	return false
}

func unthrottled(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = -1, 0
	return c
}

func startFleet(dir, bin string) (*fleet, error) {
	hubCP, err := testenv.StartHub(scheme.Hub())
	if err != nil {
		return nil, err
	}
	f := &fleet{dir: dir, bin: bin, hub: hubCP, adminCfg: unthrottled(hubCP.Config)}
	if f.admin, err = client.New(f.adminCfg, client.Options{Scheme: scheme.Hub()}); err != nil {
		return nil, errors.Join(err, hubCP.Stop())
	}
	if f.watcher, err = client.NewWithWatch(f.adminCfg, client.Options{Scheme: scheme.Hub()}); err != nil {
		return nil, errors.Join(err, hubCP.Stop())
	}
	if err := testenv.WriteKubeconfig(hubCP.Config, "hub", filepath.Join(dir, "hub.kubeconfig")); err != nil {
		return nil, errors.Join(err, hubCP.Stop())
	}
	if err := f.admin.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scheduler.DefaultClusterSetNamespace}}); err != nil {
		return nil, errors.Join(err, hubCP.Stop())
	}
	if err := f.installDebugAPI(context.Background()); err != nil {
		return nil, errors.Join(err, hubCP.Stop())
	}
	return f, nil
}

// clusterSet is the cluster set new clusters join.
func (f *fleet) clusterSet() string {
	if f.set == "" {
		return scheduler.DefaultClusterSetNamespace
	}
	return f.set
}

// startManager starts the hub manager process with the given client QPS and burst.
func (f *fleet) startManager(qps, burst int) error {
	cmd, err := f.spawnManager(append(f.hubWideArgs(), "--kube-api-qps", strconv.Itoa(qps), "--kube-api-burst", strconv.Itoa(burst), "--pprof-bind-address", f.pprof)...)
	if err != nil {
		return err
	}
	f.manager = cmd
	return nil
}

// hubWideArgs are the arguments of the hub-wide manager beyond the bench's:
// the chart's default, the debug API on (G1 opens a stream per cluster).
func (f *fleet) hubWideArgs() []string {
	if f.debugAddr == "" {
		return nil
	}
	return []string{"--debug-bind-address", f.debugAddr, "--debug-namespace", debugNamespace,
		"--debug-streams-per-user", "20000", "--debug-streams-per-namespace", "20000", "--debug-streams", "20000"}
}

// spawnManager starts a hub manager process with args added to the bench's.
func (f *fleet) spawnManager(args ...string) (*exec.Cmd, error) {
	logFile, err := os.Create(filepath.Join(f.dir, fmt.Sprintf("lodestar-hub-%d.log", time.Now().UnixNano())))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(f.bin, "lodestar-hub"), append([]string{"--kubeconfig", filepath.Join(f.dir, "hub.kubeconfig"),
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0"}, args...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, err
	}
	return cmd, nil
}

func (f *fleet) stopManager() {
	if f.manager == nil {
		return
	}
	_ = f.manager.Process.Signal(syscall.SIGTERM)
	_ = f.manager.Wait()
	f.manager = nil
}

// managerRSS is the resident memory of the hub manager process, in MiB.
func (f *fleet) managerRSS() float64 { return rssMiB(f.manager.Process.Pid, "VmRSS") }

// rssMiB reads a field of a process's /proc status, in MiB: VmRSS (all its
// resident memory), RssAnon (its own: heap, stacks) or RssFile (the pages of its
// binary that are mapped in).
func rssMiB(pid int, field string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			return kb / 1024
		}
	}
	return 0
}

// startSimulator runs simulated agents in this process.
func (f *fleet) startSimulator() error {
	mgr, err := ctrl.NewManager(f.adminCfg, ctrl.Options{
		Scheme:                 scheme.Agent(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return err
	}
	if f.sim, err = newSimulator(mgr, 16); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.simStop = cancel
	go func() { _ = mgr.Start(ctx) }()
	return nil
}

// leaseForRun is how long a simulated cluster's one heartbeat keeps it
// reachable: longer than any scenario.
const leaseForRun = 3 * time.Hour

// register adds clusters n..to-1 to the fleet, each with labels(i), simulated,
// and waits until the hub manager has taken them in.
func (f *fleet) register(ctx context.Context, to int, labels func(i int) map[string]string) error {
	if err := f.addClusters(ctx, to, labels, true); err != nil {
		return err
	}
	return f.settled(ctx, to)
}

// addClusters adds clusters n..to-1 to the fleet, each with labels(i),
// simulated; connected gives each a first heartbeat as its agent's, good for
// the run (H1 starts real heartbeats instead).
func (f *fleet) addClusters(ctx context.Context, to int, labels func(i int) map[string]string, connected bool) error {
	from := f.clusters
	err := parallel(to-from, 32, func(k int) error {
		i := from + k
		name := fmt.Sprintf("sim-%05d", i)
		if err := f.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names.ClusterNamespace(name)}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		l := labels(i)
		l[cpv1alpha1.LabelClusterManagerKey] = scheduler.ClusterManagerName
		cp := &cpv1alpha1.ClusterProfile{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.clusterSet(), Labels: l},
			Spec:       cpv1alpha1.ClusterProfileSpec{ClusterManager: cpv1alpha1.ClusterManager{Name: scheduler.ClusterManagerName}},
		}
		if err := f.admin.Create(ctx, cp); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		// A first heartbeat, as a connected agent's, good for the run: the hub
		// chooses only clusters whose agent has connected.
		if !connected {
			f.sim.add(name)
			return nil
		}
		if err := f.admin.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: placementv1alpha1.AgentLeaseName, Namespace: names.ClusterNamespace(name),
				Labels:      map[string]string{placementv1alpha1.AgentLeaseLabel: "true"},
				Annotations: map[string]string{placementv1alpha1.MemberReadyAnnotation: "true"}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](int32(leaseForRun.Seconds())),
				RenewTime: &metav1.MicroTime{Time: time.Now()}},
		}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		f.sim.add(name)
		return nil
	})
	f.clusters = to
	return err
}

// settled waits until the hub manager has taken in n registered clusters: each
// ClusterProfile carries the cleanup finalizer and an AgentReachable condition.
// Scenarios measure fan-out, not the registration's own writes.
func (f *fleet) settled(ctx context.Context, n int) error {
	if f.manager == nil {
		return nil
	}
	_, err := waitFor(ctx, 5*time.Minute, 2*time.Second, func() (bool, error) {
		taken, _, err := f.takenInCount(ctx, f.clusterSet())
		if err != nil || taken < n {
			return false, err
		}
		return f.paced(ctx, n)
	})
	if err != nil {
		return fmt.Errorf("waiting for the hub to take in %d clusters: %w", n, err)
	}
	return nil
}

// takenInCount counts the ClusterProfiles of set the hub has taken in (the
// cleanup finalizer and a reachability condition on each), and all of them.
func (f *fleet) takenInCount(ctx context.Context, set string) (taken, all int, err error) {
	list := &cpv1alpha1.ClusterProfileList{}
	if err := f.admin.List(ctx, list, client.InNamespace(set)); err != nil {
		return 0, 0, err
	}
	for i := range list.Items {
		p := &list.Items[i]
		if controllerutil.ContainsFinalizer(p, placementv1alpha1.ClusterCleanupFinalizer) &&
			meta.FindStatusCondition(p.Status.Conditions, placementv1alpha1.AgentReachableCondition) != nil {
			taken++
		}
	}
	return taken, len(list.Items), nil
}

// paced tells whether every agent Lease carries the heartbeat interval the hub
// asks of a fleet of n: the hub re-paces every Lease when the fleet's size
// crosses a step (at its next count, every 30 s), which would otherwise land in
// the scenario after a registration.
func (f *fleet) paced(ctx context.Context, n int) (bool, error) {
	want := clusterhealth.IntervalAnnotation(n, clusterhealth.DefaultHeartbeatWriteBudget, clusterhealth.DefaultMaxHeartbeatInterval)
	leases := &coordinationv1.LeaseList{}
	if err := f.admin.List(ctx, leases, client.HasLabels{placementv1alpha1.AgentLeaseLabel}); err != nil {
		return false, err
	}
	for i := range leases.Items {
		if leases.Items[i].Annotations[placementv1alpha1.HeartbeatIntervalAnnotation] != want {
			return false, nil
		}
	}
	return true, nil
}

func (f *fleet) stop() {
	f.endHeartbeats()
	f.stopManager()
	if f.simStop != nil {
		f.simStop()
	}
	_ = f.hub.Stop()
}

// endHeartbeats stops H1's heartbeats, if they run.
func (f *fleet) endHeartbeats() {
	if f.stopHeartbeats != nil {
		f.stopHeartbeats()
		f.stopHeartbeats = nil
	}
}

// parallel runs fn(0..n-1) on workers goroutines and returns the first error.
func parallel(n, workers int, fn func(i int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = make(chan int)
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}
