package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// A platform team's flow (issue 73): a release-sized manifest (3 CRDs, 3
// ClusterRoles with their bindings, 50 namespaced objects) applied to the hub
// server-side, then a ClusterPlacement of its cluster-scoped part and a
// Placement of the namespaced part from one file, after Placements with a
// selector of a kind the hub does not serve came and went. The
// ClusterPlacement's status follows its carrier's: it names the revision, and
// Applied never waits for a cluster that has reported.
func TestClusterPlacementStatusFollowsItsCarrierAfterARelease(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := t.Context()

	// Earlier on the same hub: a Placement with overrides and a selector of a
	// kind the hub does not serve, then gone.
	earlier := newNamespace(t)
	createYAML(t, earlier, `apiVersion: v1
kind: ConfigMap
metadata: {name: podinfo, labels: {app: podinfo}}
data: {color: blue}
---
apiVersion: placement.lodestar.dev/v1alpha1
kind: Placement
metadata: {name: podinfo}
spec:
  resourceSelectors:
    - {version: v1, kind: ConfigMap, name: podinfo}
    - {group: nothing.example.com, version: v1, kind: Gizmo}
  scheduling: {clusterSelector: {}}
  overrides:
    - name: green
      clusterSelector: {}
      jsonPatch:
        - {op: replace, path: /data/color, value: green}`)
	podinfo := client.ObjectKey{Namespace: earlier, Name: "podinfo"}
	g.Eventually(func(g Gomega) {
		p := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, podinfo, p)).To(Succeed())
		c := meta.FindStatusCondition(p.Status.Conditions, placementv1alpha1.RenderedCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonInvalidResourceSelector))
	}).Should(Succeed())
	deletePlacement(t, &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: earlier, Name: "podinfo"}})

	// The release, applied server-side as its install page says.
	release := "rel" + rand.String(5)
	ns := newNamespace(t)
	dir := t.TempDir()
	manifest := filepath.Join(dir, "install.yaml")
	g.Expect(os.WriteFile(manifest, []byte(releaseManifest(g, release, ns)), 0o600)).To(Succeed())
	out, err := hubKubectl(t, "apply", "--server-side", "-f", manifest)
	g.Expect(err).NotTo(HaveOccurred(), out)
	t.Cleanup(func() {
		if out, err := hubKubectl(t, "delete", "--wait=false", "--ignore-not-found", "-f", manifest); err != nil {
			t.Logf("deleting the release: %v: %s", err, out)
		}
	})

	// Its placements, from one file.
	placements := filepath.Join(dir, "placements.yaml")
	g.Expect(os.WriteFile(placements, []byte(fmt.Sprintf(`apiVersion: placement.lodestar.dev/v1alpha1
kind: ClusterPlacement
metadata:
  name: %[1]s-cluster
spec:
  resourceSelectors:
    - {group: apiextensions.k8s.io, version: v1, kind: CustomResourceDefinition, labelSelector: {matchLabels: {app.kubernetes.io/part-of: %[1]s}}}
    - {group: rbac.authorization.k8s.io, version: v1, kind: ClusterRole, labelSelector: {matchLabels: {app.kubernetes.io/part-of: %[1]s}}}
    - {group: rbac.authorization.k8s.io, version: v1, kind: ClusterRoleBinding, labelSelector: {matchLabels: {app.kubernetes.io/part-of: %[1]s}}}
  scheduling: {clusterSelector: {}}
---
apiVersion: placement.lodestar.dev/v1alpha1
kind: Placement
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  resourceSelectors:
    - {labelSelector: {matchLabels: {app.kubernetes.io/part-of: %[1]s}}}
  scheduling: {clusterSelector: {}}
`, release, ns)), 0o600)).To(Succeed())
	out, err = hubKubectl(t, "apply", "-f", placements)
	g.Expect(err).NotTo(HaveOccurred(), out)
	t.Cleanup(func() {
		if out, err := hubKubectl(t, "delete", "--wait=false", "--ignore-not-found", "-f", placements); err != nil {
			t.Logf("deleting the placements: %v: %s", err, out)
		}
	})

	cpKey := client.ObjectKey{Name: release + "-cluster"}
	carrierKey := client.ObjectKey{Namespace: placementv1alpha1.ClusterPlacementNamespace, Name: cpKey.Name}
	g.Eventually(func(g Gomega) {
		cp := &placementv1alpha1.ClusterPlacement{}
		g.Expect(hubCP.Client.Get(ctx, cpKey, cp)).To(Succeed())
		carrier := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, carrierKey, carrier)).To(Succeed())

		// Every member reported on its Work: the carrier knows it.
		reported := map[string]bool{}
		for _, c := range carrier.Status.Clusters {
			if c.Applied != "" && c.Applied != metav1.ConditionUnknown {
				reported[c.Name] = true
			}
		}
		g.Expect(reported).To(HaveLen(len(members)), "the carrier has every member's report: %+v", carrier.Status.Clusters)

		// The ClusterPlacement says what its carrier says.
		g.Expect(cp.Status.Revision).NotTo(BeEmpty())
		g.Expect(cp.Status.Revision).To(Equal(carrier.Status.Revision))
		sync := meta.FindStatusCondition(cp.Status.Conditions, placementv1alpha1.WorkSynchronizedCondition)
		g.Expect(sync).NotTo(BeNil())
		g.Expect(sync.Reason).NotTo(Equal(placementv1alpha1.ReasonWaitingForRevision), sync.Message)
		applied := meta.FindStatusCondition(cp.Status.Conditions, placementv1alpha1.AppliedCondition)
		g.Expect(applied).NotTo(BeNil())
		for cluster := range reported {
			g.Expect(applied.Message).NotTo(MatchRegexp(`waiting for[^;]*\b%s\b`, cluster), "Applied waits for a cluster that has reported")
		}
		g.Expect(equality.Semantic.DeepEqual(withoutGenerations(cp.Status), withoutGenerations(carrier.Status))).To(BeTrue(),
			"the ClusterPlacement's status is its carrier's:\n%+v\n%+v", cp.Status.Conditions, carrier.Status.Conditions)
	}).Should(Succeed())
}

// withoutGenerations is st without the generations it was observed at (a
// ClusterPlacement names its own).
func withoutGenerations(st placementv1alpha1.PlacementStatus) placementv1alpha1.PlacementStatus {
	st = *st.DeepCopy()
	st.ObservedGeneration = 0
	for i := range st.Conditions {
		st.Conditions[i].ObservedGeneration = 0
		st.Conditions[i].LastTransitionTime = metav1.Time{}
	}
	return st
}

// releaseManifest is a release's install manifest of Argo CD's shape, labelled
// app.kubernetes.io/part-of: name: 3 CRDs of about Argo CD's sizes, 3
// ClusterRoles (one of them escalating) bound to its ServiceAccounts, and 50
// namespaced objects in ns.
func releaseManifest(g Gomega, name, ns string) string {
	var docs []string
	add := func(format string, args ...any) { docs = append(docs, fmt.Sprintf(format, args...)) }
	labels := fmt.Sprintf("labels: {app.kubernetes.io/part-of: %s}", name)
	// Argo CD's CRDs are large (its Application CRD alone is several hundred
	// KiB): together they take more than one Work.
	for plural, fields := range map[string]int{"applications": 1800, "applicationsets": 1500, "appprojects": 60} {
		crd := bigCRD(g, name+".example.com", plural, fields)
		crd.SetLabels(map[string]string{"app.kubernetes.io/part-of": name})
		raw, err := crd.MarshalJSON()
		g.Expect(err).NotTo(HaveOccurred())
		docs = append(docs, string(raw))
	}
	for i, component := range []string{"application-controller", "server", "applicationset-controller"} {
		rule := fmt.Sprintf(`- {apiGroups: [%s.example.com], resources: ["*"], verbs: [get, list, watch]}`, name)
		if i == 0 {
			rule = `- {apiGroups: ["*"], resources: ["*"], verbs: ["*"]}`
		}
		add(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: %[1]s-%[2]s
  %[3]s
rules:
  %[4]s`, name, component, labels, rule)
		add(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: %[1]s-%[2]s
  %[3]s
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: %[1]s-%[2]s}
subjects:
  - {kind: ServiceAccount, name: %[1]s-%[2]s, namespace: %[4]s}`, name, component, labels, ns)
	}
	for i := range 10 {
		add(`apiVersion: v1
kind: ServiceAccount
metadata: {name: %[1]s-sa-%[2]d, namespace: %[3]s, %[4]s}`, name, i, ns, labels)
		add(`apiVersion: v1
kind: ConfigMap
metadata: {name: %[1]s-cm-%[2]d, namespace: %[3]s, %[4]s}
data: {key: "value %[2]d"}`, name, i, ns, labels)
		add(`apiVersion: v1
kind: Service
metadata: {name: %[1]s-svc-%[2]d, namespace: %[3]s, %[4]s}
spec:
  selector: {app: %[1]s-%[2]d}
  ports: [{name: http, port: 8080}]`, name, i, ns, labels)
		add(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: %[1]s-role-%[2]d, namespace: %[3]s, %[4]s}
rules:
  - {apiGroups: [""], resources: [configmaps], verbs: [get, list, watch]}`, name, i, ns, labels)
		add(`apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: %[1]s-role-%[2]d, namespace: %[3]s, %[4]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: %[1]s-role-%[2]d}
subjects:
  - {kind: ServiceAccount, name: %[1]s-sa-%[2]d, namespace: %[3]s}`, name, i, ns, labels)
	}
	return strings.Join(docs, "\n---\n") + "\n"
}
