// Command placements lists a hub's Placements with where they are, from a
// shared informer of the API module's generated clients: what a platform
// team's program needs of Lodestar, with no dependency on Lodestar's
// controllers or on controller-runtime (deps_test.go checks it).
//
//	go run github.com/lodestar-dev/lodestar/api/examples/placements --kubeconfig hub.kubeconfig
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/lodestar-dev/lodestar/api/client/clientset/versioned"
	"github.com/lodestar-dev/lodestar/api/client/informers/externalversions"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "The hub's kubeconfig.")
	flag.Parse()
	if err := run(*kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, "placements:", err)
		os.Exit(1)
	}
}

func run(kubeconfig string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cs, err := versioned.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	factory := externalversions.NewSharedInformerFactory(cs, 10*time.Minute)
	placements := factory.Placement().V1alpha1().Placements()
	lister := placements.Lister()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), placements.Informer().HasSynced) {
		return fmt.Errorf("the Placements did not sync")
	}
	list, err := lister.List(labels.Everything())
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAMESPACE\tNAME\tSELECTED\tAPPLIED")
	for _, p := range list {
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\n", p.Namespace, p.Name, deref(p.Status.SelectedClusters), deref(p.Status.AppliedClusters))
	}
	return w.Flush()
}

func deref(n *int32) int32 {
	if n == nil {
		return 0
	}
	return *n
}
