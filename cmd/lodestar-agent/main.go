// Command lodestar-agent runs on a member cluster: it pulls the Works of its
// cluster from the hub, applies them to the member and reports their status.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/agent"
	"github.com/lodestar-dev/lodestar/controllers/agent/debug"
	"github.com/lodestar-dev/lodestar/controllers/agent/registration"
	"github.com/lodestar-dev/lodestar/controllers/agent/work"
	"github.com/lodestar-dev/lodestar/internal/agentidentity"
	"github.com/lodestar-dev/lodestar/internal/run"
	"github.com/lodestar-dev/lodestar/internal/version"
)

func main() {
	var metricsAddr, probeAddr, pprofAddr, hubKubeconfig, clusterName, clusterSet, tokenFile, configPath string
	var tokenTTL, missingWorkGrace time.Duration
	agentNamespace := os.Getenv("POD_NAMESPACE")
	if agentNamespace == "" {
		agentNamespace = "lodestar-system"
	}
	var qps float64
	var burst int
	var hubID, tenantAccess string
	var debugTunnel, consumerAccess bool
	var consumerServer string
	var unservedGrace time.Duration
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "Address of the metrics endpoint; 0 disables it.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of the health and readiness probes; 0 disables them.")
	flag.StringVar(&pprofAddr, "pprof-bind-address", "", "Address of the Go profiling endpoint (net/http/pprof); empty disables it.")
	flag.StringVar(&hubKubeconfig, "hub-kubeconfig", "", "Kubeconfig of the agent's identity on the hub (required).")
	flag.StringVar(&clusterName, "cluster-name", "", "Name of this member cluster's ClusterProfile on the hub (required).")
	flag.StringVar(&clusterSet, "cluster-set", placementv1alpha1.DefaultClusterSet, "Cluster-set namespace of the cluster's ClusterProfile on the hub.")
	flag.StringVar(&tokenFile, "hub-token-file", "", "A writable file where the agent keeps its renewed hub token across restarts; empty keeps it in memory only.")
	flag.DurationVar(&tokenTTL, "hub-token-ttl", agentidentity.DefaultTokenTTL, "Lifetime of the hub tokens the agent renews itself (at least 10m).")
	flag.StringVar(&agentNamespace, "agent-namespace", agentNamespace, "The agent's own namespace on the member (default $POD_NAMESPACE or lodestar-system); Works may never write it.")
	flag.DurationVar(&missingWorkGrace, "missing-work-grace-period", work.DefaultMissingWorkGracePeriod, "How long a Work may be gone from the hub (its finalizer removed while the agent was away, say) before the agent removes what it placed for it.")
	flag.DurationVar(&unservedGrace, "unserved-kind-grace-period", work.DefaultUnservedKindGracePeriod, "How long cleanup waits for the member to serve a recorded object's kind again before it releases the record.")
	flag.StringVar(&hubID, "hub-id", "", "The hub's identity in the names of this member's AppliedWorks; empty derives it from the hub's address. Set it to the old identity when the hub moves to another address.")
	flag.StringVar(&configPath, "config", "", "The agent's configuration file (readiness rules, member policy); optional: what it does not set keeps the default policy.")
	var memberAccessServer, memberAccessCAFile, memberAccessSA string
	var memberAccessTTL time.Duration
	flag.StringVar(&memberAccessServer, "member-access-server", "", "Member access (opt-in): the member API server's address as consumers reach it; publishes it in the ClusterProfile's status.accessProviders and keeps a token of --member-access-service-account on the hub. Empty turns member access off.")
	flag.StringVar(&memberAccessCAFile, "member-access-ca-file", "", "Member access: PEM file of the CA of the member API server's certificate (default: the agent's own in-cluster CA).")
	flag.StringVar(&memberAccessSA, "member-access-service-account", "", "Member access: namespace/name of the member ServiceAccount whose tokens consumers use (default <agent namespace>/lodestar-member-access).")
	flag.DurationVar(&memberAccessTTL, "member-access-token-ttl", registration.DefaultMemberTokenTTL, "Member access: lifetime of the tokens (at least 10m); renewed at 80% of it.")
	flag.BoolVar(&debugTunnel, "debug-tunnel", true, "Keep tunnels to the hub's debug API open, through which hub users with access to a Placement read its pods' logs and events and exec into them (docs/debugging.md). The member needs no inbound port.")
	flag.StringVar(&tenantAccess, "debug-tenant-access", debug.TenantAccessLogs, "What the agent grants the member identity of a Placement's namespace (group lodestar:tenants:<namespace>) in that namespace: none (the member admin binds it), logs (pods, logs, events) or exec (also exec and port-forward).")
	flag.BoolVar(&consumerAccess, "consumer-access", true, "With --debug-tunnel: say in the ClusterProfile that the tunnel serves consumers (the hub then publishes the lodestar-tunnel access provider) and serve platform teams' controllers through it, each as its own member identity lodestar:consumer:<namespace>:<name> with the rules its ConsumerAccessGrants carry (docs/extending.md).")
	flag.StringVar(&consumerServer, "consumer-access-server", "", "Ignored: the hub publishes the lodestar-tunnel provider (the hub manager's --consumer-access-server); kept so that an older chart's flag does not stop the agent.")
	flag.Float64Var(&qps, "kube-api-qps", 50, "Queries per second to the hub and the member API servers (client-side limit each).")
	flag.IntVar(&burst, "kube-api-burst", 100, "Burst of queries above --kube-api-qps.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	showVersion := version.AddFlag(flag.CommandLine)
	flag.Parse()
	if showVersion.Print(os.Stdout, "lodestar-agent") {
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("lodestar-agent").WithValues("cluster", clusterName)

	if hubKubeconfig == "" || clusterName == "" {
		log.Error(nil, "Both --hub-kubeconfig and --cluster-name are required")
		os.Exit(2)
	}
	hubConfig, err := clientcmd.BuildConfigFromFlags("", hubKubeconfig)
	if err != nil {
		log.Error(err, "Reading the hub kubeconfig", "path", hubKubeconfig)
		os.Exit(1)
	}
	memberConfig := ctrl.GetConfigOrDie()
	hubConfig.QPS, hubConfig.Burst = float32(qps), burst
	memberConfig.QPS, memberConfig.Burst = float32(qps), burst
	// Without a file, the default member policy (policy.Defaults) protects the
	// member as the chart's install does.
	config := agent.DefaultConfig()
	if configPath != "" {
		if config, err = agent.LoadConfig(configPath); err != nil {
			log.Error(err, "Reading the configuration")
			os.Exit(1)
		}
	}
	var memberAccess *agent.MemberAccess
	if memberAccessServer != "" {
		if memberAccess, err = memberAccessOptions(memberAccessServer, memberAccessCAFile, memberAccessSA, agentNamespace, memberAccessTTL, memberConfig); err != nil {
			log.Error(err, "Member access")
			os.Exit(2)
		}
	}
	// The member connection comes from --kubeconfig, or in-cluster.
	var debugOpts *agent.Debug
	if debugTunnel {
		debugOpts = &agent.Debug{TenantAccess: tenantAccess, ConsumerAccess: consumerAccess}
	}
	mgr, err := agent.NewManager(agent.Options{
		Debug:                   debugOpts,
		MemberAccess:            memberAccess,
		ClusterName:             clusterName,
		ClusterSet:              clusterSet,
		AgentNamespace:          agentNamespace,
		TokenFile:               tokenFile,
		TokenTTL:                tokenTTL,
		MissingWorkGracePeriod:  missingWorkGrace,
		HubID:                   hubID,
		UnservedKindGracePeriod: unservedGrace,
		Hub:                     hubConfig,
		Member:                  memberConfig,
		Config:                  config,
		Manager: ctrl.Options{
			Metrics:                metricsserver.Options{BindAddress: metricsAddr},
			HealthProbeBindAddress: probeAddr,
			PprofBindAddress:       pprofAddr,
		},
	})
	if err != nil {
		log.Error(err, "Creating the agent")
		os.Exit(1)
	}
	log.Info("Starting")
	if err := run.Manager(mgr); err != nil {
		log.Error(err, "Running the agent")
		os.Exit(1)
	}
}

// memberAccessOptions reads the member-access flags.
func memberAccessOptions(server, caFile, sa, agentNamespace string, ttl time.Duration, member *rest.Config) (*agent.MemberAccess, error) {
	ma := &agent.MemberAccess{Server: server, TTL: ttl, ServiceAccount: types.NamespacedName{Namespace: agentNamespace, Name: "lodestar-member-access"}}
	if sa != "" {
		ns, name, ok := strings.Cut(sa, "/")
		if !ok || ns == "" || name == "" {
			return nil, fmt.Errorf("--member-access-service-account %q: namespace/name", sa)
		}
		ma.ServiceAccount = types.NamespacedName{Namespace: ns, Name: name}
	}
	switch {
	case caFile != "":
		ca, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--member-access-ca-file: %w", err)
		}
		ma.CAData = ca
	case len(member.CAData) > 0:
		ma.CAData = member.CAData
	case member.CAFile != "":
		ca, err := os.ReadFile(member.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading the member's CA: %w", err)
		}
		ma.CAData = ca
	}
	if ttl < registration.MinMemberTokenTTL {
		return nil, fmt.Errorf("--member-access-token-ttl %s: the API server issues tokens of at least %s", ttl, registration.MinMemberTokenTTL)
	}
	return ma, nil
}
