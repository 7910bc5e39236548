// Command consumer lists the namespaces of member clusters through their
// ClusterProfiles' access providers (docs/member-access.md):
//
//	consumer --clusterprofile-provider-file providers.json --cluster-set lodestar-fleet member-1 member-2
//
// Its hub connection is $KUBECONFIG (or in-cluster): the consumer's own
// ServiceAccount, which may read ClusterProfiles and the Secrets of its namespace.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/cluster-inventory-api/pkg/access"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	consumer "github.com/lodestar-dev/lodestar/docs/examples/member-access"
)

func main() {
	providerFile := access.SetupProviderFileFlag()
	clusterSet := flag.String("cluster-set", "lodestar-fleet", "The cluster set (hub namespace) of the ClusterProfiles.")
	flag.Parse()
	if err := run(*providerFile, *clusterSet, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(providerFile, clusterSet string, clusters []string) error {
	providers, err := access.NewFromFile(providerFile)
	if err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	hub, err := client.New(cfg, client.Options{Scheme: consumer.Scheme()})
	if err != nil {
		return err
	}
	for _, cluster := range clusters {
		names, err := consumer.Namespaces(context.Background(), hub, providers, clusterSet, cluster)
		if err != nil {
			return err
		}
		fmt.Printf("%s: %s\n", cluster, strings.Join(names, " "))
	}
	return nil
}
