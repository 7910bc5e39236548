// Command devfleet runs a local Lodestar fleet for the quick start, set up the way
// an operator sets up a real one: a control-plane-only hub
// (testenv.StartHubCluster) with the lodestar-hub chart installed by helm; two full members (kube-apiserver, etcd,
// kube-controller-manager, kube-scheduler and a kwok node each), each joined with
// `kubectl lodestar join` and given the lodestar-agent chart. Without a container
// runtime the Deployments the charts create do not run: their binaries run as
// local processes instead, with the arguments, configuration files, Secrets and
// environment of the Deployments helm installed (testenv.ChartProcess), as the
// charts' ServiceAccounts; only their ports differ. It writes kubeconfigs into
// its directory, then runs until it receives SIGTERM or SIGINT, when it stops
// every process it started.
package main

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/lodestar-dev/lodestar/internal/scheme"
	"github.com/lodestar-dev/lodestar/internal/testenv"
	"github.com/lodestar-dev/lodestar/internal/testenv/chartproc"
)

func main() {
	dir := flag.String("dir", ".lodestar/quickstart", "Directory for kubeconfigs, logs and the ready marker.")
	binDir := flag.String("bin", "bin", "Directory holding lodestar-hub, lodestar-agent and kubectl-lodestar.")
	helmBin := flag.String("helm", os.Getenv(testenv.HelmEnv), "The helm binary.")
	charts := flag.String("charts", "charts", "Directory holding the lodestar-hub and lodestar-agent charts.")
	flag.Parse()
	if err := run(*dir, *binDir, *helmBin, *charts); err != nil {
		fmt.Fprintln(os.Stderr, "devfleet:", err)
		os.Exit(1)
	}
}

// tokenTTL is how long the quick start's ServiceAccount tokens last.
const tokenTTL = 7 * 24 * time.Hour

func run(dir, binDir, helmBin, charts string) (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	logs := filepath.Join(dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return err
	}

	var planes []*testenv.ControlPlane
	var procs []*chartproc.Proc
	exited := make(chan *chartproc.Proc, 4)
	defer func() {
		for _, p := range procs {
			_ = p.Cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, p := range procs {
			<-p.Done()
		}
		for _, cp := range planes {
			err = errors.Join(err, cp.Stop())
		}
	}()

	helmHome := filepath.Join(dir, "helm")
	helm := func(kubeconfig string, args ...string) error {
		_, err := testenv.Helm(ctx, helmBin, helmHome, append(args, "--kubeconfig", kubeconfig, "--namespace", testenv.ReleaseNamespace, "--create-namespace")...)
		return err
	}
	// saKubeconfig writes a kubeconfig for a chart's ServiceAccount.
	saKubeconfig := func(admin *testenv.ControlPlane, name, path string) error {
		cfg, err := testenv.ServiceAccountConfig(ctx, admin.Config, testenv.ReleaseNamespace, name, tokenTTL)
		if err != nil {
			return err
		}
		return testenv.WriteKubeconfig(cfg, name, path)
	}

	say("starting the hub control plane and installing the lodestar-hub chart")
	hubCP, err := testenv.StartHubCluster("hub", scheme.Hub())
	if err != nil {
		return err
	}
	planes = append(planes, hubCP)
	hubKubeconfig := filepath.Join(dir, "hub.kubeconfig")
	if err := testenv.WriteKubeconfig(hubCP.Config, "lodestar-hub", hubKubeconfig); err != nil {
		return err
	}
	if err := helm(hubKubeconfig, "install", "lodestar-hub", filepath.Join(charts, "lodestar-hub")); err != nil {
		return err
	}
	// The chart's placement-writer policy admits Placements once the API
	// server has their CRD's schema, seconds after the install.
	if err := testenv.PlacementsAdmitted(ctx, hubCP.Client); err != nil {
		return err
	}
	managerKubeconfig := filepath.Join(dir, "hub-manager.kubeconfig")
	if err := saKubeconfig(hubCP, "lodestar-hub", managerKubeconfig); err != nil {
		return err
	}
	// Each process serves its metrics on a loopback port of its own, listed in
	// dir/metrics for the quick start to show (docs/metrics.md).
	metricsFile, err := os.Create(filepath.Join(dir, "metrics"))
	if err != nil {
		return err
	}
	defer func() { _ = metricsFile.Close() }()
	hubProcs, debugService, err := chartproc.SpawnHubChart(ctx, exited, hubCP, dir, managerKubeconfig, binDir, logs, metricsFile)
	procs = append(procs, hubProcs...)
	if err != nil {
		return err
	}
	defer debugService.Stop()

	for _, m := range testenv.DefaultMembers() {
		say("starting member " + m.Name + " (API server, etcd, controller manager, scheduler, a kwok fake node)")
		cp, err := testenv.StartFullMember(m.Name, scheme.Agent())
		if err != nil {
			return err
		}
		planes = append(planes, cp)
		// The storage the docs' stateful examples name (docs/stateful.md).
		if err := testenv.StandInStorage(ctx, cp.Client, []string{"standard", "replicated"}, time.Second); err != nil {
			return err
		}
		memberKubeconfig := filepath.Join(dir, m.Name+".kubeconfig")
		if err := testenv.WriteKubeconfig(cp.Config, m.Name, memberKubeconfig); err != nil {
			return err
		}
		say("joining " + m.Name + " with kubectl lodestar join, and installing the lodestar-agent chart on it")
		agentHubKubeconfig := filepath.Join(dir, m.Name+"-agent-hub.kubeconfig")
		join := []string{"join", m.Name, "--kubeconfig", hubKubeconfig, "--member-kubeconfig", memberKubeconfig,
			"--token-ttl", tokenTTL.String(), "--output", agentHubKubeconfig}
		for k, v := range m.Labels {
			join = append(join, "--label", k+"="+v)
		}
		if out, err := exec.CommandContext(ctx, filepath.Join(binDir, "kubectl-lodestar"), join...).CombinedOutput(); err != nil {
			return fmt.Errorf("kubectl lodestar join %s: %w: %s", m.Name, err, out)
		}
		install := []string{"install", "lodestar-agent", filepath.Join(charts, "lodestar-agent"),
			"--set", "clusterName=" + m.Name, "--set-file", "hubKubeconfig.kubeconfig=" + agentHubKubeconfig,
			// The members' admins let hub users exec and port-forward into their
			// Placements' pods too (docs/debugging.md), not only read them.
			"--set", "debug.tenantAccess=exec"}
		if m.Name == memberAccessCluster {
			install = append(install, memberAccessValues(cp)...)
		}
		if err := helm(memberKubeconfig, install...); err != nil {
			return err
		}
		agentKubeconfig := filepath.Join(dir, m.Name+"-agent.kubeconfig")
		if err := saKubeconfig(cp, "lodestar-agent", agentKubeconfig); err != nil {
			return err
		}
		p, err := chartproc.SpawnChart(ctx, exited, cp, "lodestar-agent", "agent", filepath.Join(dir, "lodestar-agent-"+m.Name), agentKubeconfig, binDir, logs, metricsFile)
		if err != nil {
			return err
		}
		procs = append(procs, p)
	}

	if err := os.WriteFile(filepath.Join(dir, "ready"), []byte(time.Now().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return err
	}
	say("fleet ready")

	// Run until told to stop, or until a controller process dies.
	select {
	case <-ctx.Done():
		say("stopping")
		return nil
	case p := <-exited:
		return fmt.Errorf("%s exited, see its log in %s: %w", filepath.Base(p.Cmd.Path), logs, p.Err)
	}
}

// memberAccessCluster is the quick-start member whose agent has member access
// on (docs/member-access.md): config/samples/member-access-grant.yaml grants
// it to platform-tools.
const memberAccessCluster = "member-1"

// memberAccessValues are the agent chart's values that turn member access on
// for a member: its API server as the hub reaches it (loopback), its CA, and
// consumers may list namespaces.
func memberAccessValues(cp *testenv.ControlPlane) []string {
	return []string{"--set", "memberAccess.enabled=true", "--set", "memberAccess.server=" + cp.Config.Host,
		"--set", "memberAccess.caBundle=" + base64.StdEncoding.EncodeToString(cp.Config.CAData),
		"--set-json", `memberAccess.rules=[{"apiGroups":[""],"resources":["namespaces"],"verbs":["get","list","watch"]}]`}
}

func say(msg string) { fmt.Printf("%s devfleet: %s\n", time.Now().Format("15:04:05"), msg) }
