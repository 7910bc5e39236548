package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"
)

var interpretationExamples = filepath.Join("..", "..", "docs", "examples", "interpretation")

// interpret runs `kubectl lodestar interpret` (offline: no cluster is read).
func interpret(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	return kubectlLodestar(t, append([]string{"interpret"}, args...)...)
}

// The docs' example, evaluated as docs/interpretation.md shows it.
func TestInterpretTheExample(t *testing.T) {
	g := NewWithT(t)
	rule := filepath.Join(interpretationExamples, "02-widget-interpretation.yaml")
	member := filepath.Join(interpretationExamples, "04-widget-on-member.yaml")
	hub := filepath.Join(t.TempDir(), "widget.yaml")
	placement, err := os.ReadFile(filepath.Join(interpretationExamples, "03-widget-placement.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(hub, []byte(strings.Split(string(placement), "\n---\n")[1]), 0o600)).To(Succeed())

	out, _, err := interpret(t, "--rule", rule, "--object", member, "--operation", "health")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(MatchYAML("state: Degraded\nmessage: 2 replicas cannot pull their image\n"))

	out, _, err = interpret(t, "--rule", rule, "--object", hub, "--operation", "replicas", "--share", "6")
	g.Expect(err).NotTo(HaveOccurred())
	got := map[string]any{}
	g.Expect(yaml.Unmarshal([]byte(out), &got)).To(Succeed())
	g.Expect(got).To(HaveKeyWithValue("replicas", BeEquivalentTo(9)))
	g.Expect(got).To(HaveKeyWithValue("requestsPerReplica", HaveKeyWithValue("cpu", "250m")))
	g.Expect(got["written"]).To(HaveKeyWithValue("spec", HaveKeyWithValue("size", BeEquivalentTo(6))))

	out, _, err = interpret(t, "--rule", rule, "--object", hub, "--operation", "dependencies")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(MatchYAML("- kind: ConfigMap\n  name: widget-config\n"))

	out, _, err = interpret(t, "--rule", rule, "--object", hub, "--operation", "aggregate", "--cluster", "member-1="+member, "--cluster", "member-2="+member)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(MatchYAML("status: {readyReplicas: 2, clusters: 2}\n"))
}

// A rule that does not compile prints the CEL error with its position; the
// wrong kind, operation or flags are errors that say so.
func TestInterpretErrors(t *testing.T) {
	g := NewWithT(t)
	b, err := os.ReadFile(filepath.Join(interpretationExamples, "02-widget-interpretation.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	g.Expect(os.WriteFile(bad, []byte(strings.Replace(string(b), "ready >= self.spec.size ?", "ready >= self.spec.size ? ?", 1)), 0o600)).To(Succeed())
	member := filepath.Join(interpretationExamples, "04-widget-on-member.yaml")

	_, _, err = interpret(t, "--rule", bad, "--object", member, "--operation", "health")
	g.Expect(err).To(MatchError(And(ContainSubstring("spec.health.expression: ERROR: <input>:3:29: Syntax error"), ContainSubstring("^"))))
	_, _, err = interpret(t, "--rule", member, "--object", member, "--operation", "health")
	g.Expect(err).To(MatchError(ContainSubstring("not a ResourceInterpretation")))
	rule := filepath.Join(interpretationExamples, "02-widget-interpretation.yaml")
	_, _, err = interpret(t, "--rule", rule, "--object", rule, "--operation", "health")
	g.Expect(err).To(MatchError(ContainSubstring(`the object is a "ResourceInterpretation", the interpretation is for Widget.interpretation.example.com`)))
	_, _, err = interpret(t, "--rule", rule, "--object", member, "--operation", "retain")
	g.Expect(err).To(MatchError(ContainSubstring(`operation "retain"`)))
	_, _, err = interpret(t, "--rule", rule, "--operation", "health")
	g.Expect(err).To(MatchError(ContainSubstring("needs --rule, --object and --operation")))
	_, _, err = interpret(t, "--rule", rule, "--object", member, "--operation", "aggregate", "--cluster", "nofile")
	g.Expect(err).To(MatchError(ContainSubstring("name=file")))
}

// Every interpretation of the hub chart's library, evaluated on its
// testdata's observed objects, reads each one's state.
func TestInterpretTheLibrary(t *testing.T) {
	library := filepath.Join("..", "..", "charts", "lodestar-hub", "interpretations")
	files, err := filepath.Glob(filepath.Join(library, "*.yaml"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(files).To(HaveLen(6))
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			g := NewWithT(t)
			b, err := os.ReadFile(filepath.Join(library, "testdata", filepath.Base(f)))
			g.Expect(err).NotTo(HaveOccurred())
			var td struct {
				Health []struct {
					Name     string         `json:"name"`
					Observed map[string]any `json:"observed"`
					State    string         `json:"state"`
				} `json:"health"`
			}
			g.Expect(yaml.Unmarshal(b, &td)).To(Succeed())
			for _, h := range td.Health {
				obj, err := yaml.Marshal(h.Observed)
				g.Expect(err).NotTo(HaveOccurred())
				file := filepath.Join(t.TempDir(), "observed.yaml")
				g.Expect(os.WriteFile(file, obj, 0o600)).To(Succeed())
				out, _, err := interpret(t, "--rule", f, "--object", file, "--operation", "health")
				g.Expect(err).NotTo(HaveOccurred(), h.Name)
				g.Expect(out).To(ContainSubstring("state: "+h.State), h.Name)
			}
		})
	}
}
