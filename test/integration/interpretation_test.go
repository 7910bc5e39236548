package integration

import (
	"context"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/settled"
)

var widgetGVK = schema.GroupVersionKind{Group: "interpretation.example.com", Version: "v1", Kind: "Widget"}

// interpretationExample is the objects of docs/examples/interpretation/<file>,
// checked to be shown as they are by docs/interpretation.md.
func interpretationExample(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	_, doc := examples(t, "interpretation", 4)
	return exampleObjects(t, filepath.Join("..", "..", "docs", "examples", "interpretation", file), doc, "")
}

// installWidgets installs the example's Widget CRD on the hub and on the
// given members, once per test binary's hub (the CRD is the same every time),
// and its ResourceInterpretation on the hub.
func installWidgets(t *testing.T, clusters ...string) {
	t.Helper()
	g := NewWithT(t)
	crd := interpretationExample(t, "01-widget-crd.yaml")[0]
	crd.SetNamespace("")
	for _, c := range append([]client.Client{hubCP.Client}, memberClients(clusters)...) {
		if err := c.Create(t.Context(), crd.DeepCopy()); err != nil {
			g.Expect(client.IgnoreAlreadyExists(err)).To(Succeed())
		}
		g.Eventually(func(g Gomega) {
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
			g.Expect(c.Get(t.Context(), client.ObjectKey{Name: crd.GetName()}, got)).To(Succeed())
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			g.Expect(conds).To(ContainElement(And(HaveKeyWithValue("type", "Established"), HaveKeyWithValue("status", "True"))))
		}).Should(Succeed())
	}
	ri := interpretationExample(t, "02-widget-interpretation.yaml")[0]
	ri.SetNamespace("")
	if err := hubCP.Client.Create(t.Context(), ri); err != nil {
		g.Expect(client.IgnoreAlreadyExists(err)).To(Succeed())
	}
}

func memberClients(clusters []string) []client.Client {
	var out []client.Client
	for _, c := range clusters {
		out = append(out, members[c].Client)
	}
	return out
}

// widgetOn is the Widget blue of ns on cluster.
func widgetOn(g Gomega, c client.Client, ns string) *unstructured.Unstructured {
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(widgetGVK)
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "blue"}, w)).To(Succeed())
	return w
}

// setWidgetStatus plays the Widget operator on a member: it writes the status.
func setWidgetStatus(t *testing.T, cluster, ns string, status map[string]any) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		w := widgetOn(g, members[cluster].Client, ns)
		w.Object["status"] = status
		g.Expect(members[cluster].Client.Status().Update(t.Context(), w)).To(Succeed())
	}).Should(Succeed())
}

// A custom kind interpreted on the hub is placed as a Deployment is: the
// example's Widget of size 9, weighted 2:1 over two members, is 6 on member-1
// and 3 on member-2 (the members need no configuration: the health rule
// travels with the Work); the Placement is Available only once both Widgets
// say they are healthy, and names member-2 while its operator reports a
// failure; the hub's Widget shows the ready replicas of both, summed by the
// interpretation's aggregate expression. The example's files are applied as
// users write them.
func TestCustomKindInterpreted(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	installWidgets(t, member1, member2)
	g.Eventually(func(g Gomega) {
		ri := &placementv1alpha1.ResourceInterpretation{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Name: "widgets.interpretation.example.com"}, ri)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(ri.Status.Conditions, placementv1alpha1.ReadyCondition)).To(BeTrue())
	}).Should(Succeed())
	// A second interpretation of the kind (created in the same second: the
	// name breaks the tie) is not used, and says which is.
	createYAML(t, "", `apiVersion: placement.lodestar.dev/v1alpha1
kind: ResourceInterpretation
metadata:
  name: widgets2.interpretation.example.com
spec:
  target: {group: interpretation.example.com, kind: Widget}
  replicas: {path: /spec/other}`)
	t.Cleanup(func() {
		_ = hubCP.Client.Delete(context.Background(), &placementv1alpha1.ResourceInterpretation{ObjectMeta: metav1.ObjectMeta{Name: "widgets2.interpretation.example.com"}})
	})
	g.Eventually(func(g Gomega) {
		ri := &placementv1alpha1.ResourceInterpretation{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Name: "widgets2.interpretation.example.com"}, ri)).To(Succeed())
		ready := meta.FindStatusCondition(ri.Status.Conditions, placementv1alpha1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(placementv1alpha1.ReasonInterpretationConflict))
		g.Expect(ready.Message).To(ContainSubstring("ResourceInterpretation widgets.interpretation.example.com, older, interprets Widget.interpretation.example.com"))
	}).Should(Succeed())
	ns := newNamespace(t)
	placementsGoAtEnd(t, ns)
	for _, obj := range interpretationExample(t, "03-widget-placement.yaml") {
		obj.SetNamespace(ns)
		g.Expect(hubCP.Client.Create(ctx, obj)).To(Succeed(), obj.GetName())
	}

	g.Eventually(func(g Gomega) {
		for cluster, want := range map[string]int64{member1: 6, member2: 3} {
			size, _, _ := unstructured.NestedInt64(widgetOn(g, members[cluster].Client, ns).Object, "spec", "size")
			g.Expect(size).To(Equal(want), "the share of %s", cluster)
			cm := &corev1.ConfigMap{}
			g.Expect(members[cluster].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "widget-config"}, cm)).To(Succeed(), "the ConfigMap goes whole")
		}
		w := &workv1alpha1.Work{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: names.ClusterNamespace(member1), Name: names.Work(ns, "widgets")}, w)).To(Succeed())
		g.Expect(w.Annotations).To(HaveKeyWithValue(lodestarworkv1alpha1.HealthRulesAnnotation, ContainSubstring("ResourceInterpretation widgets.interpretation.example.com")))
	}).Should(Succeed())

	// No status yet: Progressing, by the interpretation, on both.
	placement := func(g Gomega) *placementv1alpha1.Placement {
		p := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "widgets"}, p)).To(Succeed())
		return p
	}
	g.Eventually(func(g Gomega) {
		p := placement(g)
		g.Expect(meta.IsStatusConditionTrue(p.Status.Conditions, placementv1alpha1.AppliedCondition)).To(BeTrue())
		g.Expect(meta.IsStatusConditionFalse(p.Status.Conditions, placementv1alpha1.AvailableCondition)).To(BeTrue())
		interpreted := meta.FindStatusCondition(p.Status.Conditions, placementv1alpha1.InterpretedCondition)
		g.Expect(interpreted).NotTo(BeNil())
		g.Expect(interpreted.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(interpreted.Message).To(ContainSubstring("Widget.interpretation.example.com by widgets.interpretation.example.com"))
	}).Should(Succeed())

	setWidgetStatus(t, member1, ns, map[string]any{"readyReplicas": int64(6)})
	setWidgetStatus(t, member2, ns, map[string]any{"readyReplicas": int64(1), "failure": "2 replicas cannot pull their image"})
	g.Eventually(func(g Gomega) {
		p := placement(g)
		available := meta.FindStatusCondition(p.Status.Conditions, placementv1alpha1.AvailableCondition)
		g.Expect(available).NotTo(BeNil())
		g.Expect(available.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(available.Message).To(And(ContainSubstring("1 of 2 clusters available"), ContainSubstring(member2), ContainSubstring("cannot pull their image")))
		g.Expect(p.Status.Clusters).To(ContainElement(And(HaveField("Name", member2),
			HaveField("Objects", ContainElement(And(HaveField("Kind", "Widget"), HaveField("State", placementv1alpha1.ObjectDegraded),
				HaveField("Message", "2 replicas cannot pull their image")))))))
		g.Expect(p.Status.Clusters).To(ContainElement(And(HaveField("Name", member1), HaveField("Available", metav1.ConditionTrue))))
	}).Should(Succeed())

	setWidgetStatus(t, member2, ns, map[string]any{"readyReplicas": int64(3)})
	g.Eventually(func(g Gomega) {
		p := placement(g)
		g.Expect(meta.IsStatusConditionTrue(p.Status.Conditions, placementv1alpha1.AvailableCondition)).To(BeTrue())
		g.Expect(p.Status.Clusters).To(ContainElement(And(HaveField("Name", member2),
			HaveField("Shares", ConsistOf(HaveField("Replicas", BeEquivalentTo(3)))))))
		hub := widgetOn(g, hubCP.Client, ns)
		ready, _, _ := unstructured.NestedInt64(hub.Object, "status", "readyReplicas")
		clusters, _, _ := unstructured.NestedInt64(hub.Object, "status", "clusters")
		g.Expect(ready).To(Equal(int64(9)), "the hub's Widget sums its clusters'")
		g.Expect(clusters).To(Equal(int64(2)))
		size, _, _ := unstructured.NestedInt64(hub.Object, "spec", "size")
		g.Expect(size).To(Equal(int64(9)), "the hub keeps the total")
	}).Should(Succeed())
}

// A bad rule fails only its kind. A ResourceInterpretation of Gadgets whose
// health expression does not compile is Ready False, naming the expression
// and its position, with a Warning event; a Placement placing a Gadget and a
// ConfigMap is Interpreted False naming it, its Gadgets are Degraded on the
// members, and its ConfigMap is applied and Available beside them. Fixed, the
// kind reads as interpreted.
func TestBadInterpretationFailsOnlyItsKind(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	placementsGoAtEnd(t, ns)
	group := "g" + rand.String(6) + ".example.com"
	for _, c := range []client.Client{hubCP.Client, members[member1].Client, members[member2].Client} {
		createWidgetCRD(t, c, group, apiextensionsv1.NamespaceScoped, "v1")
	}
	kind := "Widget"
	riName := "bad." + group
	createYAML(t, "", `apiVersion: placement.lodestar.dev/v1alpha1
kind: ResourceInterpretation
metadata:
  name: `+riName+`
spec:
  target:
    group: `+group+`
    kind: `+kind+`
  health:
    expression: "self.status.ready >"`)
	t.Cleanup(func() {
		_ = hubCP.Client.Delete(ctx, &placementv1alpha1.ResourceInterpretation{ObjectMeta: metav1.ObjectMeta{Name: riName}})
	})
	g.Eventually(func(g Gomega) {
		ri := &placementv1alpha1.ResourceInterpretation{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Name: riName}, ri)).To(Succeed())
		ready := meta.FindStatusCondition(ri.Status.Conditions, placementv1alpha1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(placementv1alpha1.ReasonInvalidExpression))
		g.Expect(ready.Message).To(ContainSubstring("spec.health.expression: ERROR: <input>:1:20"))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		events := &eventsv1.EventList{}
		g.Expect(hubCP.Client.List(ctx, events)).To(Succeed())
		g.Expect(events.Items).To(ContainElement(And(HaveField("Regarding.Kind", "ResourceInterpretation"), HaveField("Regarding.Name", riName),
			HaveField("Type", corev1.EventTypeWarning), HaveField("Note", ContainSubstring("spec.health.expression")))))
	}).Should(Succeed())

	createYAML(t, ns, `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data: {a: "1"}
---
apiVersion: `+group+`/v1
kind: `+kind+`
metadata:
  name: g1
---
apiVersion: placement.lodestar.dev/v1alpha1
kind: Placement
metadata:
  name: mixed
spec:
  resourceSelectors:
    - {version: v1, kind: ConfigMap, name: settings}
    - {group: `+group+`, version: v1, kind: `+kind+`, name: g1}
  scheduling:
    clusterNames: [member-1, member-2]`)
	g.Eventually(func(g Gomega) {
		p := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mixed"}, p)).To(Succeed())
		interpreted := meta.FindStatusCondition(p.Status.Conditions, placementv1alpha1.InterpretedCondition)
		g.Expect(interpreted).NotTo(BeNil())
		g.Expect(interpreted.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(interpreted.Reason).To(Equal(placementv1alpha1.ReasonInvalidInterpretation))
		g.Expect(interpreted.Message).To(And(ContainSubstring(riName), ContainSubstring("spec.health.expression")))
		g.Expect(meta.IsStatusConditionTrue(p.Status.Conditions, placementv1alpha1.AppliedCondition)).To(BeTrue(), "both kinds are applied")
		stalled := meta.FindStatusCondition(p.Status.Conditions, settled.StalledCondition)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue), "kstatus reads it as failed: only a platform admin can fix it")
		g.Expect(stalled.Reason).To(Equal(placementv1alpha1.ReasonInvalidInterpretation))
		g.Expect(p.Status.Clusters).To(HaveLen(2))
		for _, c := range p.Status.Clusters {
			// Only what is not available is listed: the ConfigMap is not.
			g.Expect(c.Objects).To(ConsistOf(
				And(HaveField("Kind", kind), HaveField("State", placementv1alpha1.ObjectDegraded), HaveField("Message", ContainSubstring("does not compile")))))
			g.Expect(members[c.Name].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, &corev1.ConfigMap{})).To(Succeed())
		}
	}).Should(Succeed())

	g.Eventually(func() error {
		return updateOnHub(&placementv1alpha1.ResourceInterpretation{ObjectMeta: metav1.ObjectMeta{Name: riName}}, func(ri *placementv1alpha1.ResourceInterpretation) {
			ri.Spec.Health.Expression = "{'state': 'Healthy', 'message': 'a gadget is always healthy'}"
		})
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		p := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mixed"}, p)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(p.Status.Conditions, placementv1alpha1.InterpretedCondition)).To(BeTrue())
		g.Expect(meta.IsStatusConditionTrue(p.Status.Conditions, placementv1alpha1.AvailableCondition)).To(BeTrue())
		g.Expect(meta.IsStatusConditionFalse(p.Status.Conditions, settled.StalledCondition)).To(BeTrue())
	}).Should(Succeed())
}
