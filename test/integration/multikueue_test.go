package integration

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1alpha1 "github.com/lodestar-dev/lodestar/api/debug/v1alpha1"
	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/pki"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// KueueEnv names the Kueue manager binary (make builds it into bin/, its CRDs
// in crds/ beside it).
const KueueEnv = "LODESTAR_KUEUE"

// Kueue's MultiKueue, unchanged (v0.17.0, built from the module proxy), on
// Lodestar's ClusterProfiles: its manager runs on the hub with the
// MultiKueueClusterProfile feature gate and reaches its worker clusters only
// through the lodestar-tunnel access provider, as a ConsumerAccessGrant lets
// its ServiceAccount (no kubeconfig Secret anywhere). Both members connect;
// the grant narrowed to production (member-1), member-2 is no longer used: a
// Job queued on the hub is admitted, dispatched to member-1, run there by
// Kueue's worker and kwok, and its status comes back to the hub's Job;
// member-2 never sees it.
func TestMultiKueueThroughTheTunnel(t *testing.T) {
	bin := os.Getenv(KueueEnv)
	if bin == "" {
		t.Fatalf("%s is not set: run the tests through `make test`, which builds Kueue into bin/", KueueEnv)
	}
	g := NewWithT(t)
	ctx := t.Context()
	crds := filepath.Join(filepath.Dir(bin), "crds")
	for _, cp := range []*testenv.ControlPlane{hubCP, members[member1], members[member2]} {
		installKueueCRDs(t, cp.Client, crds)
	}
	t.Cleanup(func() { deleteKueueCRDs(t, crds) })

	// The consumer: Kueue's ServiceAccount on the hub, granted what MultiKueue
	// does on its workers (Jobs and Workloads), on every member at first.
	ns := newNamespace(t)
	g.Expect(hubCP.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kueue"}})).To(Succeed())
	grant := "kueue-" + ns
	grantFile := filepath.Join(t.TempDir(), "grant.yaml")
	writeGrant := func(selector string) {
		g.Expect(os.WriteFile(grantFile, []byte(fmt.Sprintf(`apiVersion: placement.lodestar.dev/v1alpha1
kind: ConsumerAccessGrant
metadata:
  name: %s
spec:
  consumers:
  - {namespace: %s, name: kueue}
  clusterSet: %s%s
  rules:
  - apiGroups: [kueue.x-k8s.io]
    resources: [workloads, workloads/status]
    verbs: [get, list, watch, create, update, patch, delete]
`, grant, ns, placementv1alpha1.DefaultClusterSet, selector)), 0o600)).To(Succeed())
		out, err := hubKubectl(t, "apply", "-f", grantFile)
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Eventually(func(g Gomega) {
			got := consumerGrant(g, grant)
			c := meta.FindStatusCondition(got.Status.Conditions, placementv1alpha1.ReadyCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
			g.Expect(c.ObservedGeneration).To(Equal(got.Generation))
		}).Should(Succeed())
	}
	writeGrant("")
	// Creating Jobs runs code as any ServiceAccount of a namespace: the
	// member's policy refuses to let a grant give it (escalating RBAC). Each
	// member's admin gives it to Kueue's member identity directly.
	for _, c := range []string{member1, member2} {
		g.Expect(testenv.CreateYAML(ctx, members[c].Client, "", fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: multikueue-jobs-%[1]s}
rules:
- apiGroups: [batch]
  resources: [jobs, jobs/status]
  verbs: [get, list, watch, create, update, patch, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: multikueue-jobs-%[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: multikueue-jobs-%[1]s}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: %[2]q}
`, ns, debugv1alpha1.ConsumerUser(ns, "kueue")))).To(Succeed())
		t.Cleanup(func() {
			for _, kind := range []string{"ClusterRoleBinding", "ClusterRole"} {
				obj := &unstructured.Unstructured{}
				obj.SetGroupVersionKind(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: kind})
				obj.SetName("multikueue-jobs-" + ns)
				_ = members[c].Client.Delete(context.Background(), obj)
			}
		})
	}
	t.Cleanup(func() {
		_ = hubCP.Client.Delete(context.Background(), &placementv1alpha1.ConsumerAccessGrant{ObjectMeta: metav1.ObjectMeta{Name: grant}})
	})

	// Kueue's managers: the hub's (MultiKueue; its namespace is the cluster
	// set's, where it reads ClusterProfiles) and member-1's (a worker; member-2
	// runs no pods).
	tokenFile := filepath.Join(t.TempDir(), "token")
	cfg, err := testenv.ServiceAccountConfig(ctx, hubCP.Config, ns, "kueue", time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(tokenFile, []byte(cfg.BearerToken), 0o600)).To(Succeed())
	plugin, err := testenv.Binary("lodestar-credentials")
	g.Expect(err).NotTo(HaveOccurred())
	startKueue(t, bin, "hub", hubCP.Config, placementv1alpha1.DefaultClusterSet, fmt.Sprintf(`
featureGates: {MultiKueueClusterProfile: true, VisibilityOnDemand: false}
multiKueue:
  origin: lodestar-%[1]s
  clusterProfile:
    credentialsProviders:
    - name: %[2]s
      execConfig:
        apiVersion: client.authentication.k8s.io/v1
        command: %[3]s
        args: [--token-file, %[4]s]
        provideClusterInfo: true
        interactiveMode: Never`, ns, placementv1alpha1.TunnelProvider, plugin, tokenFile))
	g.Expect(members[member1].Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kueue-system"}})).To(Or(Succeed(), WithTransform(apierrors.IsAlreadyExists, BeTrue())))
	startKueue(t, bin, member1, members[member1].Config, "kueue-system", `
featureGates: {VisibilityOnDemand: false}`)

	// The worker's queues, as its admin writes them.
	createOn(t, member1, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	createOn(t, member2, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	queues := fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: flavor-%[1]s}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq-%[1]s}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: flavor-%[1]s
      resources:
      - {name: cpu, nominalQuota: 4}
      - {name: memory, nominalQuota: 4Gi}%[2]s
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: queue, namespace: %[1]s}
spec: {clusterQueue: cq-%[1]s}
`, ns, "%s")
	g.Eventually(func() error {
		return applyYAML(t, members[member1].Client, fmt.Sprintf(queues, ""))
	}).Should(Succeed())

	// The hub's: a ClusterQueue whose admission check is MultiKueue's, over
	// both members by their ClusterProfiles.
	g.Eventually(func() error {
		return applyYAML(t, hubCP.Client, fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueCluster
metadata: {name: %[2]s-%[1]s}
spec:
  clusterSource: {clusterProfileRef: {name: %[2]s}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueCluster
metadata: {name: %[3]s-%[1]s}
spec:
  clusterSource: {clusterProfileRef: {name: %[3]s}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueConfig
metadata: {name: fleet-%[1]s}
spec:
  clusters: [%[2]s-%[1]s, %[3]s-%[1]s]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: fleet-%[1]s}
spec:
  controllerName: kueue.x-k8s.io/multikueue
  parameters: {apiGroup: kueue.x-k8s.io, kind: MultiKueueConfig, name: fleet-%[1]s}
`, ns, member1, member2)+"---\n"+fmt.Sprintf(queues, fmt.Sprintf(`
  admissionChecksStrategy:
    admissionChecks: [{name: fleet-%s}]`, ns)))
	}).Should(Succeed())

	// Both members are reached through the tunnel.
	active := func(g Gomega, cluster string) metav1.Condition {
		return kueueCondition(g, hubCP.Client, "MultiKueueCluster", "", cluster+"-"+ns, "Active")
	}
	g.Eventually(func(g Gomega) {
		for _, c := range []string{member1, member2} {
			cond := active(g, c)
			g.Expect(cond.Status).To(Equal(metav1.ConditionTrue), "%s: %s", c, cond.Message)
		}
	}).Should(Succeed())

	// member-2 taken out of what Kueue may reach (the grant narrowed to
	// production): its worker is no longer used.
	writeGrant(`
  clusterSelector: {matchLabels: {env: production}}`)
	g.Eventually(func(g Gomega) {
		g.Expect(active(g, member2).Status).To(Equal(metav1.ConditionFalse))
		g.Expect(active(g, member1).Status).To(Equal(metav1.ConditionTrue))
	}).Should(Succeed())

	// What each worker sees of the Job while it lives there (MultiKueue
	// removes its copy once the hub has the final status): the most pods it
	// reported succeeded, or -1 for none of it.
	seen := map[string]*jobSeen{member1: watchJobs(t, member1, ns), member2: watchJobs(t, member2, ns)}

	// A Job queued on the hub, as its user writes it (managed by MultiKueue,
	// suspended until admitted: no Kueue webhook runs here to set either).
	g.Expect(testenv.CreateYAML(ctx, hubCP.Client, ns, `apiVersion: batch/v1
kind: Job
metadata:
  name: train
  labels: {kueue.x-k8s.io/queue-name: queue}
spec:
  suspend: true
  managedBy: kueue.x-k8s.io/multikueue
  completions: 1
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: train
        image: registry.example/train:1
        resources:
          requests: {cpu: 100m, memory: 64Mi}
`)).To(Succeed())
	g.Eventually(func(g Gomega) {
		// Run on member-1 (kwok completes its pod), and complete on the hub.
		g.Expect(seen[member1].succeeded()).To(BeEquivalentTo(1), "the Job ran on %s", member1)
		local := &batchv1.Job{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "train"}, local)).To(Succeed())
		g.Expect(local.Status.Succeeded).To(BeEquivalentTo(1), "its status is back on the hub")
	}).WithTimeout(3 * testenv.EventuallyTimeout).Should(Succeed())
	g.Expect(seen[member2].succeeded()).To(BeEquivalentTo(-1), "nothing of the Job reached %s", member2)
}

// jobSeen is what a watch of a worker's Jobs saw of the Job "train".
type jobSeen struct {
	mu   sync.Mutex
	most int32
}

func (s *jobSeen) succeeded() int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.most
}

// watchJobs watches the Jobs of ns on cluster until the test ends.
func watchJobs(t *testing.T, cluster, ns string) *jobSeen {
	t.Helper()
	g := NewWithT(t)
	cs, err := kubernetes.NewForConfig(members[cluster].Config)
	g.Expect(err).NotTo(HaveOccurred())
	w, err := cs.BatchV1().Jobs(ns).Watch(t.Context(), metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	s := &jobSeen{most: -1}
	go func() {
		for ev := range w.ResultChan() {
			if j, ok := ev.Object.(*batchv1.Job); ok && j.Name == "train" {
				s.mu.Lock()
				s.most = max(s.most, j.Status.Succeeded)
				s.mu.Unlock()
			}
		}
	}()
	t.Cleanup(w.Stop)
	return s
}

// startKueue runs Kueue's manager against cfg's API server with namespace ns
// and the configuration's extra lines, its webhook server on loopback (no
// webhook is registered: the test writes what Kueue's webhooks would), until
// the test ends.
func startKueue(t *testing.T, bin, name string, cfg *rest.Config, ns, extra string) {
	t.Helper()
	g := NewWithT(t)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	g.Expect(testenv.WriteKubeconfig(cfg, name, kubeconfig)).To(Succeed())
	ca, err := pki.NewCA("kueue-"+name, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	crt, key, err := ca.Issue("kueue-webhook", x509.ExtKeyUsageServerAuth, []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(dir, "tls.crt"), crt, 0o600)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "tls.key"), key, 0o600)).To(Succeed())
	addr, err := testenv.FreeAddress()
	g.Expect(err).NotTo(HaveOccurred())
	config := filepath.Join(dir, "config.yaml")
	g.Expect(os.WriteFile(config, []byte(fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: %s
manageJobsWithoutQueueName: false
leaderElection: {leaderElect: false}
health: {healthProbeBindAddress: "0"}
metrics: {bindAddress: "0"}
webhook: {host: 127.0.0.1, port: %d, certDir: %s}
internalCertManagement: {enable: false}
integrations: {frameworks: [batch/job]}%s
`, ns, testenv.Port(addr), dir, extra)), 0o600)).To(Succeed())
	logs, err := os.Create(filepath.Join(dir, "kueue.log"))
	g.Expect(err).NotTo(HaveOccurred())
	// Kueue reads its metrics certificate from a fixed path, where its
	// Deployment mounts a Secret; a private mount namespace gives it one the
	// same way, nothing written to this machine's /etc.
	unshare := []string{"--mount"} // root: a mount namespace of its own is enough
	if os.Getuid() != 0 {
		unshare = []string{"--user", "--map-root-user", "--mount"}
	}
	cmd := exec.Command("unshare", append(unshare, "sh", "-ec", withKueueCerts,
		"sh", dir, bin, "--config", config, "--zap-log-level", "2")...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = logs, logs
	g.Expect(cmd.Start()).To(Succeed())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logs.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logs.Name()); err == nil {
				t.Logf("Kueue on %s (pid %s), the end of its log:\n%s", name, strconv.Itoa(cmd.Process.Pid), b[max(0, len(b)-6000):])
			}
		}
	})
}

// applyYAML applies the objects of a YAML text server-side, as `kubectl apply
// --server-side` does (again and again alike, while CRDs are being
// established).
func applyYAML(t *testing.T, c client.Client, text string) error {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "objects.yaml"), []byte(text), 0o600); err != nil {
		return err
	}
	_, err := testenv.ApplyDir(t.Context(), c, dir)
	return err
}

// withKueueCerts runs "$@" (after the directory $1) in the mount namespace
// it is started in, with /etc/kueue/metrics/certs holding $1's tls.crt and
// tls.key and the rest of /etc as it is.
const withKueueCerts = `d=$1; shift
mkdir -p "$d/real-etc" "$d/etc/kueue/metrics/certs"
cp "$d/tls.crt" "$d/tls.key" "$d/etc/kueue/metrics/certs/"
mount --rbind /etc "$d/real-etc"
for e in "$d"/real-etc/* "$d"/real-etc/.[!.]*; do
  if [ -e "$e" ] || [ -L "$e" ]; then ln -s "$e" "$d/etc/$(basename "$e")"; fi
done
mount --bind "$d/etc" /etc
exec "$@"`

// kueueCondition is condition typ of Kueue's kind name (in namespace ns).
func kueueCondition(g Gomega, c client.Client, kind, ns, name, typ string) metav1.Condition {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: kind})
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u)).To(Succeed())
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, raw := range conds {
		m, _ := raw.(map[string]any)
		if m["type"] == typ {
			status, _ := m["status"].(string)
			reason, _ := m["reason"].(string)
			msg, _ := m["message"].(string)
			return metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Reason: reason, Message: msg}
		}
	}
	g.Expect(conds).To(ContainElement(HaveKeyWithValue("type", typ)), "%s %s has a %s condition", kind, name, typ)
	return metav1.Condition{}
}

// kueueCRDs are the CRDs of Kueue's YAML files in dir, by name.
func kueueCRDs(dir string) []*unstructured.Unstructured {
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	var out []*unstructured.Unstructured
	for _, f := range files {
		// kueue.x-k8s.io_<plural>.yaml names the CRD <plural>.kueue.x-k8s.io.
		group, plural, _ := strings.Cut(strings.TrimSuffix(filepath.Base(f), ".yaml"), "_")
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
		crd.SetName(plural + "." + group)
		out = append(out, crd)
	}
	return out
}

// installKueueCRDs applies Kueue's CRDs from dir (after any of them still
// being deleted is gone) and waits until they are established.
func installKueueCRDs(t *testing.T, c client.Client, dir string) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		for _, crd := range kueueCRDs(dir) {
			got := crd.DeepCopy()
			err := c.Get(t.Context(), client.ObjectKeyFromObject(crd), got)
			g.Expect(err == nil && got.GetDeletionTimestamp() != nil).To(BeFalse(), "CRD %s is still being deleted", crd.GetName())
		}
	}).Should(Succeed())
	_, err := testenv.ApplyDir(t.Context(), c, dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		for _, crd := range kueueCRDs(dir) {
			got := crd.DeepCopy()
			g.Expect(c.Get(t.Context(), client.ObjectKeyFromObject(crd), got)).To(Succeed())
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			g.Expect(conds).To(ContainElement(And(HaveKeyWithValue("type", "Established"), HaveKeyWithValue("status", "True"))), "CRD %s", crd.GetName())
		}
	}).Should(Succeed())
}

// deleteKueueCRDs removes Kueue's CRDs from the hub and the members, so that
// later tests see the fleet as it was.
func deleteKueueCRDs(t *testing.T, dir string) {
	ctx := context.Background()
	for _, cp := range []*testenv.ControlPlane{hubCP, members[member1], members[member2]} {
		for _, crd := range kueueCRDs(dir) {
			// Kueue's finalizers on its objects stay when Kueue is stopped: they
			// would hold the CRD's deletion for ever.
			if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(crd), crd); err == nil {
				kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
				list := &unstructured.UnstructuredList{}
				list.SetGroupVersionKind(schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: kind + "List"})
				if err := cp.Client.List(ctx, list); err == nil {
					for i := range list.Items {
						if len(list.Items[i].GetFinalizers()) > 0 {
							_ = cp.Client.Patch(ctx, &list.Items[i], client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
						}
					}
				}
			}
			if err := cp.Client.Delete(ctx, crd); client.IgnoreNotFound(err) != nil {
				t.Logf("deleting CRD %s: %v", crd.GetName(), err)
			}
		}
	}
}
