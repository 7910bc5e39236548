// Package charts tests the Helm charts: lint and render with helm itself (built
// from the Go module proxy into bin/), then install them into real API servers and
// run the hub manager and the agent as the charts' ServiceAccounts, so that a rule
// missing from a chart fails here.
package charts

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/agent"
	"github.com/lodestar-dev/lodestar/controllers/agent/work"
	"github.com/lodestar-dev/lodestar/controllers/hub/clustercleanup"
	"github.com/lodestar-dev/lodestar/controllers/hub/clusterhealth"
	"github.com/lodestar-dev/lodestar/internal/policy"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

var chartsDir = filepath.Join("..", "..", "charts")

// helm runs the helm binary and returns its output.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := os.Getenv(testenv.HelmEnv)
	if bin == "" {
		t.Fatalf("%s is not set: run the tests through `make test`, which builds helm into bin/", testenv.HelmEnv)
	}
	return testenv.Helm(t.Context(), bin, t.TempDir(), args...)
}

// render runs helm template and returns the documents by kind/name.
func render(t *testing.T, chart string, args ...string) (map[string]map[string]any, error) {
	t.Helper()
	out, err := helm(t, append([]string{"template", "test", filepath.Join(chartsDir, chart), "--namespace", "lodestar-system"}, args...)...)
	if err != nil {
		return nil, err
	}
	docs := map[string]map[string]any{}
	for _, doc := range strings.Split(out, "\n---") {
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return nil, fmt.Errorf("rendered YAML does not parse: %w\n%s", err, doc)
		}
		if len(obj) == 0 {
			continue
		}
		meta, _ := obj["metadata"].(map[string]any)
		docs[fmt.Sprintf("%v/%v", obj["kind"], meta["name"])] = obj
	}
	return docs, nil
}

// containerArgs returns the first container's args of a rendered Deployment.
func containerArgs(g Gomega, docs map[string]map[string]any, name string) []string {
	d, ok := docs["Deployment/"+name]
	g.Expect(ok).To(BeTrue(), "Deployment %s rendered", name)
	containers := d["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)
	var args []string
	for _, a := range containers[0].(map[string]any)["args"].([]any) {
		args = append(args, a.(string))
	}
	return args
}

func TestChartsLint(t *testing.T) {
	for _, c := range []struct {
		chart string
		args  []string
	}{
		{"lodestar-hub", nil},
		{"lodestar-agent", []string{"--set", "clusterName=member-1"}},
	} {
		out, err := helm(t, append([]string{"lint", "--strict", filepath.Join(chartsDir, c.chart)}, c.args...)...)
		NewWithT(t).Expect(err).NotTo(HaveOccurred(), out)
	}
}

func TestHubChartRenders(t *testing.T) {
	g := NewWithT(t)
	docs, err := render(t, "lodestar-hub")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(docs).To(HaveKey("ClusterRole/test-lodestar-hub"))
	g.Expect(docs).To(HaveKey("Role/test-lodestar-hub-leader-election"))
	g.Expect(docs).To(HaveKey("ValidatingAdmissionPolicy/lodestar-agent-works"))
	g.Expect(docs).To(HaveKey("ValidatingAdmissionPolicyBinding/lodestar-agent-works"))
	g.Expect(docs).To(HaveKey("ValidatingAdmissionPolicy/lodestar-agent-tokens"))
	g.Expect(docs).To(HaveKey("ValidatingAdmissionPolicyBinding/lodestar-agent-tokens"))
	g.Expect(docs).To(HaveKey("ValidatingAdmissionPolicy/lodestar-agent-profiles"))
	g.Expect(docs).To(HaveKey("ValidatingAdmissionPolicyBinding/lodestar-agent-profiles"))
	g.Expect(docs).NotTo(HaveKey("ValidatingAdmissionPolicy/lodestar-cluster-names"), "opt-in")
	for _, name := range []string{"lodestar-clusterset-bindings", "lodestar-placement-scope", "lodestar-tenant-pods", "lodestar-forbidden-kinds"} {
		g.Expect(docs).To(HaveKey("ValidatingAdmissionPolicy/" + name))
		g.Expect(docs).To(HaveKey("ValidatingAdmissionPolicyBinding/" + name))
	}
	g.Expect(docs).To(HaveKey("MutatingAdmissionPolicy/lodestar-placement-writer"))
	g.Expect(docs).To(HaveKey("MutatingAdmissionPolicyBinding/lodestar-placement-writer"))
	g.Expect(docs).To(HaveKey("ValidatingAdmissionPolicy/lodestar-placement-writer-guard"))
	for _, name := range []string{"lodestar:tenant", "lodestar:approver", "lodestar:clusterset-admin", "lodestar:clusterset:lodestar-fleet:bind"} {
		g.Expect(docs).To(HaveKey("ClusterRole/" + name))
	}
	// The chart's defaults are the binary's.
	g.Expect(containerArgs(g, docs, "test-lodestar-hub")).To(ContainElements("--leader-elect=true", "--kube-api-qps=200", "--zap-log-level=info",
		"--hub-wide=true", "--hub-manager-name=test-lodestar-hub",
		"--clusterset-namespaces="+placementv1alpha1.DefaultClusterSet,
		"--agent-lease-grace-period="+clusterhealth.DefaultGracePeriod.String(), "--cluster-cleanup-grace-period="+strings.TrimSuffix(clustercleanup.DefaultGracePeriod.String(), "0s")))
	// Two replicas by default, one leading, spread over nodes and kept by a
	// disruption budget; the Lease named after the release.
	g.Expect(docs["Deployment/test-lodestar-hub"]["spec"].(map[string]any)["replicas"]).To(BeEquivalentTo(2))
	g.Expect(containerArgs(g, docs, "test-lodestar-hub")).To(ContainElements("--leader-election-id=test-lodestar-hub.placement.lodestar.dev",
		"--leader-election-lease-duration=15s", "--leader-election-renew-deadline=10s", "--leader-election-retry-period=2s", "--debug-replicas=2"))
	g.Expect(docs).To(HaveKey("PodDisruptionBudget/test-lodestar-hub"))
	g.Expect(fmt.Sprint(docs["Deployment/test-lodestar-hub"])).To(ContainSubstring("podAntiAffinity"))

	docs, err = render(t, "lodestar-hub", "--set", "replicas=3", "--set", "kubeAPI.qps=50", "--set", "logLevel=debug",
		"--set", "image.repository=registry.example/lodestar-hub", "--set", "image.tag=v9", "--set", "agentWorkPolicy=false",
		"--set", "clusterSetNamespaces={lodestar-fleet,edge}", "--set", "clusterNamePolicy=true")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(docs).To(HaveKey("ValidatingAdmissionPolicy/lodestar-cluster-names"))
	g.Expect(docs).To(HaveKey("ValidatingAdmissionPolicyBinding/lodestar-cluster-names-lodestar-fleet"))
	g.Expect(docs).To(HaveKey("ValidatingAdmissionPolicyBinding/lodestar-cluster-names-edge"), "one binding per managed cluster set")
	g.Expect(docs).To(HaveKey("ClusterRole/lodestar:clusterset:edge:bind"), "one bind role per managed cluster set")
	d := docs["Deployment/test-lodestar-hub"]
	g.Expect(d["spec"].(map[string]any)["replicas"]).To(BeEquivalentTo(3))
	g.Expect(containerArgs(g, docs, "test-lodestar-hub")).To(ContainElements("--kube-api-qps=50", "--zap-log-level=debug"))
	g.Expect(fmt.Sprint(d)).To(ContainSubstring("registry.example/lodestar-hub:v9"))
	g.Expect(docs).NotTo(HaveKey("ValidatingAdmissionPolicy/lodestar-agent-works"))

	docs, err = render(t, "lodestar-hub", "--set", "replicas=1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(docs).NotTo(HaveKey("PodDisruptionBudget/test-lodestar-hub"), "one replica: a budget would block every drain")
	g.Expect(fmt.Sprint(docs["Deployment/test-lodestar-hub"])).NotTo(ContainSubstring("podAntiAffinity"))

	_, err = render(t, "lodestar-hub", "--set", "replicas=2", "--set", "leaderElection.enabled=false")
	g.Expect(err).To(MatchError(ContainSubstring("replicas above 1 need leaderElection.enabled")))

	// A second hub manager release on the same hub (docs/scale.md): its
	// Deployment, RBAC, Lease and the bind roles of its sets; nothing that is
	// the hub's once (admission policies, tenancy roles, lodestar-placements,
	// the debug APIService).
	docs, err = render(t, "lodestar-hub", "--set", "hubWide=false", "--set", "clusterSetNamespaces={edge}", "--set", "clusterNamePolicy=true")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(containerArgs(g, docs, "test-lodestar-hub")).To(ContainElements("--hub-wide=false", "--hub-manager-name=test-lodestar-hub",
		"--clusterset-namespaces=edge", "--leader-election-id=test-lodestar-hub.placement.lodestar.dev"))
	g.Expect(containerArgs(g, docs, "test-lodestar-hub")).NotTo(ContainElement(HavePrefix("--debug-")))
	g.Expect(docs).To(HaveKey("ClusterRole/test-lodestar-hub"))
	g.Expect(docs).To(HaveKey("ClusterRole/lodestar:clusterset:edge:bind"))
	g.Expect(docs).To(HaveKey("ValidatingAdmissionPolicyBinding/lodestar-cluster-names-edge"), "the hub-wide release's policy, bound to this release's set")
	for key := range docs {
		g.Expect(key).NotTo(Or(HavePrefix("ValidatingAdmissionPolicy/"), HavePrefix("APIService/"), HavePrefix("Namespace/"),
			Equal("ClusterRole/lodestar:tenant"), Equal("ClusterRole/lodestar:clusterset-admin"), Equal("Service/lodestar-debug")))
	}
}

// The library of ResourceInterpretations: none by default, each kind opted
// into as the chart ships it, only by the hub-wide release; a name the chart
// does not have is an error, not nothing.
func TestHubChartInterpretationLibrary(t *testing.T) {
	g := NewWithT(t)
	docs, err := render(t, "lodestar-hub")
	g.Expect(err).NotTo(HaveOccurred())
	for key := range docs {
		g.Expect(key).NotTo(HavePrefix("ResourceInterpretation/"), "opt-in")
	}
	values, err := os.ReadFile(filepath.Join(chartsDir, "lodestar-hub", "values.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var v struct {
		Interpretations map[string]bool `json:"interpretations"`
	}
	g.Expect(yaml.Unmarshal(values, &v)).To(Succeed())
	g.Expect(v.Interpretations).To(HaveLen(6))
	var args []string
	for name := range v.Interpretations {
		args = append(args, "--set", "interpretations."+name+"=true")
	}
	docs, err = render(t, "lodestar-hub", args...)
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	for key := range docs {
		if name, ok := strings.CutPrefix(key, "ResourceInterpretation/"); ok {
			names = append(names, name)
		}
	}
	g.Expect(names).To(ConsistOf("rollouts.argoproj.io", "clonesets.apps.kruise.io", "leaderworkersets.leaderworkerset.x-k8s.io",
		"rayclusters.ray.io", "flinkdeployments.flink.apache.org", "pytorchjobs.kubeflow.org"))
	// A kind whose interpretation aggregates its status: the manager may
	// write that status on the hub (reflection), in every release.
	rules := fmt.Sprint(docs["ClusterRole/test-lodestar-hub"]["rules"])
	for _, status := range []string{"rollouts/status", "clonesets/status", "leaderworkersets/status", "rayclusters/status"} {
		g.Expect(rules).To(ContainSubstring(status))
	}
	g.Expect(rules).NotTo(ContainSubstring("pytorchjobs/status"), "no aggregate, no status right")
	docs, err = render(t, "lodestar-hub", append(args, "--set", "hubWide=false")...)
	g.Expect(err).NotTo(HaveOccurred())
	for key := range docs {
		g.Expect(key).NotTo(HavePrefix("ResourceInterpretation/"), "the hub-wide release's")
	}
	g.Expect(fmt.Sprint(docs["ClusterRole/test-lodestar-hub"]["rules"])).To(ContainSubstring("rollouts/status"))
	docs, err = render(t, "lodestar-hub")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fmt.Sprint(docs["ClusterRole/test-lodestar-hub"]["rules"])).NotTo(ContainSubstring("rollouts/status"))
	_, err = render(t, "lodestar-hub", "--set", "interpretations.mysql=true")
	g.Expect(err).To(MatchError(ContainSubstring("interpretations.mysql: the chart has no such interpretation")))
}

func TestAgentChartRenders(t *testing.T) {
	g := NewWithT(t)
	_, err := render(t, "lodestar-agent")
	g.Expect(err).To(MatchError(ContainSubstring("clusterName is required")))

	docs, err := render(t, "lodestar-agent", "--set", "clusterName=edge-7", "--set", "clusterSet=edge",
		"--set-string", "hubKubeconfig.kubeconfig=apiVersion: v1", "--set", "config.policy.deniedKinds={Secret}")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(containerArgs(g, docs, "test-lodestar-agent")).To(ContainElements("--cluster-name=edge-7", "--cluster-set=edge", "--hub-kubeconfig=/etc/lodestar/hub/kubeconfig"))
	g.Expect(docs).To(HaveKey("Secret/lodestar-hub-kubeconfig"))
	g.Expect(docs).To(HaveKey("ClusterRoleBinding/test-lodestar-agent-cluster-admin"))
	g.Expect(docs["ConfigMap/test-lodestar-agent-config"]["data"].(map[string]any)["config.yaml"]).To(ContainSubstring("Secret"))

	docs, err = render(t, "lodestar-agent", "--set", "clusterName=edge-7", "--set", "memberRBAC.clusterAdmin=false")
	g.Expect(err).NotTo(HaveOccurred())
	args := containerArgs(g, docs, "test-lodestar-agent")
	g.Expect(args).To(ContainElement("--cluster-set="+placementv1alpha1.DefaultClusterSet), "the chart's defaults are the binary's")
	g.Expect(args).To(ContainElement(WithTransform(func(arg string) time.Duration {
		d, _ := time.ParseDuration(strings.TrimPrefix(arg, "--missing-work-grace-period="))
		return d
	}, Equal(work.DefaultMissingWorkGracePeriod))), "the chart's missing-Work grace period is the binary's")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(docs).NotTo(HaveKey("ClusterRoleBinding/test-lodestar-agent-cluster-admin"))
	g.Expect(docs).NotTo(HaveKey("Secret/lodestar-hub-kubeconfig"), "an existing Secret is used")
}

// The agent chart's default member policy protects the member: the escalations,
// CRDs and admission webhooks are denied, ordinary objects are not, and the
// namespaces the agent creates enforce the baseline Pod Security Standard. The
// chart sets no policy of its own: it is the agent's built-in default.
func TestAgentChartDefaultPolicyProtectsTheMember(t *testing.T) {
	g := NewWithT(t)
	docs, err := render(t, "lodestar-agent", "--set", "clusterName=edge-7")
	g.Expect(err).NotTo(HaveOccurred())
	file := filepath.Join(t.TempDir(), "config.yaml")
	g.Expect(os.WriteFile(file, []byte(docs["ConfigMap/test-lodestar-agent-config"]["data"].(map[string]any)["config.yaml"].(string)), 0o600)).To(Succeed())
	config, err := agent.LoadConfig(file)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(config.Policy).To(Equal(policy.Defaults()), "the chart's default is the binary's")
	checker, err := policy.NewChecker(config.Policy, "lodestar-system")
	g.Expect(err).NotTo(HaveOccurred())
	impersonator := object("rbac.authorization.k8s.io/v1", "ClusterRole", "", "impersonator",
		map[string]any{"rules": []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"users"}, "verbs": []any{"impersonate"}}}})
	view := object("rbac.authorization.k8s.io/v1", "ClusterRole", "", "view",
		map[string]any{"rules": []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"pods"}, "verbs": []any{"get"}}}})
	checker.LookupRole = func(kind, _, name string) (*unstructured.Unstructured, error) {
		switch {
		case kind == "ClusterRole" && name == "impersonator":
			return impersonator, nil
		case kind == "ClusterRole" && name == "view":
			return view, nil
		}
		return nil, nil
	}
	binding := func(name, role string) *unstructured.Unstructured {
		return object("rbac.authorization.k8s.io/v1", "RoleBinding", "shop", name,
			map[string]any{"roleRef": map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}})
	}
	for _, denied := range []*unstructured.Unstructured{
		object("rbac.authorization.k8s.io/v1", "ClusterRole", "", "grows", map[string]any{"aggregationRule": map[string]any{}}),
		object("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", "root",
			map[string]any{"roleRef": map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"}}),
		binding("admins", "admin"), binding("editors", "edit"), binding("impersonators", "impersonator"),
		binding("daemons", "system:controller:daemon-set-controller"), binding("later", "not-yet-on-the-member"),
		impersonator,
		object("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.example.com", nil),
		object("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "", "hook", nil),
	} {
		g.Expect(checker.Denied(denied.GroupVersionKind(), denied.GetNamespace(), denied)).NotTo(BeEmpty(), "%s %s", denied.GetKind(), denied.GetName())
	}
	for _, allowed := range []*unstructured.Unstructured{
		binding("viewers", "view"),
		object("v1", "Namespace", "", "shop", nil),
		object("apps/v1", "Deployment", "shop", "web", nil),
	} {
		g.Expect(checker.Denied(allowed.GroupVersionKind(), allowed.GetNamespace(), allowed)).To(BeEmpty(), "%s %s", allowed.GetKind(), allowed.GetName())
	}
}

// object is an unstructured object with extra top-level fields.
func object(apiVersion, kind, namespace, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": namespace}}}
	for k, v := range fields {
		u.Object[k] = v
	}
	return u
}

// The hub chart renders a ServiceMonitor only when asked, scraping the metrics
// Service by labels that Service has, and ships a Grafana dashboard whose
// queries use only series docs/metrics.md documents.
func TestHubChartMonitoring(t *testing.T) {
	g := NewWithT(t)
	docs, err := render(t, "lodestar-hub")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(docs).NotTo(HaveKey("ServiceMonitor/test-lodestar-hub"), "off by default")

	docs, err = render(t, "lodestar-hub", "--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.serviceMonitor.labels.release=prometheus",
		"--set", "metrics.serviceMonitor.interval=15s")
	g.Expect(err).NotTo(HaveOccurred())
	sm := docs["ServiceMonitor/test-lodestar-hub"]
	g.Expect(sm).NotTo(BeNil())
	g.Expect(sm["apiVersion"]).To(Equal("monitoring.coreos.com/v1"))
	g.Expect(sm).To(HaveKeyWithValue("metadata", HaveKeyWithValue("labels", HaveKeyWithValue("release", "prometheus"))))
	spec := sm["spec"].(map[string]any)
	g.Expect(spec["endpoints"]).To(ConsistOf(And(HaveKeyWithValue("port", "metrics"), HaveKeyWithValue("path", "/metrics"), HaveKeyWithValue("interval", "15s"))))
	svc := docs["Service/test-lodestar-hub-metrics"]
	g.Expect(svc).NotTo(BeNil())
	svcLabels := svc["metadata"].(map[string]any)["labels"].(map[string]any)
	for k, v := range spec["selector"].(map[string]any)["matchLabels"].(map[string]any) {
		g.Expect(svcLabels).To(HaveKeyWithValue(k, v), "the ServiceMonitor selects the metrics Service")
	}
	ports := svc["spec"].(map[string]any)["ports"].([]any)
	g.Expect(ports).To(ContainElement(HaveKeyWithValue("name", "metrics")))
	_, err = render(t, "lodestar-hub", "--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.service=false")
	g.Expect(err).To(MatchError(ContainSubstring("metrics.serviceMonitor.enabled needs metrics.service")))

	// The dashboard: a ConfigMap for Grafana's sidecar, every query over
	// documented series.
	cm := docs["ConfigMap/test-lodestar-hub-dashboard"]
	g.Expect(cm).NotTo(BeNil())
	g.Expect(cm["metadata"].(map[string]any)["labels"]).To(HaveKeyWithValue("grafana_dashboard", "1"))
	dashboard := map[string]any{}
	g.Expect(json.Unmarshal([]byte(cm["data"].(map[string]any)["lodestar.json"].(string)), &dashboard)).To(Succeed())
	panels := dashboard["panels"].([]any)
	g.Expect(len(panels)).To(BeNumerically(">=", 10))
	documented := documentedSeries(t)
	series := regexp.MustCompile(`\b(lodestar_[a-z_]+|workqueue_[a-z_]+)`)
	used := map[string]bool{}
	for _, p := range panels {
		for _, target := range p.(map[string]any)["targets"].([]any) {
			expr := target.(map[string]any)["expr"].(string)
			for _, m := range series.FindAllString(expr, -1) {
				name := strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_count")
				g.Expect(documented).To(HaveKey(name), "panel %v queries %s", p.(map[string]any)["title"], m)
				used[name] = true
			}
		}
	}
	g.Expect(used).To(HaveLen(len(documented)), "every documented series has a panel")
	docs, err = render(t, "lodestar-hub", "--set", "metrics.dashboard.enabled=false")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(docs).NotTo(HaveKey("ConfigMap/test-lodestar-hub-dashboard"))
}
