// Package run runs a controller manager as a process: with its health and
// readiness checks, until a termination signal.
package run

import (
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/manager/signals"
)

// Manager adds the health and readiness checks to mgr and runs it until a
// termination signal; it returns the error that stopped it.
func Manager(mgr manager.Manager) error {
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("adding the readiness check: %w", err)
	}
	return mgr.Start(signals.SetupSignalHandler())
}
