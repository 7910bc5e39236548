package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	debugv1alpha1 "github.com/lodestar-dev/lodestar/api/debug/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/agentidentity"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/testenv"
	"github.com/lodestar-dev/lodestar/internal/tunnel"
)

// debugClusters is how many clusters G1 streams from.
const debugClusters = 1000

// debugNamespace is where the hub manager keeps the debug API's certificate.
const debugNamespace = "lodestar-system"

const simulatedTunnels = "simulated: one real agent tunnel (internal/tunnel) per cluster, all in the benchmark's process, each serving the hub's requests as a member would (a pod list of one pod, and its log: a line a second)"

// installDebugAPI registers the hub manager's debug API, served on this
// machine at f.debugAddr, with the hub API server.
func (f *fleet) installDebugAPI(ctx context.Context) error {
	addr, err := testenv.FreeAddress()
	if err != nil {
		return err
	}
	f.debugAddr = addr
	return testenv.InstallDebugAPI(ctx, f.admin, debugNamespace, testenv.Port(addr))
}

// debugStreams is G1: `logs -f` across the fleet. Every simulated cluster's
// agent holds its tunnel to the hub manager; then one log stream per cluster
// is opened through the hub API server and the debug API and held while
// lines arrive. It reports the hub manager's memory with the tunnels alone and
// at the peak with every stream open.
func (f *fleet) debugStreams(ctx context.Context, record func(*Result) error) error {
	ns := "bench-debug"
	if err := f.app(ctx, ns); err != nil {
		return err
	}
	p := placementFor(ns, "web", map[string]string{"fleet": "sim"})
	if _, err := f.place(ctx, p, f.clusters, 10*time.Minute); err != nil {
		return fmt.Errorf("placing on %d clusters: %w", f.clusters, err)
	}
	n := min(f.clusters, debugClusters)
	idle := f.managerRSS()

	say("G1: opening %d agent tunnels", n)
	tunnelCtx, stopTunnels := context.WithCancel(ctx)
	defer stopTunnels()
	var lines atomic.Int64
	registry := make([]*tunnel.Agent, n)
	err := parallel(n, 32, func(i int) error {
		name := fmt.Sprintf("sim-%05d", i)
		cfg, err := f.agentIdentity(ctx, name)
		if err != nil {
			return err
		}
		a := &tunnel.Agent{Hub: cfg, Path: debugv1alpha1.TunnelPath(name), Handler: simulatedMember(name), Log: logr.Discard(),
			MinBackoff: time.Second, MaxBackoff: 10 * time.Second}
		registry[i] = a
		go func() { _ = a.Start(tunnelCtx) }()
		return nil
	})
	if err != nil {
		return err
	}
	start := time.Now()
	if _, err := waitFor(ctx, 3*time.Minute, 200*time.Millisecond, func() (bool, error) {
		for _, a := range registry {
			if a.Connected() == 0 {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return fmt.Errorf("waiting for the tunnels: %w", err)
	}
	tunnelsUp := time.Since(start)
	time.Sleep(5 * time.Second) // The tunnels' buffers settle before memory is read.
	withTunnels := f.managerRSS()

	say("G1: opening %d log streams (logs -f) through the hub", n)
	streamCtx, stopStreams := context.WithCancel(ctx)
	var (
		wg      sync.WaitGroup
		opened  atomic.Int64
		failed  atomic.Int64
		firstMu sync.Mutex
		first   error
	)
	start = time.Now()
	for i := range n {
		name := fmt.Sprintf("sim-%05d", i)
		cfg := rest.CopyConfig(f.adminCfg)
		cfg.Host = strings.TrimSuffix(cfg.Host, "/") + debugv1alpha1.PlacementPath(ns, "web", debugv1alpha1.Log, name)
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			stopStreams()
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := cs.CoreV1().Pods(ns).GetLogs("web-0", &corev1.PodLogOptions{Follow: true}).Stream(streamCtx)
			if err != nil {
				failed.Add(1)
				firstMu.Lock()
				if first == nil {
					first = err
				}
				firstMu.Unlock()
				return
			}
			defer func() { _ = s.Close() }()
			opened.Add(1)
			sc := bufio.NewScanner(s)
			for sc.Scan() {
				lines.Add(1)
			}
		}()
	}
	if _, err := waitFor(ctx, 3*time.Minute, 200*time.Millisecond, func() (bool, error) {
		return opened.Load()+failed.Load() >= int64(n), nil
	}); err != nil {
		stopStreams()
		wg.Wait()
		return fmt.Errorf("opening the streams (%d open, %d failed): %w", opened.Load(), failed.Load(), err)
	}
	openAll := time.Since(start)
	peak, before := 0.0, lines.Load()
	hold := 30 * time.Second
	for end := time.Now().Add(hold); time.Now().Before(end); {
		peak = max(peak, f.managerRSS())
		time.Sleep(time.Second) // Memory is sampled once a second.
	}
	rate := float64(lines.Load()-before) / hold.Seconds()
	stopStreams()
	wg.Wait()
	stopTunnels()
	if failed.Load() > 0 {
		return fmt.Errorf("%d of %d streams failed, the first: %w", failed.Load(), n, first)
	}

	r := &Result{Scenario: "G1", Description: fmt.Sprintf("logs -f across %d clusters: one agent tunnel per cluster and one followed log stream per cluster through the hub API server and the hub manager's debug API, held %s", n, hold), Members: simulatedTunnels}
	r.add("tunnels up", tunnelsUp.Seconds(), "s")
	r.add("streams open", openAll.Seconds(), "s")
	r.add("lines received", rate, "1/s")
	r.add("hub manager RSS before tunnels", idle, "MiB")
	r.add("hub manager RSS with tunnels", withTunnels, "MiB")
	r.add("hub manager RSS peak with streams", peak, "MiB")
	r.add("growth over tunnels-only baseline", peak-withTunnels, "MiB")
	say("G1: tunnels up in %s, %d streams open in %s, %.0f lines/s; hub manager %.0f → %.0f → peak %.0f MiB", tunnelsUp.Round(time.Millisecond), n, openAll.Round(time.Millisecond), rate, idle, withTunnels, peak)
	return record(r)
}

// agentIdentity makes a simulated cluster's agent identity on the hub as join
// does (its ServiceAccount, bound to open its tunnel) and returns a
// connection as it.
func (f *fleet) agentIdentity(ctx context.Context, cluster string) (*rest.Config, error) {
	ns := names.ClusterNamespace(cluster)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: agentidentity.ServiceAccount}}
	if err := f.admin.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lodestar-agent-tunnel"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{debugv1alpha1.Group}, Resources: []string{debugv1alpha1.Tunnels + "/" + debugv1alpha1.TunnelSubresource}, Verbs: []string{"create"}}}}
	if err := f.admin.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lodestar-agent-tunnel"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa.Name}}}
	if err := f.admin.Create(ctx, rb); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := f.admin.SubResource("token").Create(ctx, sa, tr); err != nil {
		return nil, err
	}
	cfg := rest.AnonymousClientConfig(f.adminCfg)
	cfg.BearerToken = tr.Status.Token
	return cfg, nil
}

// simulatedMember answers the hub's requests as a member's agent would: the
// pod list holds one pod, and its log is a line a second until the stream
// ends.
func simulatedMember(cluster string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/pods"):
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(&corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"},
				Items: []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "web-0"}}}})
		case strings.HasSuffix(r.URL.Path, "/log"):
			w.Header().Set("Content-Type", "text/plain")
			flusher, _ := w.(http.Flusher)
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for i := 0; ; i++ {
				if _, err := fmt.Fprintf(w, "%s line %d\n", cluster, i); err != nil {
					return
				}
				if flusher != nil {
					flusher.Flush()
				}
				select {
				case <-r.Context().Done():
					return
				case <-t.C:
				}
			}
		default:
			http.NotFound(w, r)
		}
	})
}
