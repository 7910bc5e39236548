// Command cheapest-scheduler runs the example external scheduler
// (docs/examples/extending/cheapest) on the hub.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/docs/examples/extending/cheapest"
)

func main() {
	clusterSet := flag.String("cluster-set", "lodestar-fleet", "The cluster set to choose from.")
	name := flag.String("scheduler-name", "cheapest", "The schedulerName of the Placements it schedules.")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	if err := run(*clusterSet, *name); err != nil {
		fmt.Fprintln(os.Stderr, "cheapest-scheduler:", err)
		os.Exit(1)
	}
}

func run(clusterSet, name string) error {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, placementv1alpha1.AddToScheme, cpv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	if err := (&cheapest.Scheduler{Client: mgr.GetClient(), Name: name, ClusterSet: clusterSet}).SetupWithManager(mgr); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
