// Package chartproc runs the charts' Deployments as local processes, as helm
// installed them (testenv.ChartProcess), for the quick start and the install
// guide's test: there is no container runtime here.
package chartproc

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// Proc is a started local process.
type Proc struct {
	Cmd  *exec.Cmd
	done chan struct{}
	// Err is how it ended, once Done is closed.
	Err error
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Stop sends the process SIGTERM and waits for it to exit.
func (p *Proc) Stop() {
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	<-p.done
}

// Spawn starts bin with its output in logPath, with env added to this
// process's environment; when it exits, it is sent on exited (when not nil
// and not full).
func Spawn(ctx context.Context, exited chan<- *Proc, bin, logPath string, env []string, args ...string) (*Proc, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	p := &Proc{Cmd: cmd, done: make(chan struct{})}
	go func() {
		p.Err = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
		select {
		case exited <- p:
		default:
		}
	}()
	return p, nil
}

// SpawnChart starts the binary of a chart's Deployment (name, in
// testenv.ReleaseNamespace) as the chart installed it on cp: with its container's
// arguments, configuration files and environment (testenv.ChartProcess), as its
// ServiceAccount (kubeconfig, in place of the pod's in-cluster identity).
// Only the ports differ: local processes on one machine cannot all listen on
// the chart's. Its metrics address is written to metrics (when not nil) as
// "<process> <cluster> <url>"; flags are more flag name, value pairs.
func SpawnChart(ctx context.Context, exited chan<- *Proc, cp *testenv.ControlPlane, name, container, dir, kubeconfig, binDir, logs string, metrics io.Writer, flags ...string) (*Proc, error) {
	chart, err := testenv.FromDeployment(ctx, cp.Client, client.ObjectKey{Namespace: testenv.ReleaseNamespace, Name: name}, container, dir)
	if err != nil {
		return nil, err
	}
	addr, err := testenv.FreeAddress()
	if err != nil {
		return nil, err
	}
	if metrics != nil {
		if _, err := fmt.Fprintf(metrics, "%s %s http://%s/metrics\n", filepath.Base(dir), cp.Name, addr); err != nil {
			return nil, err
		}
	}
	chart.Set("kubeconfig", kubeconfig)
	chart.Set("metrics-bind-address", addr)
	chart.Set("health-probe-bind-address", "0")
	for i := 0; i+1 < len(flags); i += 2 {
		chart.Set(flags[i], flags[i+1])
	}
	return Spawn(ctx, exited, filepath.Join(binDir, name), filepath.Join(logs, filepath.Base(dir)+".log"), chart.Env, chart.Args...)
}

// SpawnHubChart starts as many hub manager processes as the lodestar-hub
// chart's Deployment on cp asks for (leader election picks one to lead; each
// serves the debug API), as the chart's ServiceAccount (managerKubeconfig),
// each in dir/lodestar-hub-<i>. The hub's API server reaches their debug API
// through an ExternalName Service for localhost in place of the chart's
// ClusterIP one (InstallDebugAPI) and the returned proxy, which spreads
// connections over the replicas as the Service would; call InstallDebugAPI
// again with its port after anything that puts the chart's Service back (a
// helm upgrade). On error, the processes already started are returned.
func SpawnHubChart(ctx context.Context, exited chan<- *Proc, cp *testenv.ControlPlane, dir, managerKubeconfig, binDir, logs string, metrics io.Writer) ([]*Proc, *testenv.Proxy, error) {
	d := &appsv1.Deployment{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: testenv.ReleaseNamespace, Name: "lodestar-hub"}, d); err != nil {
		return nil, nil, fmt.Errorf("reading the chart's Deployment lodestar-hub: %w", err)
	}
	replicas := 1
	if d.Spec.Replicas != nil {
		replicas = int(*d.Spec.Replicas)
	}
	addrs := make([]string, replicas)
	for i := range addrs {
		var err error
		if addrs[i], err = testenv.FreeAddress(); err != nil {
			return nil, nil, err
		}
	}
	proxy, err := testenv.StartProxy(addrs...)
	if err != nil {
		return nil, nil, err
	}
	if err := testenv.InstallDebugAPI(ctx, cp.Client, testenv.ReleaseNamespace, testenv.Port(proxy.Addr())); err != nil {
		proxy.Stop()
		return nil, nil, err
	}
	var procs []*Proc
	for i, addr := range addrs {
		name := fmt.Sprintf("lodestar-hub-%d", i)
		p, err := SpawnChart(ctx, exited, cp, "lodestar-hub", "manager", filepath.Join(dir, name), managerKubeconfig, binDir, logs, metrics,
			"debug-bind-address", addr, "debug-replica-id", name)
		if err != nil {
			return procs, proxy, err
		}
		procs = append(procs, p)
	}
	return procs, proxy, nil
}
