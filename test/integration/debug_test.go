package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1alpha1 "github.com/lodestar-dev/lodestar/api/debug/v1alpha1"
	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/agent"
	"github.com/lodestar-dev/lodestar/controllers/agent/debug"
	"github.com/lodestar-dev/lodestar/internal/debugapi"
	"github.com/lodestar-dev/lodestar/internal/fleet"
	"github.com/lodestar-dev/lodestar/internal/testenv"
	"github.com/lodestar-dev/lodestar/internal/tunnel"
)

// debugFleet is a namespace with the web Deployment placed on member-1 and
// member-3 (both run pods on a kwok node that serves logs, exec and
// port-forward), and a hub user of its own with the tenant and debug roles
// there.
type debugFleet struct {
	ns, user   string
	kubeconfig string
}

func newDebugFleet(t *testing.T) *debugFleet {
	t.Helper()
	extraMembers(t)
	g := NewWithT(t)
	ctx := t.Context()
	f := &debugFleet{ns: rolloutNamespace(t), user: "alice-" + rand.String(4)}
	_, deploy, _ := webObjects(f.ns)
	g.Expect(hubCP.Client.Create(ctx, deploy)).To(Succeed())
	g.Expect(hubCP.Client.Create(ctx, &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: f.ns}, Spec: placementv1alpha1.PlacementSpec{
		ResourceSelectors: []placementv1alpha1.ResourceSelector{{Group: "apps", Version: "v1", Kind: "Deployment", Name: "web"}},
		Scheduling:        placementv1alpha1.Scheduling{ClusterNames: []string{member1, member3}},
	}})).To(Succeed())
	for _, role := range []string{"lodestar:tenant", "lodestar:debug:view", "lodestar:debug:exec"} {
		bindUser(t, f.ns, f.user, role)
	}
	f.kubeconfig = filepath.Join(t.TempDir(), "hub.kubeconfig")
	g.Expect(testenv.WriteKubeconfig(hubCP.Config, "hub", f.kubeconfig)).To(Succeed())
	g.Eventually(func(g Gomega) {
		for _, c := range []string{member1, member3} {
			g.Expect(readyPodIPs(g, c, f.ns)).To(HaveLen(2), "web runs on %s", c)
			g.Expect(debugServer.Tunnels.Connected(c)).To(BeTrue(), "the agent of %s holds its tunnel", c)
		}
	}).Should(Succeed())
	// Each agent lets the namespace's hub users in (debug.tenantAccess) once it
	// placed there, a moment after the pods may already run.
	g.Eventually(func(g Gomega) {
		out, errOut, err := f.run(t, "pods", "web")
		g.Expect(err).NotTo(HaveOccurred(), errOut)
		g.Expect(errOut).To(BeEmpty())
		for _, c := range []string{member1, member3} {
			g.Expect(out).To(MatchRegexp(`(?m)^`+c+`\s+web-`), "the user reads the pods on %s", c)
		}
	}).Should(Succeed())
	return f
}

// bindUser binds a hub user to a ClusterRole in ns.
func bindUser(t *testing.T, ns, user, role string) *rbacv1.RoleBinding {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: strings.ReplaceAll(user+"-"+role, ":", "-")},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	NewWithT(t).Expect(hubCP.Client.Create(t.Context(), rb)).To(Succeed())
	return rb
}

// cli runs kubectl lodestar as the fleet's user in its namespace.
func (f *debugFleet) cli(ctx context.Context, stdout, stderr io.Writer, args ...string) *exec.Cmd {
	bin := filepath.Join(os.Getenv("LODESTAR_BIN"), "kubectl-lodestar")
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", f.kubeconfig, "--as", f.user, "-n", f.ns}, args...)...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	return cmd
}

// run runs kubectl lodestar to its end.
func (f *debugFleet) run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), testenv.EventuallyTimeout)
	defer cancel()
	err := f.cli(ctx, &out, &errOut, args...).Run()
	return out.String(), errOut.String(), err
}

// logsAs is a hub connection as user, to the debug API's path of the
// Placement web's logs on member-1.
func logsAs(user, ns string) *kubernetes.Clientset {
	cfg := rest.CopyConfig(hubCP.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	cfg.Host = strings.TrimSuffix(cfg.Host, "/") + debugv1alpha1.PlacementPath(ns, "web", debugv1alpha1.Log, member1)
	return kubernetes.NewForConfigOrDie(cfg)
}

var podLine = regexp.MustCompile(`^(member-1|member-3)/(web-[a-z0-9]+-[a-z0-9]+) (.*)$`)

// Logs, pods, events, exec and port-forward of a placed Deployment on two
// members, from the hub through the agents' tunnels (the hub has no address
// of the members' API servers): prefixed lines from every pod, --tail,
// --since and -f; both clusters' pods and events; `echo ok` through exec; an
// HTTP request through port-forward to the local server behind the kwok pod.
func TestDebugFromTheHub(t *testing.T) {
	f := newDebugFleet(t)
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	// The hub knows no address of member-3's API server: every request below
	// reaches it through its agent's outbound tunnel.
	// (Eventually: an agent an earlier test restarted publishes its provider
	// once its tunnel is up again.)
	g.Eventually(func(g Gomega) {
		profile := &cpv1alpha1.ClusterProfile{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: auxSet, Name: member3}, profile)).To(Succeed())
		g.Expect(profile.Status.AccessProviders).To(ConsistOf(HaveField("Cluster.Server", strings.TrimSuffix(hubCP.Config.Host, "/")+debugv1alpha1.ClusterProxyPath(member3))))
	}).Should(Succeed())

	out, errOut, err := f.run(t, "pods", "web", "-o", "wide")
	g.Expect(err).NotTo(HaveOccurred(), errOut)
	g.Expect(strings.Split(strings.TrimSpace(out), "\n")).To(HaveLen(5), out)
	g.Expect(out).To(MatchRegexp(`(?m)^CLUSTER\s+NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\s+IP\s+NODE`))
	g.Expect(out).To(MatchRegexp(`(?m)^member-1\s+web-\S+\s+1/1\s+Running\s+0`))
	g.Expect(out).To(MatchRegexp(`(?m)^member-3\s+web-\S+\s+1/1\s+Running\s+0`))

	// --tail 2: the last two lines of each of the four pods, prefixed.
	out, errOut, err = f.run(t, "logs", "web", "--tail", "2")
	g.Expect(err).NotTo(HaveOccurred(), errOut)
	g.Expect(errOut).To(BeEmpty())
	lines := strings.Split(strings.TrimSpace(out), "\n")
	g.Expect(lines).To(HaveLen(8), out)
	pods := map[string]int{}
	for _, l := range lines {
		m := podLine.FindStringSubmatch(l)
		g.Expect(m).NotTo(BeNil(), "line %q is prefixed <cluster>/<pod>", l)
		g.Expect(m[3]).To(Or(Equal("listening on :80"), Equal("ready on "+m[1])))
		pods[m[1]+"/"+m[2]]++
	}
	g.Expect(pods).To(HaveLen(4))
	// --since 90m: not the line of two hours ago.
	out, errOut, err = f.run(t, "logs", "deploy/web", "--since", "90m", "--cluster", member3)
	g.Expect(err).NotTo(HaveOccurred(), errOut)
	g.Expect(out).To(ContainSubstring("listening on :80"))
	g.Expect(out).NotTo(ContainSubstring("starting on"))
	g.Expect(out).NotTo(ContainSubstring("member-1/"))

	// -f: a line written on member-1 after the stream opened arrives.
	followCtx, stop := context.WithCancel(ctx)
	defer stop()
	var mu sync.Mutex
	var followed bytes.Buffer
	cmd := f.cli(followCtx, &lockedWriter{mu: &mu, w: &followed}, io.Discard, "logs", "web", "-f", "--tail", "1", "--cluster", member1)
	g.Expect(cmd.Start()).To(Succeed())
	defer func() { _ = cmd.Wait() }()
	read := func() string { mu.Lock(); defer mu.Unlock(); return followed.String() }
	g.Eventually(read).Should(ContainSubstring("ready on member-1"))
	fresh := "a new line " + rand.String(6)
	g.Expect(members[member1].AppendPodLog(fresh)).To(Succeed())
	g.Eventually(read).Should(MatchRegexp(`(?m)^member-1/web-\S+ ` + fresh + `$`))
	stop()

	// Events of both members, with the cluster of each.
	out, errOut, err = f.run(t, "events", "web")
	g.Expect(err).NotTo(HaveOccurred(), errOut)
	g.Expect(out).To(MatchRegexp(`(?m)^LAST SEEN\s+CLUSTER\s+TYPE\s+REASON\s+OBJECT\s+MESSAGE`))
	for _, c := range []string{member1, member3} {
		g.Expect(out).To(MatchRegexp(`(?m)^\S+\s+`+c+`\s+Normal\s+ScalingReplicaSet\s+deployment/web`), "the Deployment's events on %s", c)
		g.Expect(out).To(MatchRegexp(`(?m)^\S+\s+`+c+`\s+Normal\s+Scheduled\s+pod/web-`), "its pods' events on %s", c)
	}

	// exec and port-forward into one pod of each member.
	pod1 := podOn(t, member1, f.ns)
	out, errOut, err = f.run(t, "exec", "--cluster", member1, pod1, "--", "echo", "ok")
	g.Expect(err).NotTo(HaveOccurred(), errOut)
	g.Expect(out).To(Equal("ok\n"))

	pod3 := podOn(t, member3, f.ns)
	pfCtx, stopPF := context.WithCancel(ctx)
	defer stopPF()
	pr, pw := io.Pipe()
	pf := f.cli(pfCtx, pw, io.Discard, "port-forward", "--cluster", member3, pod3, ":80")
	g.Expect(pf.Start()).To(Succeed())
	defer func() { _ = pf.Wait() }()
	local := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := regexp.MustCompile(`Forwarding from (127\.0\.0\.1:\d+) -> 80`).FindStringSubmatch(sc.Text()); m != nil {
				local <- m[1]
			}
		}
	}()
	var addr string
	g.Eventually(local).Should(Receive(&addr))
	resp, err := http.Get("http://" + addr + "/")
	g.Expect(err).NotTo(HaveOccurred())
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	g.Expect(string(body)).To(Equal("hello from member-3\n"))
	stopPF()
	_ = pw.Close()
}

// podOn is the name of one web pod on cluster.
func podOn(t *testing.T, cluster, ns string) string {
	t.Helper()
	pods := &corev1.PodList{}
	NewWithT(t).Expect(members[cluster].Client.List(t.Context(), pods, client.InNamespace(ns), client.MatchingLabels{"app": "web"})).To(Succeed())
	NewWithT(t).Expect(pods.Items).NotTo(BeEmpty())
	return pods.Items[0].Name
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// The hub decides who may reach what: a user with the debug roles in the
// Placement's namespace reads its pods' logs, and gets 403 from the hub for
// another namespace on the same member, for a namespace where they have no
// role, and from the agent for a pod the Placement did not place. The member
// sees the prefixed identity (its own RBAC message names it), and revoking the
// hub RoleBinding ends an open stream.
func TestDebugAuthorisation(t *testing.T) {
	f := newDebugFleet(t)
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	pod := podOn(t, member1, f.ns)
	logs := logsAs(f.user, f.ns).CoreV1()
	err := logs.Pods(f.ns).GetLogs(pod, &corev1.PodLogOptions{}).Do(ctx).Error()
	g.Expect(err).NotTo(HaveOccurred())

	// Another namespace on the same member, through the user's Placement.
	err = logs.Pods("kube-system").GetLogs("kube-apiserver", &corev1.PodLogOptions{}).Do(ctx).Error()
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("reaches only namespace "+f.ns), "%#v", err)
	// A namespace where the user has no role: the hub API server refuses.
	other := rolloutNamespace(t)
	err = logsAs(f.user, other).CoreV1().Pods(other).GetLogs(pod, &corev1.PodLogOptions{}).Do(ctx).Error()
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	// A pod of the namespace the Placement did not place.
	stray := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "stray"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Image: "example.com/stray"}}}}
	g.Expect(members[member1].Client.Create(ctx, stray)).To(Succeed())
	err = logs.Pods(f.ns).GetLogs("stray", &corev1.PodLogOptions{}).Do(ctx).Error()
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("not one of Placement"))
	out, _, err := f.run(t, "pods", "web", "--cluster", member1)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).NotTo(ContainSubstring("stray"))

	// The member sees lodestar:hub:<user>: without the agent's RoleBinding for
	// the tenant group, the member's RBAC refuses that user by name.
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: debug.TenantRoleBinding}}
	g.Expect(members[member1].Client.Get(ctx, client.ObjectKeyFromObject(binding), binding)).To(Succeed())
	g.Expect(binding.Subjects).To(ConsistOf(HaveField("Name", debugv1alpha1.TenantGroup(f.ns))))
	g.Expect(members[member1].Client.Delete(ctx, binding)).To(Succeed())
	err = logs.Pods(f.ns).GetLogs(pod, &corev1.PodLogOptions{}).Do(ctx).Error()
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring(`User "lodestar:hub:` + f.user + `"`))
	binding.ResourceVersion = ""
	g.Expect(members[member1].Client.Create(ctx, binding)).To(Succeed())

	// Revoking the hub role ends an open session (the debug server checks
	// again every 2 s in these tests, 20 s by default): a port-forward session,
	// which holds nothing of the fake node's while idle.
	bob := "bob-" + rand.String(4)
	rb := bindUser(t, f.ns, bob, "lodestar:debug:exec")
	session, err := portForwardDialer(t, bob, f.ns, pod)()
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = session.Close() }()
	g.Consistently(session.CloseChan()).ShouldNot(BeClosed())
	g.Expect(hubCP.Client.Delete(ctx, rb)).To(Succeed())
	g.Eventually(session.CloseChan()).Should(BeClosed())
	_, err = portForwardDialer(t, bob, f.ns, pod)()
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("forbidden"))

	// The member's namespace deleted and made again (the agent places it
	// anew): the agent binds the tenant group in the new one too, without a
	// restart (it remembered the old namespace's binding as done).
	old := &corev1.Namespace{}
	g.Expect(members[member1].Client.Get(ctx, client.ObjectKey{Name: f.ns}, old)).To(Succeed())
	g.Expect(members[member1].Client.Delete(ctx, old)).To(Succeed())
	g.Eventually(func(g Gomega) {
		ns := &corev1.Namespace{}
		g.Expect(members[member1].Client.Get(ctx, client.ObjectKey{Name: f.ns}, ns)).To(Succeed())
		g.Expect(ns.UID).NotTo(Equal(old.UID), "made again")
		g.Expect(readyPodIPs(g, member1, f.ns)).To(HaveLen(2), "web runs again")
	}, 3*testenv.EventuallyTimeout).Should(Succeed())
	g.Eventually(func(g Gomega) {
		pod := podOn(t, member1, f.ns)
		g.Expect(logs.Pods(f.ns).GetLogs(pod, &corev1.PodLogOptions{}).Do(ctx).Error()).To(Succeed())
	}).Should(Succeed())
}

// portForwarding is an open port-forward session.
type portForwarding interface {
	io.Closer
	CloseChan() <-chan bool
}

// portForwardDialer opens port-forward sessions to pod on member-1 as user,
// through the Placement web of ns.
func portForwardDialer(t *testing.T, user, ns, pod string) func() (portForwarding, error) {
	t.Helper()
	cfg := rest.CopyConfig(hubCP.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	cfg.Host = strings.TrimSuffix(cfg.Host, "/") + debugv1alpha1.PlacementPath(ns, "web", debugv1alpha1.PortForward, member1)
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	u := kubernetes.NewForConfigOrDie(cfg).CoreV1().RESTClient().Post().Namespace(ns).Resource("pods").Name(pod).SubResource("portforward").URL()
	return func() (portForwarding, error) {
		conn, _, err := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u).Dial(portforward.PortForwardProtocolV1Name)
		return conn, err
	}
}

// An agent carries only its own cluster's traffic: member-2's agent cannot
// open member-1's tunnel, neither in member-1's namespace (the hub's RBAC)
// nor by naming member-1 in its own (the debug server binds a tunnel to the
// agent's hub identity). A stopped agent's tunnel is back within 10 s of its
// restart. The stream limit refuses the 51st open stream of one user.
func TestDebugTunnelsAndLimits(t *testing.T) {
	f := newDebugFleet(t)
	g := NewWithT(t)
	for _, path := range []string{
		debugv1alpha1.TunnelPath(member1),
		strings.Replace(debugv1alpha1.TunnelPath(member1), "lodestar-cluster-member-1/", "lodestar-cluster-member-2/", 1),
	} {
		code, body := tunnelAttempt(t, agentConfigs[member2], path)
		g.Expect(code).To(Equal(http.StatusForbidden), "%s: %s", path, body)
	}
	g.Expect(debugServer.Tunnels.Connected(member1)).To(BeTrue())

	stopExtraAgent(member3)
	g.Eventually(func() bool { return debugServer.Tunnels.Connected(member3) }).Should(BeFalse())
	restarted := time.Now()
	restartExtraAgent(t, member3)
	g.Eventually(func() bool { return debugServer.Tunnels.Connected(member3) }).WithTimeout(10 * time.Second).Should(BeTrue())
	t.Logf("member-3's tunnel back %s after its agent restarted", time.Since(restarted).Round(time.Millisecond))

	// Open port-forward sessions hold their streams without using the fake
	// node (kwok's followed logs each take an inotify instance, of which a
	// test machine may have few).
	dial := portForwardDialer(t, f.user, f.ns, podOn(t, member1, f.ns))
	var sessions []portForwarding
	defer func() {
		for _, s := range sessions {
			_ = s.Close()
		}
	}()
	for range debugapi.DefaultStreamsPerUser {
		conn, err := dial()
		g.Expect(err).NotTo(HaveOccurred())
		sessions = append(sessions, conn)
	}
	_, err := dial()
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring(fmt.Sprintf("has %d debug streams open, the most one user may", debugapi.DefaultStreamsPerUser)))
	_ = sessions[0].Close()
	sessions = sessions[1:]
	g.Eventually(func() error {
		conn, err := dial()
		if err == nil {
			sessions = append(sessions, conn)
		}
		return err
	}).Should(Succeed(), "a closed session frees its place")
}

// tunnelAttempt opens a tunnel on path with the agent identity cfg and returns
// the hub's answer.
func tunnelAttempt(t *testing.T, cfg *rest.Config, path string) (int, string) {
	t.Helper()
	c := rest.CopyConfig(cfg)
	c.NextProtos = []string{"http/1.1"}
	rt, err := rest.TransportFor(c)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, strings.TrimSuffix(c.Host, "/")+path, nil)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", tunnel.Protocol)
	resp, err := rt.RoundTrip(req)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(body)
}

// The debugging example: alice, bound to lodestar:debug:view, reads the logs
// of the web app's pods on the production cluster (member-1) with
// kubectl lodestar, and may not exec into them.
func TestDebuggingExamples(t *testing.T) {
	applyExamples(t, "debugging", 1, map[string]func(t *testing.T, ns string){
		"01-debug-access.yaml": func(t *testing.T, ns string) {
			g := NewWithT(t)
			kubeconfig := filepath.Join(t.TempDir(), "hub.kubeconfig")
			g.Expect(testenv.WriteKubeconfig(hubCP.Config, "hub", kubeconfig)).To(Succeed())
			f := &debugFleet{ns: ns, user: "alice", kubeconfig: kubeconfig}
			g.Eventually(func(g Gomega) {
				g.Expect(readyPodIPs(g, member1, ns)).To(HaveLen(2))
			}).Should(Succeed())
			out, errOut, err := f.run(t, "logs", "web", "--tail", "1")
			g.Expect(err).NotTo(HaveOccurred(), errOut)
			// The last line of each pod's log (the fake node's log file, which
			// other tests add to).
			g.Expect(strings.Split(strings.TrimSpace(out), "\n")).To(HaveEach(MatchRegexp(`^member-1/web-\S+ \S`)))
			g.Expect(strings.Split(strings.TrimSpace(out), "\n")).To(HaveLen(2))
			_, errOut, err = f.run(t, "exec", "--cluster", member1, podOn(t, member1, ns), "--", "echo", "ok")
			g.Expect(err).To(HaveOccurred())
			g.Expect(errOut).To(And(ContainSubstring(`"alice"`), ContainSubstring("placements/exec")))
		},
	})
}

// Revoking a cluster's agent identity cuts its open tunnel: no debug session
// reaches the member through it any more (the agent's renewed token is refused
// too, so it stays cut until the cluster joins again). On earlier mains a
// tunnel was authorised once, when it opened, and lived on.
func TestRevokeCutsTheOpenTunnel(t *testing.T) {
	g := NewWithT(t)
	name, _, _ := runAux(t, "tunnel", func(o *agent.Options) { o.Debug = debugOptions })
	g.Eventually(func() bool { return debugServer.Tunnels.Connected(name) }).Should(BeTrue())
	revoked := time.Now()
	g.Expect(fleet.Revoke(t.Context(), hubCP.Client, name)).To(Succeed())
	g.Eventually(func() bool { return debugServer.Tunnels.Connected(name) }).Should(BeFalse())
	t.Logf("the tunnel was cut %s after the revoke", time.Since(revoked).Round(time.Millisecond))
	g.Consistently(func() bool { return debugServer.Tunnels.Connected(name) }, "3s").Should(BeFalse(), "the revoked identity opens no tunnel again")
}

// Debugging acts only on what Lodestar placed, by UID: a member-local
// Deployment that shares its name with a ReportOnly manifest (which the agent
// compares and never applies) is not the Placement's, so neither its logs
// nor its pods are reachable through it. On earlier mains ownership went by
// the names in the Work, and the member-local pods were the tenant's to read
// and exec into.
func TestDebugActsOnlyOnWhatLodestarPlaced(t *testing.T) {
	f := newDebugFleet(t)
	g := NewWithT(t)
	ctx := t.Context()
	_, local, _ := webObjects(f.ns)
	local.Name, local.Spec.Replicas = "local", ptr.To[int32](1)
	local.Spec.Selector.MatchLabels = map[string]string{"app": "local"}
	local.Spec.Template.Labels = map[string]string{"app": "local"}
	createOn(t, member1, local.DeepCopy())
	g.Expect(hubCP.Client.Create(ctx, local)).To(Succeed())
	p := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "local", Namespace: f.ns}, Spec: placementv1alpha1.PlacementSpec{
		ResourceSelectors: []placementv1alpha1.ResourceSelector{{Group: "apps", Version: "v1", Kind: "Deployment", Name: "local"}},
		Scheduling:        placementv1alpha1.Scheduling{ClusterNames: []string{member1}},
		ApplyStrategy:     &lodestarworkv1alpha1.ApplyStrategy{Type: lodestarworkv1alpha1.ApplyReportOnly},
	}}
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	var pod string
	g.Eventually(func(g Gomega) {
		w := workOf(g, p, member1)
		g.Expect(w).NotTo(BeNil(), "the Work is there")
		if w == nil {
			return
		}
		c := manifestCondition(g, w, 0, lodestarworkv1alpha1.ConditionApplied)
		if c == nil {
			return
		}
		g.Expect(c.ObservedGeneration).To(Equal(w.Generation))
		pods := &corev1.PodList{}
		g.Expect(members[member1].Client.List(ctx, pods, client.InNamespace(f.ns), client.MatchingLabels{"app": "local"})).To(Succeed())
		g.Expect(pods.Items).NotTo(BeEmpty())
		pod = pods.Items[0].Name
	}).Should(Succeed())

	cfg := rest.CopyConfig(hubCP.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: f.user}
	cfg.Host = strings.TrimSuffix(cfg.Host, "/") + debugv1alpha1.PlacementPath(f.ns, "local", debugv1alpha1.Log, member1)
	err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Pods(f.ns).GetLogs(pod, &corev1.PodLogOptions{}).Do(ctx).Error()
	g.Expect(err).To(HaveOccurred(), "the member-local pod's logs are not the Placement's")
	g.Expect(err.Error()).To(ContainSubstring("places nothing in namespace"))
	out, _, err := f.run(t, "pods", "local", "--cluster", member1)
	g.Expect(out).NotTo(ContainSubstring(pod))
	_ = err
	_, errOut, err := f.run(t, "exec", "--placement", "local", "--cluster", member1, pod, "--", "echo", "ok")
	g.Expect(err).To(HaveOccurred(), "no exec into the member-local pod: %s", errOut)
}

// The debug verbs' kind/name names a real workload: one the hub does not have,
// or a kind without pods, is an error (exit non-zero) that says so, and the
// events of one workload are its own, not every workload's of its Placement
// or namespace.
func TestDebugVerbsTakeRealWorkloads(t *testing.T) {
	f := newDebugFleet(t)
	placementsGoAtEnd(t, f.ns)
	g := NewWithT(t)
	// What admin or edit give a tenant on a real hub (the test hub does not
	// aggregate them): reading the namespace's workloads.
	createYAML(t, f.ns, `
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: read-workloads}
rules: [{apiGroups: [apps, batch], resources: [deployments, statefulsets, daemonsets, jobs, cronjobs], verbs: [get, list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: read-workloads}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: read-workloads}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: `+f.user+`}]
`)
	// Two workloads of one Placement, one named after the other.
	createYAML(t, f.ns, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
spec:
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec: {containers: [{name: api, image: nginx:1.27}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api-worker}
spec:
  selector: {matchLabels: {app: api-worker}}
  template:
    metadata: {labels: {app: api-worker}}
    spec: {containers: [{name: worker, image: nginx:1.27}]}
---
apiVersion: placement.lodestar.dev/v1alpha1
kind: Placement
metadata: {name: api}
spec:
  resourceSelectors: [{group: apps, version: v1, kind: Deployment}]
  scheduling: {clusterNames: [`+member1+`]}
`)
	g.Eventually(func(g Gomega) {
		out, errOut, err := f.run(t, "events", "deploy/api-worker")
		g.Expect(err).NotTo(HaveOccurred(), errOut)
		g.Expect(out).To(MatchRegexp(`(?m)^\S+\s+` + member1 + `\s+Normal\s+ScalingReplicaSet\s+deployment/api-worker\s`))
		g.Expect(out).To(MatchRegexp(`(?m)^\S+\s+` + member1 + `\s+Normal\s+Scheduled\s+pod/api-worker-`))
	}).Should(Succeed())
	out, errOut, err := f.run(t, "events", "deploy/api")
	g.Expect(err).NotTo(HaveOccurred(), errOut)
	g.Expect(out).To(MatchRegexp(`(?m)^\S+\s+` + member1 + `\s+Normal\s+ScalingReplicaSet\s+deployment/api\s`))
	g.Expect(out).To(MatchRegexp(`(?m)^\S+\s+` + member1 + `\s+Normal\s+Scheduled\s+pod/api-[a-z0-9]+-[a-z0-9]+\s`))
	g.Expect(out).NotTo(ContainSubstring("api-worker"), "the events of api only, not of the other workload of its Placement")

	_, errOut, err = f.run(t, "logs", "deploy/nosuch")
	g.Expect(err).To(HaveOccurred())
	g.Expect(errOut).To(ContainSubstring("Deployment " + f.ns + "/nosuch does not exist on the hub"))
	_, errOut, err = f.run(t, "logs", "deploy/api", "-c", "nosuch")
	g.Expect(err).To(HaveOccurred(), "a container no pod has is an error")
	g.Expect(errOut).To(ContainSubstring("no container nosuch (containers: api)"))
	_, errOut, err = f.run(t, "pods", "cm/web-config")
	g.Expect(err).To(HaveOccurred())
	g.Expect(errOut).To(ContainSubstring(`"cm" is not a kind whose pods Lodestar can find`))
	_, errOut, err = f.run(t, "logs", "deploy/api", "--cluster", member3)
	g.Expect(err).To(HaveOccurred())
	g.Expect(errOut).To(ContainSubstring("places nothing on cluster " + member3))
}

// A tenant renders its Placement for a cluster (kubectl lodestar render), though
// it may not read the clusters' ClusterProfiles or Works: the hub manager reads
// them for it through the debug API (placements/fleet), which the hub
// authorises like the other debug subresources. Without that right, the
// render fails, saying which. Likewise `kubectl lodestar status` shows the
// tenant its exported Services (placements/services).
func TestTenantRendersThroughTheHub(t *testing.T) {
	f := newDebugFleet(t)
	placementsGoAtEnd(t, f.ns)
	g := NewWithT(t)
	createYAML(t, f.ns, `
apiVersion: v1
kind: ConfigMap
metadata: {name: where}
data: {region: unknown}
---
apiVersion: placement.lodestar.dev/v1alpha1
kind: Placement
metadata: {name: where}
spec:
  resourceSelectors: [{version: v1, kind: ConfigMap, name: where}]
  scheduling: {clusterNames: [`+member1+`]}
  overrides:
    - name: region
      targets: [{kind: ConfigMap}]
      jsonPatch:
        - {op: replace, path: /data/region, valueExpression: "cluster.labels['region']"}
`)
	// What admin or edit give a tenant on a real hub: reading the namespace's ConfigMaps.
	createYAML(t, f.ns, `
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: read-configmaps}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get, list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: read-configmaps}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: read-configmaps}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: `+f.user+`}]
`)
	g.Eventually(func(g Gomega) {
		out, errOut, err := f.run(t, "render", "where", "--cluster", member1)
		g.Expect(err).NotTo(HaveOccurred(), errOut)
		g.Expect(out).To(ContainSubstring("region: eu-west"), "member-1's label, read by the hub manager")
		g.Expect(errOut).To(ContainSubstring("the clusters read through the hub manager"))
	}).Should(Succeed())

	// A cluster of another set the namespace binds (member-3, of the aux
	// set): placements/fleet reads every set, not only lodestar-fleet.
	createYAML(t, f.ns, `
apiVersion: placement.lodestar.dev/v1alpha1
kind: Placement
metadata: {name: which}
spec:
  resourceSelectors: [{version: v1, kind: ConfigMap, name: where}]
  scheduling: {clusterNames: [`+member3+`]}
  overrides:
    - name: name
      targets: [{kind: ConfigMap}]
      jsonPatch:
        - {op: replace, path: /data/region, valueExpression: "cluster.name"}
`)
	g.Eventually(func(g Gomega) {
		out, errOut, err := f.run(t, "render", "which", "--cluster", member3)
		g.Expect(err).NotTo(HaveOccurred(), errOut)
		g.Expect(out).To(ContainSubstring("region: "+member3), "member-3, of the aux set, read by the hub manager")
	}).Should(Succeed())

	// Its exported Service, as status shows it.
	createYAML(t, f.ns, `
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: placement.lodestar.dev/v1alpha1
kind: Placement
metadata: {name: web-svc}
spec:
  resourceSelectors: [{version: v1, kind: Service, name: web}]
  scheduling: {clusterNames: [`+member1+`, `+member3+`]}
  services: {export: All}
`)
	g.Eventually(func(g Gomega) {
		out, errOut, err := f.run(t, "status", "web-svc")
		g.Expect(err).NotTo(HaveOccurred(), errOut)
		g.Expect(out).NotTo(ContainSubstring("not shown"))
		g.Expect(out).To(MatchRegexp(`web\s+ClusterSetIP\s+(` + member1 + ` \(2\), ` + member3 + ` \(2\))`))
	}).Should(Succeed())

	// Without placements/fleet (a user with the tenant role alone), a clear refusal.
	other := "bob-" + rand.String(4)
	bindUser(t, f.ns, other, "lodestar:tenant")
	bindUserRole(t, f.ns, other, "read-configmaps")
	var errOut bytes.Buffer
	cmd := exec.CommandContext(t.Context(), filepath.Join(os.Getenv("LODESTAR_BIN"), "kubectl-lodestar"),
		"--kubeconfig", f.kubeconfig, "--as", other, "-n", f.ns, "render", "where", "--cluster", member1)
	cmd.Stderr = &errOut
	g.Expect(cmd.Run()).To(HaveOccurred())
	g.Expect(errOut.String()).To(ContainSubstring("placements/fleet"))
	g.Expect(errOut.String()).To(ContainSubstring("the ClusterRole lodestar:debug:view grants it"), "names the role that is missing")

	// A selector without kind reaches kinds the tenant may not list: the
	// preview leaves them out and says so, it does not fail.
	createYAML(t, f.ns, `
apiVersion: v1
kind: ConfigMap
metadata: {name: tagged, labels: {tier: web}}
data: {a: b}
---
apiVersion: placement.lodestar.dev/v1alpha1
kind: Placement
metadata: {name: tagged}
spec:
  resourceSelectors: [{labelSelector: {matchLabels: {tier: web}}}]
  scheduling: {clusterNames: [`+member1+`]}
`)
	g.Eventually(func(g Gomega) {
		out, errOut, err := f.run(t, "render", "tagged", "--cluster", member1)
		g.Expect(err).NotTo(HaveOccurred(), errOut)
		g.Expect(out).To(ContainSubstring("name: tagged"))
		g.Expect(errOut).To(MatchRegexp(`you may not list \S+ in ` + f.ns + `: a selector without kind would reach them`))
	}).Should(Succeed())
}

// bindUserRole binds user to the Role role of ns.
func bindUserRole(t *testing.T, ns, user, role string) {
	t.Helper()
	NewWithT(t).Expect(hubCP.Client.Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user + "-" + role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	})).To(Succeed())
}
