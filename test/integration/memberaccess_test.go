package integration

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	consumer "github.com/lodestar-dev/lodestar/docs/examples/member-access"
	"github.com/lodestar-dev/lodestar/internal/fleet"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/scheme"
)

// TestMemberAccess: member-1's agent publishes its access provider and keeps a
// member token on the hub; a grant copies it to a consumer namespace, where the
// example consumer, through the upstream secretreader plugin, lists member-1's
// namespaces, also after the token is renewed. The agent's hub identity can
// write only its own Secret. A Secret in the way is left alone; a cluster
// leaving the selector, a cluster unjoined and the grant's deletion remove the
// copies.
func TestMemberAccess(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()

	// The access provider, on member-1 only.
	g.Eventually(func(g Gomega) {
		p := &cpv1alpha1.ClusterProfile{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: placementv1alpha1.DefaultClusterSet, Name: member1}, p)).To(Succeed())
		g.Expect(p.Status.AccessProviders).To(ContainElement(And(HaveField("Name", "secretreader"),
			HaveField("Cluster.Server", members[member1].Config.Host), HaveField("Cluster.CertificateAuthorityData", Not(BeEmpty())),
			HaveField("Cluster.Extensions", ConsistOf(And(
				HaveField("Name", "client.authentication.k8s.io/exec"), HaveField("Extension.Raw", MatchJSON(`{"clusterName":"member-1"}`))))))))
	}).Should(Succeed())
	// member-2 publishes only the tunnel's provider (consumer access), no address of its own.
	p2 := &cpv1alpha1.ClusterProfile{}
	g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: placementv1alpha1.DefaultClusterSet, Name: member2}, p2)).To(Succeed())
	g.Expect(p2.Status.AccessProviders).To(ConsistOf(HaveField("Name", placementv1alpha1.TunnelProvider)))

	// A grant of the whole set: member-1's credential is copied, member-2 has none.
	ns := newNamespace(t)
	g.Expect(members[member1].Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "seen-by-" + ns}})).To(Succeed())
	grant := &placementv1alpha1.MemberAccessGrant{ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: placementv1alpha1.MemberAccessGrantSpec{Namespace: ns, ClusterSet: placementv1alpha1.DefaultClusterSet}}
	g.Expect(hubCP.Client.Create(ctx, grant)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := grantOf(g, ns)
		c := meta.FindStatusCondition(got.Status.Conditions, placementv1alpha1.ReadyCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonCredentialsPending))
		g.Expect(c.Message).To(ContainSubstring(member2))
		g.Expect(got.Status.Clusters).To(HaveValue(BeEquivalentTo(2)))
		g.Expect(got.Status.Credentials).To(HaveValue(BeEquivalentTo(1)))
		s, err := secretIn(ns, member1)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.Data).To(HaveKey("token"))
		g.Expect(s.Labels).To(HaveKeyWithValue(placementv1alpha1.MemberAccessGrantLabel, ns))
	}).Should(Succeed())
	_, err := secretIn(ns, member2)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue())

	// The example consumer lists member-1's namespaces with the copied token.
	kubeconfig := consumerKubeconfig(t, ns)
	providers, err := access.NewFromFile(providersFile(t, kubeconfig))
	g.Expect(err).NotTo(HaveOccurred())
	consumerCfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	consumerHub, err := client.New(consumerCfg, client.Options{Scheme: consumer.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	list := func(g Gomega) []string {
		got, err := consumer.Namespaces(ctx, consumerHub, providers, placementv1alpha1.DefaultClusterSet, member1)
		g.Expect(err).NotTo(HaveOccurred())
		return got
	}
	g.Expect(list(g)).To(ContainElements("kube-system", "seen-by-"+ns))
	// member-2 publishes no access provider: the consumer cannot reach it.
	_, err = consumer.Namespaces(ctx, consumerHub, providers, placementv1alpha1.DefaultClusterSet, member2)
	g.Expect(err).To(MatchError(ContainSubstring("no matching cluster accessor")))

	// Renewal: the token changes (every few seconds here), the consumer goes on.
	first, err := secretIn(ns, member1)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		s, err := secretIn(ns, member1)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.Data["token"]).NotTo(Equal(first.Data["token"]))
	}).Should(Succeed())
	g.Expect(list(g)).To(ContainElement("seen-by-" + ns))

	// The agent's hub identity: its own Secret, nothing else.
	agentHub, err := client.New(rest.CopyConfig(agentConfigs[member1]), client.Options{Scheme: scheme.Hub()})
	g.Expect(err).NotTo(HaveOccurred())
	clusterNS := names.ClusterNamespace(member1)
	own := &corev1.Secret{}
	g.Expect(agentHub.Get(ctx, client.ObjectKey{Namespace: clusterNS, Name: placementv1alpha1.MemberAccessSecret}, own)).To(Succeed())
	for what, err := range map[string]error{
		"read the consumer's copy":     agentHub.Get(ctx, client.ObjectKey{Namespace: ns, Name: member1}, &corev1.Secret{}),
		"list its namespace's Secrets": agentHub.List(ctx, &corev1.SecretList{}, client.InNamespace(clusterNS)),
		"create another Secret":        agentHub.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: clusterNS}}),
		"delete its own Secret":        agentHub.Delete(ctx, own),
	} {
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the agent may not %s: %v", what, err)
	}

	// A Secret in the way is not Lodestar's: left alone, and said so.
	ns2 := newNamespace(t)
	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: member1, Namespace: ns2}, StringData: map[string]string{"token": "theirs"}}
	g.Expect(hubCP.Client.Create(ctx, theirs)).To(Succeed())
	conflict := &placementv1alpha1.MemberAccessGrant{ObjectMeta: metav1.ObjectMeta{Name: ns2},
		Spec: placementv1alpha1.MemberAccessGrantSpec{Namespace: ns2, ClusterSet: placementv1alpha1.DefaultClusterSet,
			ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "production"}}}}
	g.Expect(hubCP.Client.Create(ctx, conflict)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(grantOf(g, ns2).Status.Conditions, placementv1alpha1.ReadyCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonSecretConflict), c.Message)
	}).Should(Succeed())
	s, err := secretIn(ns2, member1)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(s.Data["token"])).To(Equal("theirs"))
	g.Expect(hubCP.Client.Delete(ctx, conflict)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := hubCP.Client.Get(ctx, client.ObjectKey{Name: ns2}, &placementv1alpha1.MemberAccessGrant{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}).Should(Succeed())
	_, err = secretIn(ns2, member1)
	g.Expect(err).NotTo(HaveOccurred(), "deleting the grant leaves a Secret it did not make")

	// Narrowed by a label member-1 loses and gets back: the copy goes and returns.
	const key = "member-access-test"
	setLabel := func(value string) {
		g.Expect(updateOnHub(&cpv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Namespace: placementv1alpha1.DefaultClusterSet, Name: member1}},
			func(p *cpv1alpha1.ClusterProfile) {
				if value == "" {
					delete(p.Labels, key)
				} else {
					p.Labels[key] = value
				}
			})).To(Succeed())
	}
	setLabel("yes")
	t.Cleanup(func() { setLabel("") })
	g.Expect(updateOnHub(&placementv1alpha1.MemberAccessGrant{ObjectMeta: metav1.ObjectMeta{Name: ns}}, func(m *placementv1alpha1.MemberAccessGrant) {
		m.Spec.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{key: "yes"}}
	})).To(Succeed())
	ready := func(g Gomega) *metav1.Condition {
		got := grantOf(g, ns)
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		return meta.FindStatusCondition(got.Status.Conditions, placementv1alpha1.ReadyCondition)
	}
	g.Eventually(func(g Gomega) {
		g.Expect(ready(g).Status).To(Equal(metav1.ConditionTrue))
	}).Should(Succeed())
	setLabel("no")
	g.Eventually(func(g Gomega) {
		_, err := secretIn(ns, member1)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}).Should(Succeed())
	setLabel("yes")
	g.Eventually(func(g Gomega) {
		_, err := secretIn(ns, member1)
		g.Expect(err).NotTo(HaveOccurred())
	}).Should(Succeed())

	// A cluster unjoined: its copy goes. (A cluster with no agent; its token
	// written as an agent would.)
	ghost := "ghost-" + ns[len("test-"):]
	_, err = fleet.Join(ctx, hubCP.Config, hubCP.Client, fleet.JoinOptions{Name: ghost, Labels: map[string]string{key: "yes"}, TokenTTL: time.Hour})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(updateOnHub(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: names.ClusterNamespace(ghost), Name: placementv1alpha1.MemberAccessSecret}},
		func(s *corev1.Secret) {
			s.Annotations = map[string]string{placementv1alpha1.MemberAccessExpiresAnnotation: time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}
			s.Data = map[string][]byte{"token": []byte("ghost-token")}
		})).To(Succeed())
	g.Eventually(func(g Gomega) {
		s, err := secretIn(ns, ghost)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(s.Data["token"])).To(Equal("ghost-token"))
	}).Should(Succeed())
	g.Expect(fleet.Unjoin(ctx, hubCP.Client, ghost, fleet.UnjoinOptions{})).To(Succeed())
	g.Eventually(func(g Gomega) {
		_, err := secretIn(ns, ghost)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}).Should(Succeed())

	// The grant deleted: its copies go, then the grant.
	g.Expect(hubCP.Client.Delete(ctx, grantOf(g, ns))).To(Succeed())
	g.Eventually(func(g Gomega) {
		_, err := secretIn(ns, member1)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		err = hubCP.Client.Get(ctx, client.ObjectKey{Name: ns}, &placementv1alpha1.MemberAccessGrant{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}).Should(Succeed())
}
