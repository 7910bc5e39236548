package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// kubectl lodestar adopt takes what already runs on two members (the docs'
// example, with 2 replicas on member-2) under a Placement: the dry run
// shows the replicas' difference as an override, the adoption writes the hub
// objects and the Placement, the agents take the copies over unchanged
// (same UID, same generation: nothing restarts), and from then on a change
// on the hub reaches both.
func TestAdoptWhatRuns(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	placementsGoAtEnd(t, ns)
	files, doc := examples(t, "adopt", 1)
	dir := t.TempDir()
	// kubectl's short names, as a user types them.
	args := []string{"adopt", "deploy/web", "cm/web-settings", "svc/web", "-n", ns}
	for _, cluster := range []string{member1, member2} {
		c := members[cluster].Client
		g.Expect(client.IgnoreAlreadyExists(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		for _, obj := range exampleObjects(t, files[0], doc, ns) {
			if cluster == member2 && obj.GetKind() == "Deployment" {
				g.Expect(unstructured.SetNestedField(obj.Object, int64(2), "spec", "replicas")).To(Succeed())
			}
			g.Expect(c.Create(ctx, obj)).To(Succeed(), "%s %s on %s", obj.GetKind(), obj.GetName(), cluster)
		}
		path := filepath.Join(dir, cluster)
		g.Expect(testenv.WriteKubeconfig(members[cluster].Config, cluster, path)).To(Succeed())
		args = append(args, "--from", cluster+"="+path)
	}
	before := map[string]*appsv1.Deployment{}
	for _, cluster := range []string{member1, member2} {
		d := &appsv1.Deployment{}
		g.Expect(members[cluster].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, d)).To(Succeed())
		before[cluster] = d
	}
	plugin := filepath.Join(os.Getenv("LODESTAR_BIN"), "kubectl-lodestar")

	// The whole member namespace: what was written there, not what every
	// namespace has (kube-root-ca.crt, the default ServiceAccount) nor what
	// the member's controllers made (member-1's ReplicaSet).
	out, err := hubTool(t, testenv.EventuallyTimeout, plugin, "adopt", "--all", "-n", ns, "--from", member1+"="+filepath.Join(dir, member1), "--dry-run")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("kind: Deployment"))
	g.Expect(out).To(ContainSubstring("kind: Service"))
	g.Expect(out).To(ContainSubstring("name: web-settings"))
	g.Expect(out).NotTo(ContainSubstring("kube-root-ca.crt"))
	g.Expect(out).NotTo(ContainSubstring("kind: ReplicaSet"))
	g.Expect(out).To(ContainSubstring("name: adopted\n"))

	// member-2's ClusterProfile records its cluster ID, as `kubectl lodestar
	// join --member-kubeconfig` does (this fleet's joins record none).
	ks := &corev1.Namespace{}
	g.Expect(members[member2].Client.Get(ctx, client.ObjectKey{Name: "kube-system"}, ks)).To(Succeed())
	g.Eventually(func() error {
		return updateOnHub(&cpv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Namespace: placementv1alpha1.DefaultClusterSet, Name: member2}}, func(p *cpv1alpha1.ClusterProfile) {
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[placementv1alpha1.ClusterIDAnnotation] = string(ks.UID)
		})
	}).Should(Succeed())
	t.Cleanup(func() {
		_ = updateOnHub(&cpv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Namespace: placementv1alpha1.DefaultClusterSet, Name: member2}}, func(p *cpv1alpha1.ClusterProfile) {
			delete(p.Annotations, placementv1alpha1.ClusterIDAnnotation)
		})
	})

	// A member name that is no cluster, a kubeconfig of another member, an
	// object no member has: refused, naming what is wrong.
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"deploy/web", "--from", "member-3=" + filepath.Join(dir, member1)}, "no cluster member-3 in the cluster sets bound to namespace " + ns},
		{[]string{"deploy/web", "--from", member2 + "=" + filepath.Join(dir, member1)}, "reaches another cluster"},
		{[]string{"deployment/nosuch", "--from", member1 + "=" + filepath.Join(dir, member1)}, "deployment/nosuch: not in namespace " + ns + " of member-1; nothing is adopted"},
	} {
		out, err := hubTool(t, testenv.EventuallyTimeout, plugin, append([]string{"adopt", "-n", ns, "--dry-run"}, bad.args...)...)
		g.Expect(err).To(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring(bad.want))
	}

	out, err = hubTool(t, testenv.EventuallyTimeout, plugin, append(args, "--dry-run")...)
	g.Expect(err).NotTo(HaveOccurred(), out)
	docs := strings.Split(out, "---\n")
	g.Expect(docs[len(docs)-1]).To(ContainSubstring("kind: Placement"))
	g.Expect(docs[len(docs)-1]).NotTo(Or(ContainSubstring("{}"), ContainSubstring("null")), "the Placement as a user would write it")
	g.Expect(out).To(ContainSubstring("# Deployment web differs at /spec/replicas: member-1=1 member-2=2"))
	g.Expect(out).To(ContainSubstring("takeover: IfNoDiff"))
	g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &appsv1.Deployment{})).NotTo(Succeed(), "a dry run writes nothing")

	out, err = hubTool(t, testenv.EventuallyTimeout, plugin, args...)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("adopted 3 objects from member-1, member-2 into Placement " + ns + "/adopted-web"))

	key := client.ObjectKey{Namespace: ns, Name: "adopted-web"}
	g.Eventually(func(g Gomega) {
		p := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, key, p)).To(Succeed())
		c := placementCondition(g, t, key, placementv1alpha1.AppliedCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
		for cluster, want := range map[string]int32{member1: 1, member2: 2} {
			d := &appsv1.Deployment{}
			g.Expect(members[cluster].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, d)).To(Succeed())
			g.Expect(d.UID).To(Equal(before[cluster].UID), "taken over on %s, not made anew", cluster)
			g.Expect(d.Generation).To(Equal(before[cluster].Generation), "unchanged on %s: nothing restarts", cluster)
			g.Expect(d.Spec.Replicas).To(HaveValue(Equal(want)))
		}
	}).Should(Succeed())

	// Lodestar's now: an edit on the hub reaches both members.
	g.Eventually(func() error {
		return updateOnHub(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-settings"}}, func(cm *corev1.ConfigMap) { cm.Data["greeting"] = "bonjour" })
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		for _, cluster := range []string{member1, member2} {
			cm := &corev1.ConfigMap{}
			g.Expect(members[cluster].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-settings"}, cm)).To(Succeed())
			g.Expect(cm.Data).To(HaveKeyWithValue("greeting", "bonjour"), cluster)
		}
		d := &appsv1.Deployment{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, d)).To(Succeed())
		g.Expect(ptr.Deref(d.Spec.Replicas, 0)).To(BeEquivalentTo(1), "the hub object is the first member's copy")
	}).Should(Succeed())
}
