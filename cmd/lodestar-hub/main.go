// Command lodestar-hub runs the hub controllers: the scheduler, the work generator
// and the status aggregator.
package main

import (
	"flag"
	"os"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	debugv1alpha1 "github.com/lodestar-dev/lodestar/api/debug/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/hub"
	"github.com/lodestar-dev/lodestar/controllers/hub/clustercleanup"
	"github.com/lodestar-dev/lodestar/controllers/hub/clusterhealth"
	"github.com/lodestar-dev/lodestar/controllers/hub/scheduler"
	"github.com/lodestar-dev/lodestar/internal/debugapi"
	"github.com/lodestar-dev/lodestar/internal/mcs"
	"github.com/lodestar-dev/lodestar/internal/renderctl"
	"github.com/lodestar-dev/lodestar/internal/run"
	"github.com/lodestar-dev/lodestar/internal/version"
)

func main() {
	var (
		metricsAddr, probeAddr, pprofAddr, clusterSets, consumerServer string
		leaderElect                                                    bool
		leaderElectionNamespace, leaderElectionID                      string
		leaseDuration, renewDeadline, retryPeriod                      time.Duration
		qps                                                            float64
		burst, workers                                                 int
		leaseGrace, cleanupGrace, maxHeartbeat                         time.Duration
		heartbeatBudget                                                float64
		exportableNamespaces, managerName                              string
		hubWide                                                        bool
		debugOpts                                                      debugapi.Options
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "Address of the metrics endpoint; 0 disables it.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of the health and readiness probes; 0 disables them.")
	flag.StringVar(&pprofAddr, "pprof-bind-address", "", "Address of the Go profiling endpoint (net/http/pprof); empty disables it.")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader, so that several replicas can run.")
	flag.StringVar(&leaderElectionNamespace, "leader-election-namespace", os.Getenv("POD_NAMESPACE"), "Namespace of the leader election lease (default: $POD_NAMESPACE, which the chart sets to the pod's namespace).")
	flag.StringVar(&leaderElectionID, "leader-election-id", hub.DefaultLeaderElectionID, "Name of the leader election Lease: hub managers that manage other cluster sets on the same hub need their own (docs/scale.md).")
	flag.DurationVar(&leaseDuration, "leader-election-lease-duration", 15*time.Second, "How long a replica waits after the leader's last renewal before it takes over: a killed leader is replaced within this and one retry period.")
	flag.DurationVar(&renewDeadline, "leader-election-renew-deadline", 10*time.Second, "How long the leader tries to renew before it gives up leading (and exits, to start again as a candidate).")
	flag.DurationVar(&retryPeriod, "leader-election-retry-period", 2*time.Second, "How often the leader renews and the other replicas try to take over.")
	flag.StringVar(&clusterSets, "clusterset-namespaces", scheduler.DefaultClusterSetNamespace, "Comma-separated namespaces whose ClusterProfiles are scheduled.")
	flag.StringVar(&managerName, "hub-manager-name", hub.DefaultName, "This hub manager's name, marked on the namespaces of its cluster sets (label placement.lodestar.dev/hub-manager); it refuses to start on a set another manager marked (docs/scale.md).")
	flag.BoolVar(&hubWide, "hub-wide", true, "Take the hub-wide work: ClusterPlacements, the Placements of namespaces that bind no cluster set a manager marked, the agents' heartbeat pace. Exactly one hub manager release per hub is hub-wide; the others take only the namespaces that bind their cluster sets.")
	flag.Float64Var(&qps, "kube-api-qps", 200, "Queries per second to the hub API server (client-side limit); negative disables the limit.")
	flag.IntVar(&burst, "kube-api-burst", 400, "Burst of queries to the hub API server above --kube-api-qps.")
	flag.IntVar(&workers, "workers", hub.DefaultWorkers, "How many Placements each controller reconciles at once.")
	flag.DurationVar(&leaseGrace, "agent-lease-grace-period", clusterhealth.DefaultGracePeriod, "How long after its Lease expires an agent still counts as reachable.")
	flag.DurationVar(&cleanupGrace, "cluster-cleanup-grace-period", clustercleanup.DefaultGracePeriod, "How long a deleted cluster's unreachable agent has to remove what it placed before the hub removes the cluster's hub side without it (the member keeps its objects).")
	flag.Float64Var(&heartbeatBudget, "agent-heartbeat-write-budget", clusterhealth.DefaultHeartbeatWriteBudget, "Lease renewals per second the agents' heartbeats may cost the hub; their interval is set for the fleet's size to fit it (negative: the agents' own pace).")
	flag.DurationVar(&maxHeartbeat, "agent-heartbeat-max-interval", clusterhealth.DefaultMaxHeartbeatInterval, "The longest heartbeat interval asked of an agent, which bounds how long an agent that stopped goes unnoticed (this, its 30 s margin and the grace period).")
	flag.StringVar(&consumerServer, "consumer-access-server", "", "The hub API server's address as consumers of the agents' tunnels reach it, in the lodestar-tunnel access provider the hub publishes in each ClusterProfile (default: the manager's own connection's).")
	flag.StringVar(&exportableNamespaces, "exportable-namespaces", "", "Comma-separated namespaces among default and kube-* from which members may export Services (ServiceExport); exports from the others are Valid=False.")
	flag.StringVar(&debugOpts.BindAddress, "debug-bind-address", "", "Address (TLS) of the debug API (debug.lodestar.dev, an aggregated API of the hub's API server: docs/debugging.md); empty disables it.")
	flag.StringVar(&debugOpts.Namespace, "debug-namespace", os.Getenv("POD_NAMESPACE"), "Namespace of the debug API's Service and certificate Secret (default $POD_NAMESPACE).")
	flag.StringVar(&debugOpts.Service, "debug-service", debugapi.DefaultService, "The Service that the debug APIService names (its DNS names are the certificate's).")
	flag.StringVar(&debugOpts.Secret, "debug-serving-secret", debugapi.DefaultSecret, "Secret holding the debug API's serving certificate, made when missing; every replica serves the same.")
	flag.StringVar(&debugOpts.ReplicaID, "debug-replica-id", os.Getenv("POD_NAME"), "This replica's identity to the agents' tunnels (default $POD_NAME).")
	flag.IntVar(&debugOpts.Replicas, "debug-replicas", 1, "How many hub replicas serve the debug API: each agent holds a tunnel to every one.")
	flag.IntVar(&debugOpts.StreamsPerUser, "debug-streams-per-user", debugapi.DefaultStreamsPerUser, "Most open debug streams (logs, exec, port-forward) of one user on one replica.")
	flag.IntVar(&debugOpts.StreamsPerNamespace, "debug-streams-per-namespace", debugapi.DefaultStreamsPerNamespace, "Most open debug streams of one namespace's Placements on one replica, whoever opens them.")
	flag.DurationVar(&debugOpts.ConsumerRecheck, "debug-consumer-recheck", debugapi.DefaultConsumerRecheck, "How often an open stream of a consumer of the tunnel access provider is checked against the ConsumerAccessGrants: a revoked grant ends it within this (docs/extending.md).")
	flag.IntVar(&debugOpts.Streams, "debug-streams", debugapi.DefaultStreams, "Most open debug streams on one replica.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	showVersion := version.AddFlag(flag.CommandLine)
	flag.Parse()
	if showVersion.Print(os.Stdout, "lodestar-hub") {
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("lodestar-hub")

	cfg := ctrl.GetConfigOrDie()
	cfg.QPS, cfg.Burst = float32(qps), burst
	mgr, err := ctrl.NewManager(cfg, hub.ManagerOptions(ctrl.Options{
		Metrics:                 metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:  probeAddr,
		PprofBindAddress:        pprofAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        leaderElectionID,
		LeaderElectionNamespace: leaderElectionNamespace,
		// A replica that stops (a rolling upgrade, a drained node) hands over at
		// once instead of leaving the others to wait out the lease.
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &leaseDuration,
		RenewDeadline:                 &renewDeadline,
		RetryPeriod:                   &retryPeriod,
	}, managerName))
	if err != nil {
		log.Error(err, "Creating the manager")
		os.Exit(1)
	}
	if err := hub.Setup(mgr, hub.Options{ClusterSetNamespaces: strings.Split(clusterSets, ","), Name: managerName, SetsOnly: !hubWide, Workers: workers, LeaseGracePeriod: leaseGrace, CleanupGracePeriod: cleanupGrace,
		HeartbeatWriteBudget: heartbeatBudget, MaxHeartbeatInterval: maxHeartbeat, ExportableNamespaces: splitList(exportableNamespaces), ConsumerServer: consumerServer}); err != nil {
		log.Error(err, "Setting up the controllers")
		os.Exit(1)
	}
	if debugOpts.BindAddress != "" {
		if debugOpts.ReplicaID == "" {
			debugOpts.ReplicaID, _ = os.Hostname()
		}
		debugOpts.Local = map[string]debugapi.LocalHandler{debugv1alpha1.Fleet: renderctl.FleetOf, debugv1alpha1.Services: mcs.ReportsOf}
		if _, err := debugapi.Add(mgr, debugOpts); err != nil {
			log.Error(err, "Setting up the debug API")
			os.Exit(1)
		}
	}
	log.Info("Starting")
	if err := run.Manager(mgr); err != nil {
		log.Error(err, "Running the manager")
		os.Exit(1)
	}
}

// splitList splits a comma-separated flag, "" being none.
func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
