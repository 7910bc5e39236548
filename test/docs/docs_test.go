// Package docs checks that what README.md and docs/ say matches the product:
// every kubectl lodestar command in a code block is one the plugin has, with
// flags it accepts; every link between the documents reaches a file and a
// heading; the Placement's -o wide header is the CRD's printer columns; the
// deletion policies named are the API's.
package docs

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// root is the repository, from this package's directory.
const root = "../.."

// documents are README.md and docs/*.md, by path relative to root.
func documents(t *testing.T) map[string]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	paths = append(paths, filepath.Join(root, "README.md"))
	out := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		out[rel] = string(b)
	}
	return out
}

// codeLines are the lines of a document's fenced code blocks, with shell
// continuations joined.
func codeLines(doc string) []string {
	var out []string
	in := false
	pending := ""
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			in = !in
			continue
		}
		if !in {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			pending += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		out = append(out, pending+line)
		pending = ""
	}
	return out
}

// pluginCommand is the kubectl lodestar command a code line runs, as the
// plugin's arguments, without comments, pipes and redirections; nil when the
// line runs none.
var pluginPrefix = regexp.MustCompile(`^\s*(\$ )?(kubectl lodestar|bin/kubectl-lodestar|kubectl-lodestar)\s+`)

func pluginCommand(line string) []string {
	loc := pluginPrefix.FindStringIndex(line)
	if loc == nil {
		return nil
	}
	rest := line[loc[1]:]
	for _, stop := range []string{" #", " |", " >", " &&", ";", " 2>"} {
		if i := strings.Index(rest, stop); i >= 0 {
			rest = rest[:i]
		}
	}
	return strings.Fields(rest)
}

// Every kubectl lodestar command in a code block names verbs the plugin has and
// flags they accept: run with --help, the plugin parses the line (an unknown
// flag fails) and prints the usage of the command it found, which must not be a
// group of commands left with a word it does not know.
func TestDocumentedCommandsExist(t *testing.T) {
	bin, err := testenv.Binary("kubectl-lodestar")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for path, doc := range documents(t) {
		for _, line := range codeLines(doc) {
			args := pluginCommand(line)
			if args == nil || seen[strings.Join(args, " ")] {
				continue
			}
			seen[strings.Join(args, " ")] = true
			if slices.Contains(args, "<(kubectl") {
				continue
			}
			// --help before a "--" (exec's command), where the plugin reads it.
			help := append(slices.Clone(args), "--help")
			if i := slices.Index(args, "--"); i >= 0 {
				help = slices.Concat(args[:i], []string{"--help"}, args[i:])
			}
			cmd := exec.CommandContext(t.Context(), bin, help...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Errorf("%s: `kubectl lodestar %s`: %v: %s", path, strings.Join(args, " "), err, stderr.String())
				continue
			}
			usage := usageBlock(string(out))
			line, _, _ := strings.Cut(usage, "\n")
			words := strings.Fields(line)
			if len(words) == 0 {
				t.Errorf("%s: `kubectl lodestar %s`: no usage in its help", path, strings.Join(args, " "))
				continue
			}
			// A group (its usage ends "[command]") reached with words left is a
			// verb the plugin does not have.
			verbs := words[1:]
			for i := range verbs {
				if strings.HasPrefix(verbs[i], "<") || strings.HasPrefix(verbs[i], "[") {
					verbs = verbs[:i]
					break
				}
			}
			if strings.Contains(usage, "[command]") && len(args) > len(verbs) && !strings.HasPrefix(args[len(verbs)], "-") {
				t.Errorf("%s: `kubectl lodestar %s`: %q is not a command of %q", path, strings.Join(args, " "), args[len(verbs)], strings.Join(words[:len(verbs)+1], " "))
			}
		}
	}
	if len(seen) < 20 {
		t.Errorf("only %d kubectl lodestar commands found in the documents: the parser is broken", len(seen))
	}
}

// usageBlock is the lines after "Usage:" in cobra's help, up to a blank line.
func usageBlock(help string) string {
	_, after, ok := strings.Cut(help, "Usage:\n")
	if !ok {
		return ""
	}
	block, _, _ := strings.Cut(after, "\n\n")
	return strings.TrimSpace(block)
}

var link = regexp.MustCompile(`\]\(([^)\s]*)\)`)

// Every link from one document to another, or to a heading, reaches it.
func TestLinksReachTheirTargets(t *testing.T) {
	docs := documents(t)
	anchors := map[string]map[string]bool{}
	for path, doc := range docs {
		anchors[path] = headings(doc)
	}
	checked := 0
	for path, doc := range docs {
		for _, m := range link.FindAllStringSubmatch(doc, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			resolved := path
			if file != "" {
				resolved = filepath.Clean(filepath.Join(filepath.Dir(path), file))
				if _, err := os.Stat(filepath.Join(root, resolved)); err != nil {
					t.Errorf("%s: link %q: %v", path, target, err)
					continue
				}
			}
			checked++
			if anchor == "" {
				continue
			}
			if a, ok := anchors[resolved]; ok && !a[anchor] {
				t.Errorf("%s: link %q: %s has no heading #%s", path, target, resolved, anchor)
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d links checked: the parser is broken", checked)
	}
}

// headings are a document's GitHub heading anchors.
func headings(doc string) map[string]bool {
	out := map[string]bool{}
	in := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			in = !in
		}
		if in || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		var b strings.Builder
		for _, r := range text {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9'):
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}

// The -o wide header the documents show for Placements is the CRD's printer
// columns, in order.
func TestPlacementWideColumns(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "config", "crd", "bases", "placement.lodestar.dev_placements.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(b, crd); err != nil {
		t.Fatal(err)
	}
	header := []string{"NAME"}
	for _, c := range crd.Spec.Versions[0].AdditionalPrinterColumns {
		header = append(header, strings.ToUpper(c.Name))
	}
	want := regexp.MustCompile(`(?m)^` + strings.Join(header, `\s+`) + `\s*$`)
	found := 0
	for path, doc := range documents(t) {
		for _, line := range strings.Split(doc, "\n") {
			if strings.HasPrefix(line, "NAME ") && strings.Contains(line, "SCHEDULED") {
				found++
				if !want.MatchString(line) {
					t.Errorf("%s: the Placement header %q is not the CRD's -o wide columns %v", path, line, header)
				}
			}
		}
	}
	if found == 0 {
		t.Error("no document shows the Placement's -o wide header")
	}
}

var deletionPolicy = regexp.MustCompile(`deletionPolicy:\s*([A-Za-z]+)`)

// The deletion policies the documents name are the API's.
func TestDeletionPoliciesAreTheAPIs(t *testing.T) {
	valid := []string{string(lodestarworkv1alpha1.DeletionDelete), string(lodestarworkv1alpha1.DeletionDeleteTakenOver), string(lodestarworkv1alpha1.DeletionOrphan)}
	for path, doc := range documents(t) {
		for _, m := range deletionPolicy.FindAllStringSubmatch(doc, -1) {
			if !slices.Contains(valid, m[1]) {
				t.Errorf("%s: deletionPolicy %q is not one of %v", path, m[1], valid)
			}
		}
	}
}
