package integration

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/renderctl"
)

// One Placement, two members whose labels and properties differ: each gets its
// own replicas, image and annotation; a rule that fails on one member leaves the
// other updated and the failing one at its last good content, until the member
// changes; the preview is what each member's Work holds.
func TestOverridesPerCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	createWebApp(t, ns, nil)
	setClusterLabels(t, member1, map[string]string{"env": "production", "region": "eu-west", "tier": "edge"})
	setProperty(t, member2, "replicas.example.com", "3")

	p := &placementv1alpha1.Placement{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{
				{Version: "v1", Kind: "ConfigMap", Name: "web-config"},
				{Group: "apps", Version: "v1", Kind: "Deployment", Name: "web"},
			},
			Scheduling: placementv1alpha1.Scheduling{ClusterNames: []string{member1, member2}},
			Overrides: []placementv1alpha1.Override{
				{Name: "replicas", Targets: []placementv1alpha1.OverrideTarget{{Group: "apps", Kind: "Deployment"}},
					JSONPatch: []placementv1alpha1.JSONPatchOperation{{Op: "replace", Path: "/spec/replicas",
						ValueExpression: "'replicas.example.com' in cluster.properties ? int(cluster.properties['replicas.example.com']) : 1"}}},
				{Name: "mirror", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "edge"}},
					Image: &placementv1alpha1.ImageOverride{Registry: "mirror.example"}},
				{Name: "region", JSONPatch: []placementv1alpha1.JSONPatchOperation{{Op: "add", Path: "/metadata/annotations/example.com~1region",
					ValueExpression: "cluster.labels['region']"}}},
			},
		},
	}
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)

	g.Eventually(func(g Gomega) {
		eu := deploymentOn(g, member1, ns)
		g.Expect(*eu.Spec.Replicas).To(BeEquivalentTo(1))
		g.Expect(eu.Spec.Template.Spec.Containers[0].Image).To(Equal("mirror.example/nginx:1.27"))
		g.Expect(eu.Annotations).To(HaveKeyWithValue("example.com/region", "eu-west"))
		us := deploymentOn(g, member2, ns)
		g.Expect(*us.Spec.Replicas).To(BeEquivalentTo(3), "from member-2's ClusterProperty")
		g.Expect(us.Spec.Template.Spec.Containers[0].Image).To(Equal("nginx:1.27"))
		g.Expect(us.Annotations).To(HaveKeyWithValue("example.com/region", "us-east"))
		c := placementCondition(g, t, key, placementv1alpha1.WorkSynchronizedCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		expectPreviewIsTheWork(g, p, member1)
		expectPreviewIsTheWork(g, p, member2)
	}).Should(Succeed())
	revision := workOf(g, p, member2).Annotations[placementv1alpha1.RevisionAnnotation]

	// A rule that needs a property only member-1 has: member-1 is updated,
	// member-2 keeps its last good content and is reported.
	setProperty(t, member1, "greeting.example.com", "hallo")
	g.Eventually(func(g Gomega) {
		profile := getProfile(g, placementv1alpha1.DefaultClusterSet, member1)
		g.Expect(slices.ContainsFunc(profile.Status.Properties, func(pr cpv1alpha1.Property) bool { return pr.Name == "greeting.example.com" })).To(BeTrue())
	}).Should(Succeed())
	g.Expect(updateOnHub(&placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}, func(p *placementv1alpha1.Placement) {
		p.Spec.Overrides = append(p.Spec.Overrides, placementv1alpha1.Override{Name: "greeting",
			Targets:    []placementv1alpha1.OverrideTarget{{Kind: "ConfigMap"}},
			MergePatch: &placementv1alpha1.MergePatch{PatchExpression: "{'data': {'greeting': cluster.properties['greeting.example.com']}}"}})
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(greetingOn(g, member1, ns)).To(Equal("hallo"))
		c := placementCondition(g, t, key, placementv1alpha1.WorkSynchronizedCondition)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonOverrideFailed), c.Message)
		g.Expect(c.Message).To(ContainSubstring("overrides fail on 1 of 2 clusters"))
		g.Expect(c.Message).To(ContainSubstring("member-2: rule greeting, mergePatch patchExpression: no such key: greeting.example.com"))
		got := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, key, got)).To(Succeed())
		g.Expect(got.Status.Rollout).NotTo(BeNil())
		g.Expect(got.Status.Rollout.Clusters).To(ContainElement(And(
			HaveField("Name", member2), HaveField("State", placementv1alpha1.ClusterFailed),
			HaveField("Reason", HavePrefix("OverrideFailed: rule greeting")))))
		// Every condition tells the same story: member-2 is listed with why, not
		// applied, and the rollout is not "complete".
		g.Expect(got.Status.Clusters).To(ContainElement(And(
			HaveField("Name", member2), HaveField("Applied", metav1.ConditionFalse),
			HaveField("Reason", placementv1alpha1.ReasonOverrideFailed), HaveField("Message", ContainSubstring("rule greeting")))))
		applied := meta.FindStatusCondition(got.Status.Conditions, placementv1alpha1.AppliedCondition)
		g.Expect(applied).NotTo(BeNil())
		g.Expect(applied.Reason).To(Equal(placementv1alpha1.ReasonOverrideFailed), applied.Message)
		g.Expect(applied.Message).To(ContainSubstring("member-2 (OverrideFailed)"))
		progressing := meta.FindStatusCondition(got.Status.Conditions, placementv1alpha1.ProgressingCondition)
		g.Expect(progressing).NotTo(BeNil())
		g.Expect(progressing.Reason).To(Equal(placementv1alpha1.ReasonRolloutCompleteWithFailures), progressing.Message)
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(greetingOn(g, member2, ns)).To(Equal("hello"))
		g.Expect(workOf(g, p, member2).Annotations).To(HaveKeyWithValue(placementv1alpha1.RevisionAnnotation, revision))
	}).Should(Succeed())
	_, _, err := renderctl.Render(ctx, hubCP.Client, renderctl.Options{Placement: key, Cluster: member2})
	g.Expect(err).To(MatchError(ContainSubstring("rule greeting, mergePatch patchExpression: no such key")), "the preview fails alike")

	// member-2's admin publishes the property: its Work follows, with no change to
	// the Placement.
	setProperty(t, member2, "greeting.example.com", "hello from us")
	g.Eventually(func(g Gomega) {
		g.Expect(greetingOn(g, member2, ns)).To(Equal("hello from us"))
		c := placementCondition(g, t, key, placementv1alpha1.WorkSynchronizedCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
	}).Should(Succeed())

	// A label change of member-1 changes what it renders to: only its Work is
	// written.
	before := workOf(g, p, member2).Generation
	setClusterLabels(t, member1, map[string]string{"env": "production", "region": "eu-west"})
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentOn(g, member1, ns).Spec.Template.Spec.Containers[0].Image).To(Equal("nginx:1.27"))
		expectPreviewIsTheWork(g, p, member1)
	}).Should(Succeed())
	g.Expect(workOf(g, p, member2).Generation).To(Equal(before))
	before1 := workOf(g, p, member1).Generation

	// An expression that does not compile stops the Placement before any Work
	// changes, naming the rule.
	g.Expect(updateOnHub(&placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}, func(p *placementv1alpha1.Placement) {
		p.Spec.Overrides[0].JSONPatch[0].ValueExpression = "cluster.lables['x']"
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := placementCondition(g, t, key, placementv1alpha1.RenderedCondition)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonInvalidOverride), c.Message)
		g.Expect(c.Message).To(ContainSubstring("spec.overrides[0] (replicas): jsonPatch[0]: valueExpression:"))
	}).Should(Succeed())
	g.Expect(workOf(g, p, member2).Generation).To(Equal(before))
	g.Expect(workOf(g, p, member1).Generation).To(Equal(before1))
}

// Every example of docs/overrides.md, applied to the two members, gives each the
// copy the doc says.
func TestOverrideExamples(t *testing.T) {
	files, doc := examples(t, "overrides", 4)
	configMapOn := func(g Gomega, cluster, ns string) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{}
		err := members[cluster].Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web-config"}, cm)
		if apierrors.IsNotFound(err) {
			return nil
		}
		g.Expect(err).NotTo(HaveOccurred())
		return cm
	}
	expect := map[string]func(g Gomega, ns string){
		"replicas-per-region": func(g Gomega, ns string) {
			g.Expect(*deploymentOn(g, member1, ns).Spec.Replicas).To(BeEquivalentTo(3), "member-1 is in eu-west")
			g.Expect(*deploymentOn(g, member2, ns).Spec.Replicas).To(BeEquivalentTo(1))
		},
		"image-mirror": func(g Gomega, ns string) {
			g.Expect(deploymentOn(g, member2, ns).Spec.Template.Spec.Containers[0].Image).To(Equal("mirror.edge.example:5000/nginx:1.27"))
			g.Expect(deploymentOn(g, member1, ns).Spec.Template.Spec.Containers[0].Image).To(Equal("nginx:1.27"))
		},
		"property-value": func(g Gomega, ns string) {
			for _, m := range []string{member1, member2} {
				cm := configMapOn(g, m, ns)
				g.Expect(cm).NotTo(BeNil())
				g.Expect(cm.Annotations).To(HaveKeyWithValue("example.com/cluster-set", placementv1alpha1.DefaultClusterSet))
				nodes := ""
				for _, pr := range getProfile(g, placementv1alpha1.DefaultClusterSet, m).Status.Properties {
					if pr.Name == placementv1alpha1.PropertyNodeCount {
						nodes = pr.Value
					}
				}
				g.Expect(cm.Data).To(HaveKeyWithValue("nodes", nodes), "on %s", m)
			}
		},
		"remove-from-one": func(g Gomega, ns string) {
			g.Expect(configMapOn(g, member2, ns)).To(BeNil())
			deploymentOn(g, member2, ns)
			cm := configMapOn(g, member1, ns)
			g.Expect(cm).NotTo(BeNil())
			g.Expect(cm.Data).To(Equal(map[string]string{"greeting": "hello"}))
		},
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			g := NewWithT(t)
			b, err := os.ReadFile(file)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(doc)).To(ContainSubstring(string(b)), "docs/overrides.md shows the example as it is")
			p := &placementv1alpha1.Placement{}
			g.Expect(yaml.UnmarshalStrict(b, p)).To(Succeed())
			ns := newNamespace(t)
			createWebApp(t, ns, func(cm *corev1.ConfigMap) { cm.Data["debug"] = "true" })
			p.Namespace = ns
			g.Expect(hubCP.Client.Create(t.Context(), p)).To(Succeed())
			check, ok := expect[p.Name]
			g.Expect(ok).To(BeTrue(), "an expectation for %s", p.Name)
			g.Eventually(func(g Gomega) {
				c := placementCondition(g, t, client.ObjectKeyFromObject(p), placementv1alpha1.WorkSynchronizedCondition)
				g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
				check(g, ns)
			}).Should(Succeed())
		})
	}
}
