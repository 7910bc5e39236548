// Package testenv starts real Kubernetes control planes (kube-apiserver and etcd,
// through controller-runtime's envtest) for a hub and its members, installs the
// Lodestar CRDs, and registers members on the hub until registration exists. Tests
// and the quick start use it alike.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/lodestar-dev/lodestar/api/client/clientset/versioned"
	"github.com/lodestar-dev/lodestar/config"
	"github.com/lodestar-dev/lodestar/internal/agentidentity"
	"github.com/lodestar-dev/lodestar/internal/fleet"
	"github.com/lodestar-dev/lodestar/internal/kubeconfig"
)

// AssetsEnv names the directory of the kube-apiserver, etcd and kubectl binaries.
const AssetsEnv = "KUBEBUILDER_ASSETS"

// How long tests on real API servers wait, sized for a loaded 2-core CI machine
// (Kubernetes being built beside the tests), not for an idle one. Each test
// package sets them once as its Gomega defaults (SetGomegaDefaults).
const (
	// EventuallyTimeout bounds an Eventually.
	EventuallyTimeout = 60 * time.Second
	// ConsistentlyDuration is how long a Consistently holds.
	ConsistentlyDuration = 2 * time.Second
	// PollInterval is how often both look.
	PollInterval = 100 * time.Millisecond
)

// SetGomegaDefaults makes these Gomega's defaults for Eventually and
// Consistently; each test package on real API servers calls it once.
func SetGomegaDefaults() {
	gomega.SetDefaultEventuallyTimeout(EventuallyTimeout)
	gomega.SetDefaultEventuallyPollingInterval(PollInterval)
	gomega.SetDefaultConsistentlyDuration(ConsistentlyDuration)
	gomega.SetDefaultConsistentlyPollingInterval(PollInterval)
}

// AgentServiceAccount is the name of each agent's ServiceAccount in its cluster's
// namespace on the hub.
const AgentServiceAccount = agentidentity.ServiceAccount

// ControlPlane is one running kube-apiserver with its etcd.
type ControlPlane struct {
	Name   string
	Config *rest.Config
	Client client.Client
	env    *envtest.Environment
	// procs are further processes (controller manager, scheduler, kwok) and dirs
	// their working directories.
	procs []process
	dirs  []string
	// debugging is what a full member's fake node serves for logs, exec and
	// port-forward.
	debugging *debugging
}

// Stop stops the processes of the control plane, the API server and etcd last.
func (cp *ControlPlane) Stop() error {
	if cp == nil || cp.env == nil {
		return nil
	}
	cp.stopProcesses()
	if cp.debugging != nil {
		_ = cp.debugging.httpServer.Close()
	}
	err := cp.env.Stop()
	for _, d := range cp.dirs {
		_ = os.RemoveAll(d)
	}
	cp.dirs = nil
	return err
}

// RestartAPIServer stops the kube-apiserver and starts it again on the same
// address, with the same certificates and the same etcd: what clients see of an
// API server upgrade or crash (connections cut, watches to be re-established).
func (cp *ControlPlane) RestartAPIServer() error {
	as := cp.env.ControlPlane.GetAPIServer()
	if err := as.Stop(); err != nil {
		return fmt.Errorf("stopping the %s API server: %w", cp.Name, err)
	}
	if err := as.Start(); err != nil {
		return fmt.Errorf("starting the %s API server again: %w", cp.Name, err)
	}
	return nil
}

// APIServerFlag sets a kube-apiserver flag of a control plane StartHub starts.
type APIServerFlag struct{ Name, Value string }

// AggregationLayer makes the API server serve aggregated APIs (the debug API)
// as every kubeadm, managed or kind cluster does: a request-header CA and a
// proxy client certificate of its own (frontProxy). Hubs have it; members,
// which serve no aggregated API, do not (each certificate file is one more
// inotify watcher of the API server's, of which a machine has few).
var AggregationLayer = APIServerFlag{Name: "lodestar:aggregation-layer"}

// QuickShutdown makes the API server stop within seconds even while clients hold
// watches open (it otherwise waits up to its one-minute request timeout), for
// tests that restart it.
var QuickShutdown = APIServerFlag{Name: "request-timeout", Value: "10s"}

// StartHub starts a hub control plane with the hub CRDs, admission policies and
// tenancy roles.
func StartHub(scheme *runtime.Scheme, flags ...APIServerFlag) (*ControlPlane, error) {
	crds, err := config.HubCRDs()
	if err != nil {
		return nil, err
	}
	cp, err := start("hub", scheme, crds, append([]APIServerFlag{AggregationLayer}, flags...)...)
	if err != nil {
		return nil, err
	}
	policies, err := config.HubAdmissionPolicies()
	if err != nil {
		return nil, errors.Join(err, cp.Stop())
	}
	roles, err := config.TenancyRoles()
	if err != nil {
		return nil, errors.Join(err, cp.Stop())
	}
	for _, r := range roles {
		policies = append(policies, r)
	}
	bindings, err := config.TenancyBindings()
	if err != nil {
		return nil, errors.Join(err, cp.Stop())
	}
	for _, b := range bindings {
		policies = append(policies, b)
	}
	for _, p := range policies {
		if err := cp.Client.Create(context.Background(), p); err != nil {
			return nil, errors.Join(fmt.Errorf("installing %T %s: %w", p, p.GetName(), err), cp.Stop())
		}
	}
	if err := PlacementsAdmitted(context.Background(), cp.Client); err != nil {
		return nil, errors.Join(err, cp.Stop())
	}
	return cp, nil
}

// PlacementsAdmitted waits until the hub stamps a Placement with its writer (a
// dry run): the lodestar-placement-writer policy stamps nothing until the API
// server has the Placement CRD's schema, seconds after both are installed.
func PlacementsAdmitted(ctx context.Context, c client.Client) error {
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "placement.lodestar.dev/v1alpha1", "kind": "Placement",
		"metadata": map[string]any{"name": "admission-probe", "namespace": "default"},
		"spec":     map[string]any{"resourceSelectors": []any{map[string]any{"version": "v1", "kind": "ConfigMap"}}},
	}}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got := probe.DeepCopy()
		if last = c.Create(ctx, got, client.DryRunAll); last != nil {
			return false, nil //nolint:nilerr // Keep polling; the last error is reported at the end.
		}
		if _, stamped := got.GetAnnotations()["placement.lodestar.dev/last-writer"]; !stamped {
			last = errors.New("the lodestar-placement-writer policy does not stamp Placements yet")
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("the hub admits no Placement: %w", errors.Join(err, last))
	}
	return nil
}

// StartEmpty starts a control plane with no CRDs: for installing them the way
// operators do (the charts).
func StartEmpty(name string, scheme *runtime.Scheme) (*ControlPlane, error) {
	return start(name, scheme, nil)
}

// StartEmptyHub is StartEmpty for a hub: with the aggregation layer.
func StartEmptyHub(name string, scheme *runtime.Scheme) (*ControlPlane, error) {
	return start(name, scheme, nil, AggregationLayer)
}

// StartMember starts a member control plane with the member CRDs.
func StartMember(name string, scheme *runtime.Scheme) (*ControlPlane, error) {
	return StartMemberWith(name, scheme)
}

// StartMemberWith is StartMember with API server flags (QuickShutdown, say).
func StartMemberWith(name string, scheme *runtime.Scheme, flags ...APIServerFlag) (*ControlPlane, error) {
	crds, err := config.MemberCRDs()
	if err != nil {
		return nil, err
	}
	return start(name, scheme, crds, flags...)
}

// InstallDebugRoles installs the member ClusterRoles of debugging from the hub
// as the agent chart does, for agents run without it.
func (cp *ControlPlane) InstallDebugRoles(ctx context.Context) error {
	roles, err := config.DebugMemberRoles()
	if err != nil {
		return err
	}
	for _, r := range roles {
		if err := cp.Client.Create(ctx, r); err != nil {
			return fmt.Errorf("installing ClusterRole %s on %s: %w", r.Name, cp.Name, err)
		}
	}
	return nil
}

func start(name string, scheme *runtime.Scheme, crds []*apiextensionsv1.CustomResourceDefinition, flags ...APIServerFlag) (*ControlPlane, error) {
	if os.Getenv(AssetsEnv) == "" {
		return nil, fmt.Errorf("%s is not set: run the tests through `make test`, which builds kube-apiserver and etcd into bin/", AssetsEnv)
	}
	env := &envtest.Environment{
		CRDInstallOptions:     envtest.CRDInstallOptions{CRDs: crds},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
	}
	// A certificate directory of our own (envtest removes one it made when the API
	// server stops), so that the API server can restart with the same certificates.
	certs, err := os.MkdirTemp("", "lodestar-"+name+"-certs-")
	if err != nil {
		return nil, err
	}
	env.ControlPlane.GetAPIServer().CertDir = certs
	// Logs, exec and port-forward reach a fake node at its InternalIP (kwok
	// names it by an unresolvable host name too).
	flags = append([]APIServerFlag{{Name: "kubelet-preferred-address-types", Value: "InternalIP"}}, flags...)
	if i := slices.Index(flags, AggregationLayer); i >= 0 {
		proxyFlags, err := frontProxy(certs)
		if err != nil {
			return nil, errors.Join(err, os.RemoveAll(certs))
		}
		flags = append(slices.Delete(flags, i, i+1), proxyFlags...)
	}
	for _, f := range flags {
		env.ControlPlane.GetAPIServer().Configure().Set(f.Name, f.Value)
	}
	// A graceful stop (RestartAPIServer) waits for the open watches to end.
	env.ControlPlaneStopTimeout = 2 * time.Minute
	cfg, err := env.Start()
	if err != nil {
		// Start may fail after the processes run (installing CRDs): stop them.
		return nil, errors.Join(fmt.Errorf("starting the %s control plane: %w", name, err), env.Stop(), os.RemoveAll(certs))
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, errors.Join(err, env.Stop(), os.RemoveAll(certs))
	}
	return &ControlPlane{Name: name, Config: cfg, Client: c, env: env, dirs: []string{certs}}, nil
}

// Member describes a member cluster to register on the hub.
type Member struct {
	// Name is the cluster's name, and its ClusterProfile's.
	Name string
	// Labels are the ClusterProfile's labels.
	Labels map[string]string
}

// DefaultMembers are the two members of the test fleet and the quick start.
func DefaultMembers() []Member {
	return []Member{
		{Name: "member-1", Labels: map[string]string{"env": "production", "region": "eu-west"}},
		{Name: "member-2", Labels: map[string]string{"env": "staging", "region": "us-east"}},
	}
}

// Register joins the member as `kubectl lodestar join` does (fleet.Join): its
// ClusterProfile in the default cluster set, its namespace, the agent's own
// identity bound only to the rules the agent's RBAC markers ask for, and returns a
// connection to the hub as that identity (a 48 h token).
func Register(ctx context.Context, hub *ControlPlane, m Member) (*rest.Config, error) {
	return fleet.Join(ctx, hub.Config, hub.Client, fleet.JoinOptions{Name: m.Name, Labels: m.Labels, TokenTTL: 48 * time.Hour})
}

// WriteKubeconfig writes a kubeconfig file for cfg, with context name name.
func WriteKubeconfig(cfg *rest.Config, name, path string) error {
	b, err := kubeconfig.For(cfg, name)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// RunWithHub is a TestMain body for a package whose tests share one hub: it starts
// the hub, runs setup, the tests, then what setup returned to stop (controllers
// before their API server), and stops the hub.
func RunWithHub(m interface{ Run() int }, scheme *runtime.Scheme, setup func(*ControlPlane) (stop func(), err error)) int {
	cp, err := StartHub(scheme)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = cp.Stop() }()
	stop, err := setup(cp)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if stop != nil {
		defer stop()
	}
	return m.Run()
}

// Typed is a typed client of Lodestar's API on the control plane (the API
// module's generated clientset).
func (cp *ControlPlane) Typed() versioned.Interface {
	return versioned.NewForConfigOrDie(cp.Config)
}
