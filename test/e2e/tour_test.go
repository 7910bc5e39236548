// Package e2e runs what the README tells a newcomer to run, as they would: the
// quick start's fleet (hack/quickstart.sh, what `make quickstart` runs) and the
// five-minute tour's commands, taken from README.md, so the README cannot drift.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// tourTimeout bounds one run of the quick start or of the tour on a busy machine.
const tourTimeout = 10 * time.Minute

// TestReadmeTourRunsTwice starts the quick start, runs the README's tour, runs
// the quick start again on the same fleet (a newcomer's second `make
// quickstart`) and the tour again. Every command must succeed: a step that
// expects what an earlier step removed, or a sample apply that conflicts with the
// tour's edits, fails it.
func TestReadmeTourRunsTwice(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	tour, err := script(filepath.Join(root, "README.md"), "A five-minute tour")
	if err != nil {
		t.Fatal(err)
	}
	memberAccess, err := script(filepath.Join(root, "docs", "member-access.md"), "On the quick start")
	if err != nil {
		t.Fatal(err)
	}
	interpretation, err := script(filepath.Join(root, "docs", "interpretation.md"), "On the quick start")
	if err != nil {
		t.Fatal(err)
	}
	accelerators, err := script(filepath.Join(root, "docs", "accelerators.md"), "On the quick start")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, name := range []string{testenv.AssetsEnv, testenv.KwokEnv, testenv.HelmEnv, testenv.BinEnv} {
		if env[name] = os.Getenv(name); env[name] == "" {
			t.Fatalf("%s is not set: run through `make test`, which builds what the quick start runs into bin/", name)
		}
	}
	// A directory of its own laid out like the repository, so that the README's
	// relative paths (bin/, .lodestar/quickstart/) work and a quick start the
	// developer runs in the repository is left alone.
	dir := t.TempDir()
	for link, target := range map[string]string{"bin": env[testenv.BinEnv], "config": filepath.Join(root, "config"),
		"charts": filepath.Join(root, "charts"), "hack": filepath.Join(root, "hack"), "docs": filepath.Join(root, "docs")} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	env["QUICKSTART_DIR"] = filepath.Join(dir, ".lodestar", "quickstart")
	env["KUBECTL"] = filepath.Join(env[testenv.AssetsEnv], "kubectl")
	t.Cleanup(func() {
		if out, err := run(context.Background(), dir, env, "hack/quickstart.sh", "down"); err != nil {
			t.Errorf("quickstart down: %v\n%s", err, out)
		}
	})

	for i := 1; i <= 2; i++ {
		if out, err := run(t.Context(), dir, env, "hack/quickstart.sh", "up"); err != nil {
			t.Fatalf("quick start, run %d: %v\n%s%s", i, err, out, logs(env["QUICKSTART_DIR"]))
		}
		out, err := run(t.Context(), dir, env, "bash", "-c", "set -euo pipefail -x\n"+tour)
		if err != nil {
			t.Fatalf("the README's tour, run %d: %v\n%s%s", i, err, out, logs(env["QUICKSTART_DIR"]))
		}
		for _, want := range []string{"stage production approved for revision", `placement.placement.lodestar.dev "web" deleted`} {
			if !strings.Contains(out, want) {
				t.Errorf("the README's tour, run %d, does not print %q:\n%s", i, want, out)
			}
		}
	}

	// What docs/member-access.md and docs/metrics.md say to try on the quick start.
	out, err := run(t.Context(), dir, env, "bash", "-c", "set -euo pipefail -x\n"+memberAccess)
	if err != nil {
		t.Fatalf("docs/member-access.md on the quick start: %v\n%s", err, out)
	}
	for _, want := range []string{"condition met", "member-1", "https://127.0.0.1:"} {
		if !strings.Contains(out, want) {
			t.Errorf("docs/member-access.md on the quick start does not print %q:\n%s", want, out)
		}
	}
	// The stateful examples need storage classes the quick start's members
	// provide (docs/stateful.md): the first one, as written, in a namespace of
	// its own, is placed, its claim bound and its StatefulSet Available.
	stateful := `set -euo pipefail -x
export KUBECONFIG=.lodestar/quickstart/hub.kubeconfig
bin/kubectl create namespace stateful-example --dry-run=client -o yaml | bin/kubectl apply -f -
sed 's/namespace: shop/namespace: stateful-example/' docs/examples/hub-tools/namespace.yaml | bin/kubectl apply -f -
bin/kubectl -n stateful-example apply -f docs/examples/stateful/01-hold.yaml
bin/kubectl -n stateful-example wait placement/db --for=condition=Available --timeout=180s
`
	if out, err := run(t.Context(), dir, env, "bash", "-c", stateful); err != nil {
		t.Errorf("docs/examples/stateful/01-hold.yaml on the quick start: %v\n%s%s", err, out, logs(env["QUICKSTART_DIR"]))
	}
	// docs/interpretation.md on the quick start: a custom kind's CRD on the
	// hub and the members, its Widget divided and Available, and its status
	// reflected once the platform admin grants it with helm upgrade (the
	// manager retries on its own; nothing else changes).
	out, err = run(t.Context(), dir, env, "bash", "-c", "set -euo pipefail -x\n"+interpretation)
	if err != nil {
		t.Errorf("docs/interpretation.md on the quick start: %v\n%s%s", err, out, logs(env["QUICKSTART_DIR"]))
	} else if !strings.Contains(out, "\n9\n") {
		t.Errorf("docs/interpretation.md on the quick start: the hub's Widget does not read 9 ready replicas:\n%s", out)
	}
	scrapeEach(t, filepath.Join(env["QUICKSTART_DIR"], "metrics"), map[string]string{
		// Both hub replicas count from their caches; the standby's are filled too.
		"lodestar-hub-0": "lodestar_placements{", "lodestar-hub-1": "lodestar_placements{", "lodestar-agent-member-1": "lodestar_agent_heartbeats_total ",
		"lodestar-agent-member-2": "lodestar_agent_heartbeats_total ",
	})
	// docs/accelerators.md on the quick start, last (it drains member-2 and
	// brings it back): a Capacity-divided Deployment converges to its 5
	// replicas after the drain and the uncordon.
	out, err = run(t.Context(), dir, env, "bash", "-c", "set -euo pipefail -x\n"+accelerators)
	if err != nil {
		t.Errorf("docs/accelerators.md on the quick start: %v\n%s%s", err, out, logs(env["QUICKSTART_DIR"]))
	} else if !strings.Contains(out, "the fleet runs 5 of 5") {
		t.Errorf("docs/accelerators.md on the quick start: the division did not come back to 5 replicas:\n%s", out)
	}
}

// scrapeEach reads the quick start's list of metrics endpoints and checks that
// each process listed serves the series wanted of it.
func scrapeEach(t *testing.T, list string, want map[string]string) {
	t.Helper()
	b, err := os.ReadFile(list)
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("%s: line %q is not process, cluster, address", list, line)
		}
		served[f[0]] = f[2]
	}
	for process, series := range want {
		url, ok := served[process]
		if !ok {
			t.Errorf("%s lists no %s", list, process)
			continue
		}
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("%s: %v", process, err)
			continue
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || !strings.Contains(string(body), series) {
			t.Errorf("%s at %s does not serve %q (%v)", process, url, series, err)
		}
	}
}

// script is the first sh block of a document's section (a level-2 heading).
func script(path, heading string) (string, error) {
	doc, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	_, section, ok := strings.Cut(string(doc), "\n## "+heading+"\n")
	if !ok {
		return "", fmt.Errorf("%s has no section %q", path, heading)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "\n```sh\n")
	if !ok {
		return "", fmt.Errorf("%s: section %q has no ```sh block", path, heading)
	}
	body, _, ok := strings.Cut(block, "\n```")
	if !ok {
		return "", errors.New(path + ": a ```sh block does not end")
	}
	return body + "\n", nil
}

// run runs a command in dir with env added, and returns its output.
func run(ctx context.Context, dir string, env map[string]string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, tourTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// logs is the tail of the fleet's own log, for a failure's message.
func logs(quickstartDir string) string {
	b, err := os.ReadFile(filepath.Join(quickstartDir, "devfleet.log"))
	if err != nil {
		return ""
	}
	const keep = 4000
	if len(b) > keep {
		b = b[len(b)-keep:]
	}
	return "\n--- devfleet.log (end) ---\n" + string(b)
}
