// Package e2e runs what the README tells a newcomer to run, as they would: the
// quick start's fleet (hack/quickstart.sh, what `make quickstart` runs) and the
// five-minute tour's commands, taken from README.md, so the README cannot drift.
package e2e

import (
	"context"
	"errors"
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
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	tour, err := tourScript(string(readme))
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
		"charts": filepath.Join(root, "charts"), "hack": filepath.Join(root, "hack")} {
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
}

// tourScript is the first sh block of the README's "A five-minute tour".
func tourScript(readme string) (string, error) {
	_, section, ok := strings.Cut(readme, "\n## A five-minute tour\n")
	if !ok {
		return "", errors.New(`README.md has no section "A five-minute tour"`)
	}
	_, block, ok := strings.Cut(section, "\n```sh\n")
	if !ok {
		return "", errors.New("the tour has no ```sh block")
	}
	script, _, ok := strings.Cut(block, "\n```")
	if !ok {
		return "", errors.New("the tour's ```sh block does not end")
	}
	return script + "\n", nil
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
