package dependencies

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/interpretation"
)

func object(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
		t.Fatal(err)
	}
	return obj
}

// podSpec is a pod spec that references one of each kind every way a pod can.
const podSpec = `
      serviceAccountName: runner
      imagePullSecrets: [{name: registry}]
      volumes:
      - {name: a, configMap: {name: settings}}
      - {name: b, secret: {secretName: tls}}
      - {name: c, persistentVolumeClaim: {claimName: data}}
      - name: d
        projected:
          sources:
          - configMap: {name: bundle}
          - secret: {name: token}
          - serviceAccountToken: {path: t}
      - {name: e, emptyDir: {}}
      initContainers:
      - name: init
        image: busybox
        envFrom: [{configMapRef: {name: init-env}}]
      containers:
      - name: app
        image: app
        envFrom: [{secretRef: {name: app-env}}, {configMapRef: {name: settings}}]
        env:
        - {name: A, valueFrom: {configMapKeyRef: {name: flags, key: a}}}
        - {name: B, valueFrom: {secretKeyRef: {name: password, key: b}}}
        - {name: C, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
        - {name: D, value: plain}
`

// podSpecAt is podSpec indented by depth spaces.
func podSpecAt(depth int) string {
	return strings.ReplaceAll(podSpec, "\n      ", "\n"+strings.Repeat(" ", depth))
}

var everything = []string{
	"ConfigMap/bundle", "ConfigMap/flags", "ConfigMap/init-env", "ConfigMap/settings",
	"PersistentVolumeClaim/data", "Secret/app-env", "Secret/password", "Secret/registry", "Secret/tls", "Secret/token",
	"ServiceAccount/runner",
}

func names(refs []Ref) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.String()
	}
	return out
}

func TestOfEveryKindThatRunsPods(t *testing.T) {
	for name, doc := range map[string]string{
		"Pod":        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:" + podSpecAt(2),
		"Deployment": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n" + podSpec,
		"StatefulSet": "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: s}\nspec:\n  volumeClaimTemplates: [{metadata: {name: not-a-dependency}}]\n" +
			"  template:\n    spec:\n" + podSpec,
		"DaemonSet": "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n" + podSpec,
		"Job":       "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    spec:\n" + podSpec,
		"CronJob": "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: c}\nspec:\n  jobTemplate:\n    spec:\n      template:\n        spec:\n" +
			podSpecAt(10),
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			refs, err := Of(object(t, doc), nil)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(names(refs)).To(Equal(everything), "sorted, each once")
		})
	}
}

func TestOfOtherObjects(t *testing.T) {
	g := NewWithT(t)
	refs, err := Of(object(t, "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: runner}\nimagePullSecrets: [{name: registry}, {name: mirror}]\nsecrets: [{name: old-token}]\n"), nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(refs)).To(Equal([]string{"Secret/mirror", "Secret/registry"}), "a ServiceAccount's image pull Secrets (its token Secrets are the hub's)")

	refs, err = Of(object(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}\n"), nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(refs).To(BeEmpty())

	refs, err = Of(object(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: 1}\n"), nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(refs).To(BeEmpty(), "a workload without a template references nothing")

	_, err = Of(object(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      containers: 7\n"), nil)
	g.Expect(err).To(MatchError(ContainSubstring("reading the pod template at spec.template.spec")))
}

func TestOfAnInterpretedKind(t *testing.T) {
	g := NewWithT(t)
	ri := &placementv1alpha1.ResourceInterpretation{}
	ri.Name = "widgets"
	ri.Spec.Target = placementv1alpha1.InterpretedKind{Group: "example.com", Kind: "Widget"}
	ri.Spec.Dependencies = &placementv1alpha1.DependenciesInterpretation{Expression: `[{"kind": "ConfigMap", "name": self.spec.config}, {"group": "example.com", "kind": "Gadget", "name": "g"}]`}
	set := (&interpretation.Cache{}).Set([]placementv1alpha1.ResourceInterpretation{*ri})
	widget := object(t, "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {config: settings}\n")

	refs, err := Of(widget, set)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(refs)).To(Equal([]string{"ConfigMap/settings", "Gadget.example.com/g"}))

	refs, err = Of(widget, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(refs).To(BeEmpty(), "an uninterpreted kind references nothing")

	ri.Spec.Dependencies.Expression = `self.spec.nothing`
	ri.Generation = 2
	_, err = Of(widget, (&interpretation.Cache{}).Set([]placementv1alpha1.ResourceInterpretation{*ri}))
	g.Expect(err).To(MatchError(ContainSubstring("spec.dependencies.expression")))
}
