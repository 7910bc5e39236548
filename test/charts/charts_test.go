// Package charts tests the Helm charts: lint and render with helm itself (built
// from the Go module proxy into bin/), then install them into real API servers and
// run the hub manager and the agent as the charts' ServiceAccounts, so that a rule
// missing from a chart fails here.
package charts

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/agent/work"
	"github.com/lodestar-dev/lodestar/controllers/hub/clustercleanup"
	"github.com/lodestar-dev/lodestar/controllers/hub/clusterhealth"
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
	// The chart's defaults are the binary's.
	g.Expect(containerArgs(g, docs, "test-lodestar-hub")).To(ContainElements("--leader-elect=true", "--kube-api-qps=200", "--zap-log-level=info",
		"--clusterset-namespaces="+placementv1alpha1.DefaultClusterSet,
		"--agent-lease-grace-period="+clusterhealth.DefaultGracePeriod.String(), "--cluster-cleanup-grace-period="+strings.TrimSuffix(clustercleanup.DefaultGracePeriod.String(), "0s")))

	docs, err = render(t, "lodestar-hub", "--set", "replicas=3", "--set", "kubeAPI.qps=50", "--set", "logLevel=debug",
		"--set", "image.repository=registry.example/lodestar-hub", "--set", "image.tag=v9", "--set", "agentWorkPolicy=false")
	g.Expect(err).NotTo(HaveOccurred())
	d := docs["Deployment/test-lodestar-hub"]
	g.Expect(d["spec"].(map[string]any)["replicas"]).To(BeEquivalentTo(3))
	g.Expect(containerArgs(g, docs, "test-lodestar-hub")).To(ContainElements("--kube-api-qps=50", "--zap-log-level=debug"))
	g.Expect(fmt.Sprint(d)).To(ContainSubstring("registry.example/lodestar-hub:v9"))
	g.Expect(docs).NotTo(HaveKey("ValidatingAdmissionPolicy/lodestar-agent-works"))

	_, err = render(t, "lodestar-hub", "--set", "replicas=2", "--set", "leaderElection.enabled=false")
	g.Expect(err).To(MatchError(ContainSubstring("replicas above 1 need leaderElection.enabled")))
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
	g.Expect(containerArgs(g, docs, "test-lodestar-agent")).To(ContainElements("--cluster-set="+placementv1alpha1.DefaultClusterSet,
		"--missing-work-grace-period="+strings.TrimSuffix(work.DefaultMissingWorkGracePeriod.String(), "0s")), "the chart's defaults are the binary's")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(docs).NotTo(HaveKey("ClusterRoleBinding/test-lodestar-agent-cluster-admin"))
	g.Expect(docs).NotTo(HaveKey("Secret/lodestar-hub-kubeconfig"), "an existing Secret is used")
}
