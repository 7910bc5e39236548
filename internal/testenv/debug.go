package testenv

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1alpha1 "github.com/lodestar-dev/lodestar/api/debug/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/debugapi"
	"github.com/lodestar-dev/lodestar/internal/pki"
)

// FrontProxyClient is the name the API server's proxy to aggregated APIs
// presents (its request-header certificate's common name).
const FrontProxyClient = "front-proxy-client"

// frontProxy makes the request-header CA and the proxy's client certificate in
// dir and returns the API server flags that use them: what a kubeadm cluster
// configures, so that the hub serves aggregated APIs (the debug API).
func frontProxy(dir string) ([]APIServerFlag, error) {
	ca, err := pki.NewCA("front-proxy-ca", 10*365*24*time.Hour)
	if err != nil {
		return nil, err
	}
	crt, key, err := ca.Issue(FrontProxyClient, x509.ExtKeyUsageClientAuth, nil, nil, 10*365*24*time.Hour)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{"front-proxy-ca.crt": ca.PEM, "front-proxy-client.crt": crt, "front-proxy-client.key": key}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return nil, err
		}
	}
	return []APIServerFlag{
		{Name: "requestheader-client-ca-file", Value: filepath.Join(dir, "front-proxy-ca.crt")},
		{Name: "requestheader-allowed-names", Value: FrontProxyClient},
		{Name: "requestheader-username-headers", Value: "X-Remote-User"},
		{Name: "requestheader-uid-headers", Value: "X-Remote-Uid"},
		{Name: "requestheader-group-headers", Value: "X-Remote-Group"},
		{Name: "requestheader-extra-headers-prefix", Value: "X-Remote-Extra-"},
		{Name: "proxy-client-cert-file", Value: filepath.Join(dir, "front-proxy-client.crt")},
		{Name: "proxy-client-key-file", Value: filepath.Join(dir, "front-proxy-client.key")},
	}, nil
}

// InstallDebugAPI registers the debug API of a hub manager that serves it on
// this machine at port: the APIService the hub chart installs (made, or its
// port changed), and in place of the chart's ClusterIP Service one of type
// ExternalName for localhost, by which the hub API server reaches a local
// process. The hub manager publishes its CA in the APIService when it starts.
func InstallDebugAPI(ctx context.Context, c client.Client, namespace string, port int) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	key := client.ObjectKey{Namespace: namespace, Name: debugapi.DefaultService}
	svc := &corev1.Service{}
	switch err := c.Get(ctx, key, svc); {
	case err == nil && svc.Spec.Type == corev1.ServiceTypeExternalName:
	case err == nil || apierrors.IsNotFound(err):
		if err == nil {
			if err := c.Delete(ctx, svc); err != nil {
				return fmt.Errorf("replacing the debug API's Service: %w", err)
			}
		}
		svc = &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: debugapi.DefaultService},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"},
		}
		if err := c.Create(ctx, svc); err != nil {
			return fmt.Errorf("creating the debug API's Service: %w", err)
		}
	default:
		return err
	}
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(DebugAPIService(namespace, port)), client.FieldOwner("lodestar-testenv"), client.ForceOwnership)
}

// DebugAPIService is the debug APIService as the hub chart installs it, naming
// the Service's port.
func DebugAPIService(namespace string, port int) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": debugv1alpha1.APIServiceName},
		"spec": map[string]any{
			"group": debugv1alpha1.Group, "version": debugv1alpha1.Version, "groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
			"service": map[string]any{"namespace": namespace, "name": debugapi.DefaultService, "port": int64(port)},
		},
	}}
	return u
}

// Port is the port of a host:port address (0 when it has none).
func Port(hostport string) int {
	_, p, _ := net.SplitHostPort(hostport)
	n, _ := strconv.Atoi(p)
	return n
}

// debugging is what a full member's fake node serves for logs, exec and
// port-forward (kwok's ClusterLogs, ClusterExec and ClusterPortForward): every
// container's log is LogFile, exec runs the command on this machine in a
// directory of the member's, and a port-forward to any pod port reaches a
// local HTTP server that answers with the member's name.
type debugging struct {
	logFile    string
	config     string
	httpServer *http.Server
	httpAddr   string
}

// startDebugging writes the kwok configuration in dir and starts the local
// HTTP server behind port-forwards.
func startDebugging(name, dir string) (*debugging, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d := &debugging{logFile: filepath.Join(dir, "pods.log"), config: filepath.Join(dir, "kwok-debugging.yaml"), httpAddr: l.Addr().String()}
	d.httpServer = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprintf(w, "hello from %s\n", name)
	})}
	go func() { _ = d.httpServer.Serve(l) }()
	now := time.Now().UTC()
	lines := []string{
		CRILogLine(now.Add(-2*time.Hour), "starting on "+name),
		CRILogLine(now.Add(-time.Hour), "listening on :80"),
		CRILogLine(now.Add(-time.Second), "ready on "+name),
	}
	if err := os.WriteFile(d.logFile, []byte(strings.Join(lines, "")), 0o600); err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(d.httpAddr)
	conf := fmt.Sprintf(`kind: ClusterLogs
apiVersion: kwok.x-k8s.io/v1alpha1
metadata:
  name: lodestar-logs
spec:
  logs:
  - logsFile: %q
    previousLogsFile: %q
    follow: true
---
kind: ClusterExec
apiVersion: kwok.x-k8s.io/v1alpha1
metadata:
  name: lodestar-exec
spec:
  execs:
  - local:
      workDir: %q
---
kind: ClusterPortForward
apiVersion: kwok.x-k8s.io/v1alpha1
metadata:
  name: lodestar-port-forward
spec:
  forwards:
  - target:
      port: %s
      address: 127.0.0.1
`, d.logFile, d.logFile, dir, port)
	if err := os.WriteFile(d.config, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	return d, nil
}

// CRILogLine is a container log line as a container runtime writes it (and
// kwok reads it): time, stream, full-line tag, message.
func CRILogLine(t time.Time, msg string) string {
	return t.UTC().Format(time.RFC3339Nano) + " stdout F " + msg + "\n"
}

// AppendPodLog adds a line to the log every pod of a full member shows.
func (cp *ControlPlane) AppendPodLog(msg string) error {
	if cp.debugging == nil {
		return fmt.Errorf("%s runs no pods", cp.Name)
	}
	f, err := os.OpenFile(cp.debugging.logFile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(CRILogLine(time.Now(), msg)); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
