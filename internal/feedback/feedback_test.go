package feedback

import (
	"encoding/json"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
)

func deployment() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web"},
		"spec":     map[string]any{"replicas": int64(4)},
		"status": map[string]any{
			"readyReplicas": int64(3),
			"conditions":    []any{map[string]any{"type": "Available", "status": "True"}},
		},
	}}
}

func TestValues(t *testing.T) {
	g := NewWithT(t)
	r, err := Compile([]lodestarworkv1alpha1.FeedbackRule{
		{Group: "apps", Kind: "Deployment", Fields: []lodestarworkv1alpha1.FeedbackField{
			{Name: "ready", JSONPath: ".status.readyReplicas"},
			{Name: "braced", JSONPath: "{.spec.replicas}"},
			{Name: "available", JSONPath: `.status.conditions[?(@.type=="Available")].status`},
			{Name: "percent", CEL: "self.status.readyReplicas * 100 / self.spec.replicas"},
			{Name: "summary", CEL: "{'ready': self.status.readyReplicas, 'ok': self.status.readyReplicas > 0}"},
			{Name: "missing", JSONPath: ".status.nothing"},
			{Name: "broken", CEL: "self.status.nothing + 1"},
		}},
		{Kind: "ConfigMap", WholeStatus: true},
	})
	g.Expect(err).NotTo(HaveOccurred())

	values, errs, ok := r.Values(deployment())
	g.Expect(ok).To(BeTrue())
	g.Expect(values).To(HaveKeyWithValue("ready", BeEquivalentTo(3)))
	g.Expect(values).To(HaveKeyWithValue("braced", BeEquivalentTo(4)))
	g.Expect(values).To(HaveKeyWithValue("available", "True"))
	g.Expect(values).To(HaveKeyWithValue("percent", BeEquivalentTo(75)))
	g.Expect(values).To(HaveKeyWithValue("summary", map[string]any{"ready": int64(3), "ok": true}))
	g.Expect(values).NotTo(HaveKey("missing"))
	g.Expect(errs).To(HaveKey("broken"))

	_, _, ok = r.Values(&unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Service"}})
	g.Expect(ok).To(BeFalse(), "no rule names Services")

	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "status": map[string]any{"x": "y"}}}
	values, _, ok = r.Values(cm)
	g.Expect(ok).To(BeTrue())
	g.Expect(values).To(Equal(map[string]any{"status": map[string]any{"x": "y"}}))
}

func TestCompileErrors(t *testing.T) {
	for name, rules := range map[string][]lodestarworkv1alpha1.FeedbackRule{
		"secret":       {{Kind: "Secret", WholeStatus: true}},
		"neither":      {{Kind: "Pod"}},
		"both":         {{Kind: "Pod", WholeStatus: true, Fields: []lodestarworkv1alpha1.FeedbackField{{Name: "a", JSONPath: ".a"}}}},
		"bad jsonpath": {{Kind: "Pod", Fields: []lodestarworkv1alpha1.FeedbackField{{Name: "a", JSONPath: ".a[?("}}}},
		"bad cel":      {{Kind: "Pod", Fields: []lodestarworkv1alpha1.FeedbackField{{Name: "a", CEL: "self.("}}}},
		"no source":    {{Kind: "Pod", Fields: []lodestarworkv1alpha1.FeedbackField{{Name: "a"}}}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Compile(rules)
			NewWithT(t).Expect(err).To(HaveOccurred())
		})
	}
}

func TestEncode(t *testing.T) {
	g := NewWithT(t)
	msg, trimmed := Encode(map[string]any{"a": 1, "b": "two"}, map[string]string{"c": "no such key"}, 1024)
	g.Expect(trimmed).To(BeFalse())
	var m map[string]any
	g.Expect(json.Unmarshal([]byte(msg), &m)).To(Succeed())
	g.Expect(m).To(Equal(map[string]any{
		"values": map[string]any{"a": float64(1), "b": "two"},
		"errors": map[string]any{"c": "no such key"},
	}))

	big := strings.Repeat("x", 500)
	msg, trimmed = Encode(map[string]any{"small": 1, "big1": big, "big2": big}, nil, 700)
	g.Expect(trimmed).To(BeTrue())
	g.Expect(len(msg)).To(BeNumerically("<=", 700))
	g.Expect(json.Unmarshal([]byte(msg), &m)).To(Succeed())
	g.Expect(m["values"]).To(HaveKey("small"))
	g.Expect(m["values"]).To(HaveLen(2))
	g.Expect(m["trimmed"]).To(Equal([]any{"big2"}))

	// Nothing fits but the envelope.
	msg, trimmed = Encode(map[string]any{"big": big}, nil, 30)
	g.Expect(trimmed).To(BeTrue())
	g.Expect(len(msg)).To(BeNumerically("<=", 30))
}

// A feedback expression whose value is len(L)³ references to one list, within
// the cost limit, is an error of that field, not a value built in memory.
func TestNestedMapIsAnErrorNotAValue(t *testing.T) {
	g := NewWithT(t)
	l := "[" + strings.Repeat("1,", 59) + "1]"
	r, err := Compile([]lodestarworkv1alpha1.FeedbackRule{{Group: "apps", Kind: "Deployment", Fields: []lodestarworkv1alpha1.FeedbackField{
		{Name: "bomb", CEL: l + ".map(a, " + l + ".map(b, " + l + "))"},
		{Name: "ready", JSONPath: ".status.readyReplicas"},
	}}})
	g.Expect(err).NotTo(HaveOccurred())
	values, errs, _ := r.Values(deployment())
	g.Expect(errs).To(HaveKeyWithValue("bomb", ContainSubstring("larger than 64 KiB")))
	g.Expect(values).To(HaveKeyWithValue("ready", BeEquivalentTo(3)))
}
