// Command devfleet runs a local Lodestar fleet for the quick start: a hub and two
// member control planes (real kube-apiserver and etcd processes), the hub manager
// and one agent per member (the real lodestar-hub and lodestar-agent binaries, each
// agent with its own least-privilege identity on the hub). It writes kubeconfigs
// into its directory, then runs until it receives SIGTERM or SIGINT, when it stops
// every process it started.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/lodestar-dev/lodestar/controllers/agent"
	"github.com/lodestar-dev/lodestar/controllers/hub"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

func main() {
	dir := flag.String("dir", ".lodestar/quickstart", "Directory for kubeconfigs, logs and the ready marker.")
	binDir := flag.String("bin", "bin", "Directory holding lodestar-hub and lodestar-agent.")
	flag.Parse()
	if err := run(*dir, *binDir); err != nil {
		fmt.Fprintln(os.Stderr, "devfleet:", err)
		os.Exit(1)
	}
}

func run(dir, binDir string) (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	logs := filepath.Join(dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return err
	}

	var planes []*testenv.ControlPlane
	var procs []*proc
	exited := make(chan *proc, 3)
	defer func() {
		for _, p := range procs {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, p := range procs {
			<-p.done
		}
		for _, cp := range planes {
			err = errors.Join(err, cp.Stop())
		}
	}()

	say("starting the hub control plane")
	hubCP, err := testenv.StartHub(hub.NewScheme())
	if err != nil {
		return err
	}
	planes = append(planes, hubCP)
	hubKubeconfig := filepath.Join(dir, "hub.kubeconfig")
	if err := testenv.WriteKubeconfig(hubCP.Config, "lodestar-hub", hubKubeconfig); err != nil {
		return err
	}
	hubProc, err := spawn(ctx, exited, filepath.Join(binDir, "lodestar-hub"), filepath.Join(logs, "lodestar-hub.log"),
		"--kubeconfig", hubKubeconfig, "--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	if err != nil {
		return err
	}
	procs = append(procs, hubProc)

	for _, m := range testenv.DefaultMembers() {
		say("starting member " + m.Name + " (API server, etcd, controller manager, scheduler, a kwok fake node) and joining it to the hub")
		cp, err := testenv.StartFullMember(m.Name, agent.NewScheme())
		if err != nil {
			return err
		}
		planes = append(planes, cp)
		memberKubeconfig := filepath.Join(dir, m.Name+".kubeconfig")
		if err := testenv.WriteKubeconfig(cp.Config, m.Name, memberKubeconfig); err != nil {
			return err
		}
		agentHub, err := testenv.Register(ctx, hubCP, m)
		if err != nil {
			return err
		}
		agentHubKubeconfig := filepath.Join(dir, m.Name+"-agent-hub.kubeconfig")
		if err := testenv.WriteKubeconfig(agentHub, "lodestar-hub", agentHubKubeconfig); err != nil {
			return err
		}
		p, err := spawn(ctx, exited, filepath.Join(binDir, "lodestar-agent"), filepath.Join(logs, "lodestar-agent-"+m.Name+".log"),
			"--cluster-name", m.Name, "--hub-kubeconfig", agentHubKubeconfig, "--kubeconfig", memberKubeconfig,
			"--metrics-bind-address", "0", "--health-probe-bind-address", "0")
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
		return fmt.Errorf("%s exited, see its log in %s: %w", filepath.Base(p.cmd.Path), logs, p.err)
	}
}

// proc is a started controller process.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// spawn starts bin with its output in logPath; when it exits, it is sent on exited.
func spawn(ctx context.Context, exited chan<- *proc, bin, logPath string, args ...string) (*proc, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
		select {
		case exited <- p:
		default:
		}
	}()
	return p, nil
}

func say(msg string) { fmt.Printf("%s devfleet: %s\n", time.Now().Format("15:04:05"), msg) }
