// Command node-reporter runs a replica of the node report controller
// (docs/examples/extending): on the hub, as the ServiceAccount the example's
// ConsumerAccessGrant names.
package main

import (
	"flag"
	"fmt"
	"os"

	"sigs.k8s.io/cluster-inventory-api/pkg/access"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/lodestar-dev/lodestar/docs/examples/extending/nodereport"
)

func main() {
	providerFile := access.SetupProviderFileFlag()
	clusterSet := flag.String("cluster-set", "lodestar-fleet", "The cluster set whose members get a node report.")
	replica := flag.String("replica", os.Getenv("POD_NAME"), "This replica's name (default $POD_NAME).")
	leaseNamespace := flag.String("lease-namespace", os.Getenv("POD_NAMESPACE"), "The hub namespace of the sharding Leases (default $POD_NAMESPACE).")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	if err := run(*providerFile, *clusterSet, *replica, *leaseNamespace); err != nil {
		fmt.Fprintln(os.Stderr, "node-reporter:", err)
		os.Exit(1)
	}
}

func run(providerFile, clusterSet, replica, leaseNamespace string) error {
	if replica == "" || leaseNamespace == "" {
		return fmt.Errorf("--replica and --lease-namespace are required outside a pod")
	}
	providers, err := access.NewFromFile(providerFile)
	if err != nil {
		return err
	}
	hub, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	return nodereport.Run(ctrl.SetupSignalHandler(), nodereport.Options{
		Hub: hub, ClusterSet: clusterSet, Access: providers, Replica: replica, LeaseNamespace: leaseNamespace,
	})
}
