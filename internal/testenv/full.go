package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// KwokEnv names the kwok binary that full members use for fake nodes.
const KwokEnv = "LODESTAR_KWOK"

// FakeNodeName is the fake node of a full member.
const FakeNodeName = "kwok-node-1"

// StartFullMember starts a member that runs workloads: besides kube-apiserver and
// etcd, kube-controller-manager and kube-scheduler, and kwok with one fake node, so
// that a Deployment really gets (fake) running pods and becomes Available.
func StartFullMember(name string, scheme *runtime.Scheme) (*ControlPlane, error) {
	return startFull(name, scheme, StartMember)
}

// StartFullEmpty is StartFullMember without the member CRDs: for installing them
// the way operators do (the agent chart).
func StartFullEmpty(name string, scheme *runtime.Scheme) (*ControlPlane, error) {
	return startFull(name, scheme, StartEmpty)
}

// StartFullHub is StartFullEmpty for a hub that runs workloads (an ordinary
// cluster), with the aggregation layer.
func StartFullHub(name string, scheme *runtime.Scheme) (*ControlPlane, error) {
	return startFull(name, scheme, StartEmptyHub)
}

// HubControllers are the kube-controller-manager controllers a hub started by
// StartHubCluster runs: those of a control plane that runs no workloads
// (namespace deletion, garbage collection, ClusterRole aggregation, service
// accounts and their tokens, the root CA ConfigMap, quotas). Deployments,
// ReplicaSets, Jobs and the like get no pods on such a hub, so the placed
// objects' status there is Lodestar's to reflect.
var HubControllers = []string{
	"namespace-controller", "garbage-collector-controller", "clusterrole-aggregation-controller",
	"serviceaccount-controller", "serviceaccount-token-controller", "legacy-serviceaccount-token-cleaner-controller",
	"root-ca-certificate-publisher-controller", "resourcequota-controller", "validatingadmissionpolicy-status-controller",
}

// StartHubCluster starts a hub that behaves as an ordinary control-plane-only
// cluster (the quick start's): kube-apiserver, etcd and kube-controller-manager
// with HubControllers, no CRDs (the hub chart installs them).
func StartHubCluster(name string, scheme *runtime.Scheme) (_ *ControlPlane, err error) {
	cp, dir, kubeconfig, err := startWithKubeconfig(name, scheme, StartEmptyHub)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, cp.Stop())
		}
	}()
	// The token controller signs with the API server's service-account key and
	// hands out its CA.
	certs := cp.env.ControlPlane.GetAPIServer().CertDir
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, cp.Config.CAData, 0o600); err != nil {
		return nil, err
	}
	args := append(controllerManagerArgs(kubeconfig, strings.Join(HubControllers, ",")),
		"--service-account-private-key-file="+filepath.Join(certs, "sa-signer.key"), "--root-ca-file="+ca)
	bin := filepath.Join(os.Getenv(AssetsEnv), "kube-controller-manager")
	if err := cp.spawn(bin, filepath.Join(dir, "kube-controller-manager.log"), args...); err != nil {
		return nil, err
	}
	return cp, nil
}

// controllerManagerArgs are kube-controller-manager's arguments for a test
// control plane, with the given controllers.
func controllerManagerArgs(kubeconfig, controllers string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig, "--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig,
		"--leader-elect=false", "--secure-port=0", "--use-service-account-credentials=false",
		"--controllers=" + controllers,
	}
}

// startWithKubeconfig starts an API server with startAPIServer and writes its
// admin kubeconfig into a directory of the control plane's.
func startWithKubeconfig(name string, scheme *runtime.Scheme, startAPIServer func(string, *runtime.Scheme) (*ControlPlane, error)) (_ *ControlPlane, dir, kubeconfig string, err error) {
	cp, err := startAPIServer(name, scheme)
	if err != nil {
		return nil, "", "", err
	}
	dir, err = os.MkdirTemp("", "lodestar-"+name+"-")
	if err != nil {
		return nil, "", "", errors.Join(err, cp.Stop())
	}
	cp.dirs = append(cp.dirs, dir)
	kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := WriteKubeconfig(cp.Config, name, kubeconfig); err != nil {
		return nil, "", "", errors.Join(err, cp.Stop())
	}
	return cp, dir, kubeconfig, nil
}

func startFull(name string, scheme *runtime.Scheme, startAPIServer func(string, *runtime.Scheme) (*ControlPlane, error)) (_ *ControlPlane, err error) {
	kwok := os.Getenv(KwokEnv)
	if kwok == "" {
		return nil, fmt.Errorf("%s is not set: run through `make test`, which builds kwok into bin/", KwokEnv)
	}
	cp, dir, kubeconfig, err := startWithKubeconfig(name, scheme, startAPIServer)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, cp.Stop())
		}
	}()
	if cp.debugging, err = startDebugging(name, dir); err != nil {
		return nil, err
	}
	kubeletAddr, err := FreeAddress()
	if err != nil {
		return nil, err
	}
	kubeletPort := Port(kubeletAddr)
	assets := os.Getenv(AssetsEnv)
	for _, p := range []struct {
		bin  string
		args []string
	}{
		{filepath.Join(assets, "kube-controller-manager"), append(controllerManagerArgs(kubeconfig, "*,-serviceaccount-token,-nodeipam"),
			"--node-monitor-grace-period=60s")},
		{filepath.Join(assets, "kube-scheduler"), []string{
			"--kubeconfig=" + kubeconfig, "--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig,
			"--leader-elect=false", "--secure-port=0",
		}},
		{kwok, []string{
			"--kubeconfig=" + kubeconfig, "--manage-all-nodes=true", "--cidr=10.244.0.0/16", "--node-ip=127.0.0.1",
			// Renew each node's Lease as a kubelet does (every 10 s). Without it
			// (kwok's own default), kube-controller-manager finds the node's
			// heartbeat late every --node-monitor-grace-period, marks it and its
			// pods not ready, and kwok readies them again: every placed Deployment
			// would stop being available for a moment once a minute.
			"--node-lease-duration-seconds=40",
			// The stages `make` assembles beside the binary from the kwok module.
			"--config=" + filepath.Join(filepath.Dir(kwok), "stages.yaml"),
			// The node's kubelet API on this machine only: logs, exec and
			// port-forward of its pods (startDebugging).
			"--config=" + cp.debugging.config,
			"--node-port=" + strconv.Itoa(kubeletPort), "--server-address=127.0.0.1:" + strconv.Itoa(kubeletPort),
		}},
	} {
		if err := cp.spawn(p.bin, filepath.Join(dir, filepath.Base(p.bin)+".log"), p.args...); err != nil {
			return nil, err
		}
	}
	if err := addFakeNode(context.Background(), cp.Client); err != nil {
		return nil, fmt.Errorf("adding the fake node to %s (logs in %s): %w", name, dir, err)
	}
	return cp, nil
}

// addFakeNode creates a node that kwok runs and waits until it is Ready.
func addFakeNode(ctx context.Context, c client.Client) error {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        FakeNodeName,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels:      map[string]string{"kubernetes.io/hostname": FakeNodeName, "kubernetes.io/os": "linux", "type": "kwok"},
		},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("110"),
			},
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("110"),
			},
		},
	}
	if err := c.Create(ctx, node); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil {
			return false, nil //nolint:nilerr // Keep polling through transient errors.
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

// spawn starts a process that belongs to the control plane and stops with it.
func (cp *ControlPlane) spawn(bin, logPath string, args ...string) error {
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("starting %s: %w", bin, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(done)
	}()
	cp.procs = append(cp.procs, process{cmd: cmd, done: done})
	return nil
}

type process struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// stopProcesses stops the extra processes: SIGTERM, then SIGKILL after a grace period.
func (cp *ControlPlane) stopProcesses() {
	for _, p := range cp.procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range cp.procs {
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	cp.procs = nil
}
