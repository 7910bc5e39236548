package testenv

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// HelmEnv names the helm binary that tests and the quick start use.
const HelmEnv = "LODESTAR_HELM"

// Helm4Env names the helm v4 binary that tests run beside helm v3.
const Helm4Env = "LODESTAR_HELM4"

// ReleaseNamespace is where the quick start and the tests install the charts.
const ReleaseNamespace = "lodestar-system"

// Helm runs the helm binary with home as its configuration, cache and data
// directory (nothing from the machine's own helm set-up) and returns its output.
func Helm(ctx context.Context, bin, home string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("helm %v: %w: %s", args, err, out.String())
	}
	return out.String(), nil
}

// ServiceAccountConfig returns a connection to admin's API server as the
// ServiceAccount namespace/name: a token for it (lasting ttl), not an admin
// credential, so that what the account's RBAC lacks fails.
func ServiceAccountConfig(ctx context.Context, admin *rest.Config, namespace, name string, ttl time.Duration) (*rest.Config, error) {
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, err
	}
	seconds := int64(ttl.Seconds())
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("a token for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	return &rest.Config{Host: admin.Host, BearerToken: tr.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: admin.CAData}}, nil
}

// BinEnv names the directory of the Lodestar binaries `make build` writes
// (bin/); `make test` sets it.
const BinEnv = "LODESTAR_BIN"

// Binary is the path of one of the Lodestar binaries (lodestar-hub,
// lodestar-agent, kubectl-lodestar), for tests that run them as processes.
func Binary(name string) (string, error) {
	dir := os.Getenv(BinEnv)
	if dir == "" {
		return "", fmt.Errorf("%s is not set: run the tests with `make test`, which builds %s into bin/ first", BinEnv, name)
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s: %w (run `make build`)", path, err)
	}
	return path, nil
}

// FreeAddress is a loopback address with a port free now, for a process's
// metrics or probes. The port is drawn below the kernel's ephemeral range
// (32768 and up on Linux), where the local ends of the tests' own client
// connections and the API servers' ports come from: a port from that range,
// free when looked at, is often taken again before the process binds it.
func FreeAddress() (string, error) {
	var last error
	for range 50 {
		port := freePortLow + rand.IntN(freePortHigh-freePortLow) //nolint:gosec // a port number, not a secret
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			last = err
			continue
		}
		addr := l.Addr().String()
		_ = l.Close()
		return addr, nil
	}
	return "", fmt.Errorf("no free loopback port between %d and %d: %w", freePortLow, freePortHigh, last)
}

// The ports FreeAddress draws from.
const freePortLow, freePortHigh = 20000, 32000
