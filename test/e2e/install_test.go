package e2e

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lodestar-dev/lodestar/internal/scheme"
	"github.com/lodestar-dev/lodestar/internal/testenv"
	"github.com/lodestar-dev/lodestar/internal/testenv/chartproc"
)

// installSteps are the blocks of docs/install.md the test runs, in order.
var installSteps = []string{"hub", "hub-ready", "join", "member-ready", "first-placement",
	"upgrade-hub", "upgrade-member", "uninstall-member", "uninstall-hub"}

// TestInstallGuide follows docs/install.md as written, from the hub's install
// to the uninstall: its install-test blocks run with helm, kubectl and
// kubectl lodestar against a hub API server and two members (each with a
// scheduler, a controller manager and a kwok node). Where the guide's
// clusters would start the charts' pods, the test starts their binaries as
// local processes with the Deployments' arguments, files and ServiceAccounts
// (there is no container runtime here). The guide's promise at the end is
// checked: after the uninstall, what the Placement placed still runs on both
// members, released (no AppliedWork owns it).
func TestInstallGuide(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := markedBlocks(string(doc))
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range installSteps {
		if blocks[step] == "" {
			t.Fatalf("docs/install.md has no install-test block %q (the test runs %v)", step, installSteps)
		}
	}
	version, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	bin, assets, helm := os.Getenv(testenv.BinEnv), os.Getenv(testenv.AssetsEnv), os.Getenv(testenv.HelmEnv)
	if bin == "" || assets == "" || helm == "" {
		t.Fatal("run through `make test`, which builds kubectl, helm and the Lodestar binaries into bin/")
	}
	ctx := t.Context()
	dir := t.TempDir()
	logs, path := filepath.Join(dir, "logs"), filepath.Join(dir, "path")
	for _, d := range []string{logs, path} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The guide's relative paths (charts/, docs/) and tools on PATH.
	for link, target := range map[string]string{filepath.Join(dir, "charts"): filepath.Join(root, "charts"),
		filepath.Join(dir, "docs"): filepath.Join(root, "docs"), filepath.Join(path, "kubectl"): filepath.Join(assets, "kubectl"),
		filepath.Join(path, "helm"): helm, filepath.Join(path, "kubectl-lodestar"): filepath.Join(bin, "kubectl-lodestar")} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}

	hub, members := startInstallFleet(t, dir)
	env := map[string]string{
		"PATH":             path + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HELM_CONFIG_HOME": filepath.Join(dir, "helm", "config"), "HELM_CACHE_HOME": filepath.Join(dir, "helm", "cache"),
		"HELM_DATA_HOME": filepath.Join(dir, "helm", "data"),
		"HUB_KUBECONFIG": filepath.Join(dir, "hub.kubeconfig"), "HUB_SERVER": hub.Config.Host,
		"REGISTRY": "registry.example.com/platform", "VERSION": strings.TrimSpace(string(version)),
	}
	step := func(name string, extra map[string]string) string {
		t.Helper()
		e := maps.Clone(env)
		maps.Copy(e, extra)
		out, err := run(ctx, dir, e, "bash", "-c", "set -euo pipefail -x\n"+blocks[name])
		if err != nil {
			t.Fatalf("docs/install.md, block %q: %v\n%s%s", name, err, out, logTails(logs))
		}
		t.Logf("docs/install.md, block %q:\n%s", name, out)
		return out
	}

	step("hub", nil)
	// The chart's placement-writer policy admits Placements once the API
	// server has their CRD's schema, seconds after the install.
	if err := testenv.PlacementsAdmitted(ctx, hub.Client); err != nil {
		t.Fatal(err)
	}
	manager := serviceAccountKubeconfig(t, hub, "lodestar-hub", filepath.Join(dir, "hub-manager.kubeconfig"))
	hubProcs, debugService, err := chartproc.SpawnHubChart(ctx, nil, hub, dir, manager, bin, logs, nil)
	stopAll := func(procs []*chartproc.Proc) {
		for _, p := range procs {
			p.Stop()
		}
	}
	t.Cleanup(func() { stopAll(hubProcs) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(debugService.Stop)
	step("hub-ready", nil)

	agents := map[string]*chartproc.Proc{}
	memberEnv := func(name string) map[string]string {
		return map[string]string{"MEMBER": name, "MEMBER_KUBECONFIG": filepath.Join(dir, name+".kubeconfig")}
	}
	for _, name := range []string{"member-1", "member-2"} {
		step("join", memberEnv(name))
		agent := serviceAccountKubeconfig(t, members[name], "lodestar-agent", filepath.Join(dir, name+"-agent.kubeconfig"))
		p, err := chartproc.SpawnChart(ctx, nil, members[name], "lodestar-agent", "agent", filepath.Join(dir, "lodestar-agent-"+name), agent, bin, logs, nil)
		if err != nil {
			t.Fatal(err)
		}
		agents[name] = p
		t.Cleanup(p.Stop)
		step("member-ready", memberEnv(name))
	}

	out := step("first-placement", nil)
	for _, want := range []string{"member-1", "member-2", "placement.placement.lodestar.dev/hello condition met"} {
		if !strings.Contains(out, want) {
			t.Errorf("the first Placement's block does not print %q:\n%s", want, out)
		}
	}

	step("upgrade-hub", nil)
	// The upgrade puts the chart's debug Service back; the test's stands in
	// for the cluster network again.
	if err := testenv.InstallDebugAPI(ctx, hub.Client, testenv.ReleaseNamespace, testenv.Port(debugService.Addr())); err != nil {
		t.Fatal(err)
	}
	step("hub-ready", nil)
	for _, name := range []string{"member-1", "member-2"} {
		step("upgrade-member", memberEnv(name))
	}

	for _, name := range []string{"member-1", "member-2"} {
		step("uninstall-member", memberEnv(name))
		agents[name].Stop() // helm uninstall took its pod
	}
	step("uninstall-hub", nil)
	stopAll(hubProcs)

	for name, cp := range members {
		d := &appsv1.Deployment{}
		if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: "hello", Name: "hello"}, d); err != nil {
			t.Errorf("after the uninstall, %s: %v (the guide says its workloads keep running)", name, err)
			continue
		}
		if len(d.OwnerReferences) > 0 {
			t.Errorf("after the uninstall, %s's Deployment still has owners %v: it was not released", name, d.OwnerReferences)
		}
	}
}

// startInstallFleet starts the guide's clusters: a hub (an API server with a
// controller manager without workload controllers, as docs/hub.md has it)
// and two members, and writes their admin kubeconfigs into dir.
func startInstallFleet(t *testing.T, dir string) (*testenv.ControlPlane, map[string]*testenv.ControlPlane) {
	t.Helper()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		errs    []error
		hub     *testenv.ControlPlane
		members = map[string]*testenv.ControlPlane{}
	)
	start := func(name string, f func() (*testenv.ControlPlane, error)) {
		defer wg.Done()
		cp, err := f()
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			return
		}
		t.Cleanup(func() { _ = cp.Stop() })
		if name == "hub" {
			hub = cp
		} else {
			members[name] = cp
		}
		errs = append(errs, testenv.WriteKubeconfig(cp.Config, name, filepath.Join(dir, name+".kubeconfig")))
	}
	wg.Add(3)
	go start("hub", func() (*testenv.ControlPlane, error) { return testenv.StartHubCluster("hub", scheme.Hub()) })
	for _, name := range []string{"member-1", "member-2"} {
		go start(name, func() (*testenv.ControlPlane, error) { return testenv.StartFullMember(name, scheme.Agent()) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return hub, members
}

// serviceAccountKubeconfig writes a kubeconfig of a chart's ServiceAccount
// (the identity its pod would have) and returns its path.
func serviceAccountKubeconfig(t *testing.T, cp *testenv.ControlPlane, name, path string) string {
	t.Helper()
	cfg, err := testenv.ServiceAccountConfig(t.Context(), cp.Config, testenv.ReleaseNamespace, name, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := testenv.WriteKubeconfig(cfg, name, path); err != nil {
		t.Fatal(err)
	}
	return path
}

var marker = regexp.MustCompile("(?m)^<!-- install-test: ([a-z-]+) -->\n```sh\n")

// markedBlocks are the sh blocks of a document that follow an
// `<!-- install-test: name -->` line, by name.
func markedBlocks(doc string) (map[string]string, error) {
	out := map[string]string{}
	for _, m := range marker.FindAllStringSubmatchIndex(doc, -1) {
		name := doc[m[2]:m[3]]
		body, _, ok := strings.Cut(doc[m[1]:], "\n```")
		if !ok {
			return nil, fmt.Errorf("install-test block %q does not end", name)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("two install-test blocks are named %q", name)
		}
		out[name] = body + "\n"
	}
	return out, nil
}

// logTails is the end of each process's log, for a failure's message.
func logTails(dir string) string {
	entries, _ := os.ReadDir(dir)
	var b strings.Builder
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		const keep = 2000
		if len(data) > keep {
			data = data[len(data)-keep:]
		}
		fmt.Fprintf(&b, "\n--- %s (end) ---\n%s", e.Name(), data)
	}
	return b.String()
}
