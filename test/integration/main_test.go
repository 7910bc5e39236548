// Package integration tests Lodestar end to end on real API servers: one hub and two
// member clusters, each a kube-apiserver with its own etcd, with the hub manager and
// one agent per member running as they run in production (the agents with their
// own least-privilege identity on the hub).
package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	debugv1alpha1 "github.com/lodestar-dev/lodestar/api/debug/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/agent"
	"github.com/lodestar-dev/lodestar/controllers/agent/debug"
	"github.com/lodestar-dev/lodestar/controllers/agent/registration"
	"github.com/lodestar-dev/lodestar/controllers/hub"
	"github.com/lodestar-dev/lodestar/controllers/hub/scheduler"
	"github.com/lodestar-dev/lodestar/internal/debugapi"
	"github.com/lodestar-dev/lodestar/internal/mcs"
	"github.com/lodestar-dev/lodestar/internal/policy"
	"github.com/lodestar-dev/lodestar/internal/readiness"
	"github.com/lodestar-dev/lodestar/internal/renderctl"
	"github.com/lodestar-dev/lodestar/internal/scheme"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// The fleet every test in this package shares.
var (
	hubCP   *testenv.ControlPlane
	members = map[string]*testenv.ControlPlane{}
	// agentConfigs are the agents' own connections to the hub.
	agentConfigs = map[string]*rest.Config{}
	// debugServer is the hub manager's debug API.
	debugServer *debugapi.Runnable
)

// debugNamespace is where the debug API's Service and certificate are.
const debugNamespace = "lodestar-system"

// debugOptions are the agents' debugging from the hub: their tunnels, and
// exec for the tenant groups (the chart's default is logs only).
var debugOptions = &agent.Debug{TenantAccess: debug.TenantAccessExec, ConsumerAccess: true}

const (
	member1 = "member-1"
	member2 = "member-2"
	// fullMember runs workloads: it has kube-controller-manager, kube-scheduler and
	// a kwok fake node, so its Deployments become Available.
	fullMember = member1
)

// agentConfig is the member admins' configuration of the agents: a readiness rule
// for a custom kind, and the baseline Pod Security Standard for the namespaces
// they create (as the agent chart's default policy).
var agentConfig = agent.Config{Policy: policy.Policy{NamespacePodSecurity: "baseline"}, ReadinessRules: []readiness.Rule{{
	Group:     gadgetGroup,
	Kind:      "Gadget",
	Available: "has(self.status) && self.status.phase == 'Ready'",
	Degraded:  "has(self.status) && self.status.phase == 'Broken'",
}}}

const gadgetGroup = "example.lodestar.dev"

// sliceSets are cluster sets the hub manages for tests that make fleets of their
// own (sliceFleet); nextSliceSet counts them out.
var (
	sliceSets    = []string{"lodestar-test-slice-0", "lodestar-test-slice-1", "lodestar-test-slice-2", "lodestar-test-slice-3"}
	nextSliceSet atomic.Int32
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr)))
	ctx, cancel := context.WithCancel(context.Background())
	// Stop the controllers before their API servers.
	defer stopFleet()
	defer cancel()

	if err := startFleet(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "starting the fleet:", err)
		return 1
	}
	return m.Run()
}

func startFleet(ctx context.Context) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	start := func(name string, f func() (*testenv.ControlPlane, error)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cp, err := f()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			if name == "hub" {
				hubCP = cp
			} else {
				members[name] = cp
			}
		}()
	}
	start("hub", func() (*testenv.ControlPlane, error) { return testenv.StartHub(scheme.Hub()) })
	for _, m := range testenv.DefaultMembers() {
		name := m.Name
		startMember := testenv.StartMember
		if name == fullMember {
			startMember = testenv.StartFullMember
		}
		start(name, func() (*testenv.ControlPlane, error) { return startMember(name, scheme.Agent()) })
	}
	wg.Wait()
	if len(errs) > 0 {
		return errs[0]
	}

	mgr, err := ctrl.NewManager(hubCP.Config, hub.ManagerOptions(ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	}, ""))
	if err != nil {
		return err
	}
	// Short grace periods, so that tests see a stopped agent's cluster become
	// unreachable, and a deleted one cleaned without its agent, in seconds.
	// The aux cluster set is managed (health, cleanup) but no namespace uses it
	// unless it says so.
	if err := hub.Setup(mgr, hub.Options{
		ClusterSetNamespaces: append([]string{scheduler.DefaultClusterSetNamespace, auxSet}, sliceSets...),
		LeaseGracePeriod:     2 * time.Second, CleanupGracePeriod: 3 * time.Second,
	}); err != nil {
		return err
	}
	// The debug API, served by the hub manager on this machine and registered
	// with the hub's API server as the hub chart does.
	debugListener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	if err := testenv.InstallDebugAPI(ctx, hubCP.Client, debugNamespace, testenv.Port(debugListener.Addr().String())); err != nil {
		return err
	}
	if debugServer, err = debugapi.Add(mgr, debugapi.Options{Listener: debugListener, Namespace: debugNamespace, ReplicaID: "hub-0", Recheck: 2 * time.Second,
		Local: map[string]debugapi.LocalHandler{debugv1alpha1.Fleet: renderctl.FleetOf, debugv1alpha1.Services: mcs.ReportsOf}}); err != nil {
		return err
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "hub manager stopped:", err)
		}
	}()

	for _, m := range testenv.DefaultMembers() {
		name := m.Name
		if err := members[name].InstallDebugRoles(ctx); err != nil {
			return err
		}
		cfg, err := testenv.Register(ctx, hubCP, m)
		if err != nil {
			return err
		}
		agentConfigs[name] = cfg
		// member-1's admin opts into member access: tokens of the API server's
		// shortest lifetime, renewed every few seconds (1% of it).
		var memberAccess *agent.MemberAccess
		if name == member1 {
			if err := memberAccessAccount(ctx, members[name]); err != nil {
				return err
			}
			memberAccess = &agent.MemberAccess{
				Server: members[name].Config.Host, CAData: members[name].Config.CAData,
				ServiceAccount: memberAccessSA, TTL: registration.MinMemberTokenTTL, RenewAt: 0.01,
			}
		}
		a, err := agent.NewManager(agent.Options{
			Debug:        debugOptions,
			MemberAccess: memberAccess,
			ClusterName:  name,
			Hub:          cfg,
			Member:       members[name].Config,
			Manager:      ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"},
			Config:       agentConfig,
			// The member's policy denies this namespace (and kube-system) to Works.
			AgentNamespace: "lodestar-system",
		})
		if err != nil {
			return err
		}
		go func() {
			if err := a.Start(ctx); err != nil {
				fmt.Fprintln(os.Stderr, "agent stopped:", name, err)
			}
		}()
	}
	return nil
}

func stopFleet() {
	stopExtraMembers()
	for _, cp := range append([]*testenv.ControlPlane{hubCP}, members[member1], members[member2]) {
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping a control plane:", err)
		}
	}
}

// The package's Gomega defaults, sized for a busy CI machine (testenv).
func init() {
	testenv.SetGomegaDefaults()
}
