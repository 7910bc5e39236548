// Command wave-approver runs the example approver of Lodestar's External
// rollout strategy (docs/examples/extending/approver) on the hub.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/docs/examples/extending/approver"
)

func main() {
	metricURL := flag.String("metric-url", "", "URL whose body is the metric of a Placement (its namespace and name in the query).")
	threshold := flag.Float64("threshold", 0.01, "A wave starts only while the metric is below this.")
	waveSize := flag.Int("wave-size", 1, "Clusters per wave.")
	recheck := flag.Duration("recheck", 10*time.Second, "How often a held wave reads the metric again.")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	if err := run(*metricURL, *threshold, *waveSize, *recheck); err != nil {
		fmt.Fprintln(os.Stderr, "wave-approver:", err)
		os.Exit(1)
	}
}

func run(metricURL string, threshold float64, waveSize int, recheck time.Duration) error {
	if metricURL == "" {
		return fmt.Errorf("--metric-url is required")
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := placementv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	a := &approver.Approver{Client: mgr.GetClient(), Metric: approver.HTTPMetric(metricURL), Threshold: threshold, WaveSize: waveSize, Recheck: recheck}
	if err := a.SetupWithManager(mgr); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
