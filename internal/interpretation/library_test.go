package interpretation

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// libraryDir holds the interpretations the hub chart ships (opt-in per kind)
// and, under testdata, what each must read from its kind's real status shapes.
const libraryDir = "../../charts/lodestar-hub/interpretations"

// libraryCase is a library interpretation's testdata.
type libraryCase struct {
	// Desired is the object as a user writes it on the hub.
	Desired map[string]any `json:"desired"`
	// Replicas: what the desired object's replicas read as, and a share
	// written back and read again; absent when the kind is not divided.
	Replicas *struct {
		Total    int64             `json:"total"`
		Requests map[string]string `json:"requests"`
		Share    int64             `json:"share"`
	} `json:"replicas"`
	Dependencies []Dependency `json:"dependencies"`
	// Health: observed objects (as a member's API server returns them) and
	// the state (and a part of the message) each reads as.
	Health []struct {
		Name     string         `json:"name"`
		Observed map[string]any `json:"observed"`
		State    string         `json:"state"`
		Message  string         `json:"message"`
	} `json:"health"`
	Aggregate *struct {
		Clusters []struct {
			Name   string         `json:"name"`
			Status map[string]any `json:"status"`
		} `json:"clusters"`
		Status map[string]any `json:"status"`
	} `json:"aggregate"`
}

// readInterpretation reads a ResourceInterpretation file.
func readInterpretation(t *testing.T, path string) *placementv1alpha1.ResourceInterpretation {
	t.Helper()
	b, err := os.ReadFile(path)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	ri := &placementv1alpha1.ResourceInterpretation{}
	NewWithT(t).Expect(yaml.UnmarshalStrict(b, ri)).To(Succeed(), path)
	return ri
}

func TestLibrary(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(libraryDir, "*.yaml"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(len(files)).To(BeNumerically(">=", 6), "the library's interpretations")
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			in := Compile(readInterpretation(t, f))
			g.Expect(in.Err).NotTo(HaveOccurred())
			b, err := os.ReadFile(filepath.Join(libraryDir, "testdata", name+".yaml"))
			g.Expect(err).NotTo(HaveOccurred(), "every library interpretation has testdata")
			tc := libraryCase{}
			g.Expect(yaml.UnmarshalStrict(b, &tc)).To(Succeed())
			g.Expect(tc.Health).NotTo(BeEmpty(), "health cases")
			checkLibraryCase(t, in, tc)
		})
	}
}

func checkLibraryCase(t *testing.T, in *Interpretation, tc libraryCase) {
	g := NewWithT(t)
	g.Expect(tc.Desired["kind"]).To(Equal(in.Kind.Kind))
	for _, h := range tc.Health {
		state, msg, err := in.health.State(&unstructured.Unstructured{Object: h.Observed})
		g.Expect(err).NotTo(HaveOccurred(), h.Name)
		g.Expect(state).To(Equal(h.State), h.Name+": "+msg)
		g.Expect(msg).To(ContainSubstring(h.Message), h.Name)
	}
	g.Expect(in.HasReplicas()).To(Equal(tc.Replicas != nil), "replicas")
	if tc.Replicas != nil {
		total, requests, err := in.Replicas(tc.Desired)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(total).To(Equal(tc.Replicas.Total))
		g.Expect(requests).To(HaveLen(len(tc.Replicas.Requests)))
		for name, want := range tc.Replicas.Requests {
			q := requests[name]
			g.Expect(q.Cmp(resource.MustParse(want))).To(BeZero(), "%s: %s, want %s", name, q.String(), want)
		}
		obj := unstructured.Unstructured{Object: tc.Desired}
		written := obj.DeepCopy().Object
		in.WriteReplicas(written, tc.Replicas.Share)
		again, _, err := in.Replicas(written)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(again).To(Equal(tc.Replicas.Share), "the share written reads back")
	}
	deps, err := in.Dependencies(tc.Desired)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(deps).To(ConsistOf(tc.Dependencies))
	g.Expect(in.HasAggregate()).To(Equal(tc.Aggregate != nil), "aggregate")
	if tc.Aggregate != nil {
		var clusters []ClusterStatus
		for _, c := range tc.Aggregate.Clusters {
			clusters = append(clusters, ClusterStatus{Name: c.Name, Status: c.Status})
		}
		st, err := in.Aggregate(tc.Desired, clusters)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(jsonRoundTrip(t, st)).To(Equal(jsonRoundTrip(t, tc.Aggregate.Status)))
	}
}

// jsonRoundTrip makes numbers of both sides the same Go type.
func jsonRoundTrip(t *testing.T, v any) any {
	b, err := yaml.Marshal(v)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	var out any
	NewWithT(t).Expect(yaml.Unmarshal(b, &out)).To(Succeed())
	return out
}
