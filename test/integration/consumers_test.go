package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1alpha1 "github.com/lodestar-dev/lodestar/api/debug/v1alpha1"
	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/consumeraccess"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// TestTunnelAccessProvider: every member's ClusterProfile lists the tunnel's
// access provider, a path on the hub. Two consumers (hub ServiceAccounts),
// granted different rules by grants written as users write them, reach both
// members through the lodestar-credentials plugin, each as its own member
// identity with exactly its grants' rights; a consumer without a grant is
// refused by the hub; a revoked grant cuts the consumer's open watch and its
// rules leave the members.
func TestTunnelAccessProvider(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)

	// The provider: the hub's address, the debug API's path, the hub's CA.
	for _, cluster := range []string{member1, member2} {
		g.Eventually(func(g Gomega) {
			p := getProfile(g, placementv1alpha1.DefaultClusterSet, cluster)
			g.Expect(p.Status.AccessProviders).To(ContainElement(And(
				HaveField("Name", placementv1alpha1.TunnelProvider),
				HaveField("Cluster.Server", strings.TrimSuffix(hubCP.Config.Host, "/")+debugv1alpha1.ClusterProxyPath(cluster)),
				HaveField("Cluster.CertificateAuthorityData", Not(BeEmpty())))))
		}).Should(Succeed())
	}

	// Two consumers; "viewer" may read namespaces, "editor" also write
	// ConfigMaps; "outsider" has no grant.
	viewer, editor, outsider := consumerOf(t, ns, "viewer"), consumerOf(t, ns, "editor"), consumerOf(t, ns, "outsider")
	view, edit := "view-"+ns, "edit-"+ns
	createYAML(t, "", fmt.Sprintf(`apiVersion: placement.lodestar.dev/v1alpha1
kind: ConsumerAccessGrant
metadata:
  name: %[1]s
spec:
  consumers:
  - namespace: %[3]s
    name: viewer
  - namespace: %[3]s
    name: editor
  clusterSet: lodestar-fleet
  rules:
  - apiGroups: [""]
    resources: [namespaces]
    verbs: [get, list, watch]
---
apiVersion: placement.lodestar.dev/v1alpha1
kind: ConsumerAccessGrant
metadata:
  name: %[2]s
spec:
  consumers:
  - namespace: %[3]s
    name: editor
  clusterSet: lodestar-fleet
  rules:
  - apiGroups: [""]
    resources: [configmaps]
    verbs: [get, list, create, delete]
`, view, edit, ns))
	for _, grant := range []string{view, edit} {
		t.Cleanup(func() {
			_ = hubCP.Client.Delete(ctx, &placementv1alpha1.ConsumerAccessGrant{ObjectMeta: metav1.ObjectMeta{Name: grant}})
		})
		g.Eventually(func(g Gomega) {
			got := consumerGrant(g, grant)
			c := meta.FindStatusCondition(got.Status.Conditions, placementv1alpha1.ReadyCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
			g.Expect(got.Status.Clusters).To(HaveValue(BeEquivalentTo(2)))
			g.Expect(got.Status.Applied).To(HaveValue(BeEquivalentTo(2)))
		}).Should(Succeed())
	}

	for _, cluster := range []string{member1, member2} {
		// Each consumer is itself on the member, never the agent.
		for _, c := range []*tunnelConsumer{viewer, editor} {
			cs := c.member(t, cluster)
			g.Eventually(func(g Gomega) {
				review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(review.Status.UserInfo.Username).To(Equal(debugv1alpha1.ConsumerUser(ns, c.name)))
				g.Expect(review.Status.UserInfo.Groups).To(ContainElement(debugv1alpha1.ConsumerGroup))
				list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(list.Items).NotTo(BeEmpty())
			}).Should(Succeed())
		}
		// Their rights differ: the editor writes a ConfigMap, the viewer may not.
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "from-" + ns, Namespace: "default"}}
		_, err := viewer.member(t, cluster).CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the viewer may not write on %s: %v", cluster, err)
		g.Expect(err.Error()).To(ContainSubstring(debugv1alpha1.ConsumerUser(ns, "viewer")), "the member refuses the viewer by its own name")
		_, err = editor.member(t, cluster).CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(members[cluster].Client.Delete(ctx, cm)).To(Succeed())
		// The member's own word on the identities (a SubjectAccessReview).
		for user, allowed := range map[string]bool{debugv1alpha1.ConsumerUser(ns, "viewer"): false, debugv1alpha1.ConsumerUser(ns, "editor"): true} {
			review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user,
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Resource: "configmaps", Namespace: "default"}}}
			g.Expect(members[cluster].Client.Create(ctx, review)).To(Succeed())
			g.Expect(review.Status.Allowed).To(Equal(allowed), "%s on %s", user, cluster)
		}
		// No grant: the hub refuses before any member is asked.
		_, err = outsider.member(t, cluster).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		g.Expect(err.Error()).To(ContainSubstring("clusters/proxy"))
	}

	// A hub admin is no consumer: the grant, not RBAC alone, opens the tunnel.
	admin := rest.CopyConfig(hubCP.Config)
	admin.Host = strings.TrimSuffix(hubCP.Config.Host, "/") + debugv1alpha1.ClusterProxyPath(member1)
	adminCS, err := kubernetes.NewForConfig(admin)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = adminCS.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("not a ServiceAccount"))

	// Revoked: the viewer's open watch through member-1's tunnel ends, new
	// requests are refused at the hub, and the rules leave the members.
	w, err := viewer.member(t, member1).CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	revoked := time.Now()
	g.Expect(hubCP.Client.Delete(ctx, &placementv1alpha1.ConsumerAccessGrant{ObjectMeta: metav1.ObjectMeta{Name: view}})).To(Succeed())
	var last watch.Event
	g.Eventually(func() bool {
		for {
			select {
			case e, open := <-w.ResultChan():
				if !open {
					return true
				}
				last = e
			default:
				return false
			}
		}
	}).Should(BeTrue(), "the revoked consumer's watch ends")
	// It ends saying why, not with a reset stream (INTERNAL_ERROR).
	g.Expect(last.Type).To(Equal(watch.Error), "%+v", last)
	st, ok := last.Object.(*metav1.Status)
	g.Expect(ok).To(BeTrue(), "%T", last.Object)
	g.Expect(st.Reason).To(Equal(metav1.StatusReasonForbidden))
	g.Expect(st.Message).To(ContainSubstring("access revoked: no ConsumerAccessGrant grants ServiceAccount " + ns + "/viewer cluster " + member1 + " any more"))
	t.Logf("the revoked consumer's watch ended %s after the grant's deletion", time.Since(revoked).Round(100*time.Millisecond))
	g.Eventually(func(g Gomega) {
		_, err := viewer.member(t, member1).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		for _, cluster := range []string{member1, member2} {
			err := members[cluster].Client.Get(ctx, client.ObjectKey{Name: consumeraccess.RoleName(view)}, &rbacv1.ClusterRole{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the grant's rules left %s", cluster)
		}
		err = hubCP.Client.Get(ctx, client.ObjectKey{Name: view}, &placementv1alpha1.ConsumerAccessGrant{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the grant goes once its rules left the members")
	}).Should(Succeed())
	// The editor keeps what its own grant gives, and only that.
	_, err = editor.member(t, member1).CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = editor.member(t, member1).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the editor lost what the deleted grant gave: %v", err)
}

// TestConsumerAccessGrantSelection: a grant follows its selector (a cluster
// leaving it loses the Work and the hub's permission), and an invalid selector
// grants nothing and says why.
func TestConsumerAccessGrantSelection(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	c := consumerOf(t, ns, "tool")
	name := "select-" + ns
	createYAML(t, "", fmt.Sprintf(`apiVersion: placement.lodestar.dev/v1alpha1
kind: ConsumerAccessGrant
metadata:
  name: %s
spec:
  consumers:
  - namespace: %s
    name: tool
  clusterSet: lodestar-fleet
  clusterSelector:
    matchLabels:
      env: production
  rules:
  - apiGroups: [""]
    resources: [namespaces]
    verbs: [list]
`, name, ns))
	t.Cleanup(func() {
		_ = hubCP.Client.Delete(ctx, &placementv1alpha1.ConsumerAccessGrant{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	prod, other := clustersWithEnv(g, "production")
	g.Eventually(func(g Gomega) {
		got := consumerGrant(g, name)
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, placementv1alpha1.ReadyCondition)).To(BeTrue())
		g.Expect(got.Status.Clusters).To(HaveValue(BeEquivalentTo(len(prod))))
	}).Should(Succeed())
	for _, cluster := range prod {
		g.Eventually(func() error {
			_, err := c.member(t, cluster).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
			return err
		}).Should(Succeed())
	}
	for _, cluster := range other {
		_, err := c.member(t, cluster).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s is not selected: %v", cluster, err)
	}

	// An invalid selector: nothing granted, the reason said.
	g.Expect(updateOnHub(&placementv1alpha1.ConsumerAccessGrant{ObjectMeta: metav1.ObjectMeta{Name: name}}, func(cag *placementv1alpha1.ConsumerAccessGrant) {
		cag.Spec.ClusterSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Near"}}}
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := consumerGrant(g, name)
		c := meta.FindStatusCondition(got.Status.Conditions, placementv1alpha1.ReadyCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonInvalidGrantSelector))
		g.Expect(got.Status.Clusters).To(HaveValue(BeEquivalentTo(0)))
		role := &rbacv1.ClusterRole{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Name: consumeraccess.RoleName(name)}, role)).To(Succeed())
		g.Expect(role.Rules).To(BeEmpty(), "a grant of no cluster grants no cluster on the hub")
	}).Should(Succeed())
	for _, cluster := range prod {
		g.Eventually(func() bool {
			_, err := c.member(t, cluster).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
			return apierrors.IsForbidden(err)
		}).Should(BeTrue())
	}
}

// clustersWithEnv splits the default set's clusters by their env label.
func clustersWithEnv(g Gomega, env string) (with, without []string) {
	for _, cluster := range []string{member1, member2} {
		if getProfile(g, placementv1alpha1.DefaultClusterSet, cluster).Labels["env"] == env {
			with = append(with, cluster)
		} else {
			without = append(without, cluster)
		}
	}
	g.Expect(with).NotTo(BeEmpty())
	g.Expect(without).NotTo(BeEmpty())
	return with, without
}

func consumerGrant(g Gomega, name string) *placementv1alpha1.ConsumerAccessGrant {
	grant := &placementv1alpha1.ConsumerAccessGrant{}
	g.Expect(hubCP.Client.Get(context.Background(), client.ObjectKey{Name: name}, grant)).To(Succeed())
	return grant
}

// tunnelConsumer is a hub ServiceAccount that reaches members through the
// tunnel access provider, as a platform team's controller does: its token in a
// file, the lodestar-credentials plugin in its provider file.
type tunnelConsumer struct {
	namespace, name string
	providers       *access.Config
}

// consumerOf makes the ServiceAccount namespace/name on the hub, a token of
// it in a file, and its provider file.
func consumerOf(t *testing.T, namespace, name string) *tunnelConsumer {
	t.Helper()
	g := NewWithT(t)
	g.Expect(hubCP.Client.Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}})).To(Succeed())
	cfg, err := testenv.ServiceAccountConfig(t.Context(), hubCP.Config, namespace, name, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	plugin, err := testenv.Binary("lodestar-credentials")
	g.Expect(err).NotTo(HaveOccurred())
	providers, err := testenv.TunnelProviders(t.TempDir(), plugin, cfg.BearerToken)
	g.Expect(err).NotTo(HaveOccurred())
	return &tunnelConsumer{namespace: namespace, name: name, providers: providers}
}

// member is the consumer's client of cluster, built from its ClusterProfile
// as any SIG-Multicluster consumer builds it.
func (c *tunnelConsumer) member(t *testing.T, cluster string) kubernetes.Interface {
	t.Helper()
	g := NewWithT(t)
	p := &cpv1alpha1.ClusterProfile{}
	g.Expect(hubCP.Client.Get(t.Context(), client.ObjectKey{Namespace: placementv1alpha1.DefaultClusterSet, Name: cluster}, p)).To(Succeed())
	cfg, err := c.providers.BuildConfigFromCP(p)
	g.Expect(err).NotTo(HaveOccurred())
	cs, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	g.Expect(err).NotTo(HaveOccurred())
	return cs
}

// The lodestar-tunnel access provider is the hub's (issue 65): consumers send
// their own hub token to its server. With member-2's agent token, a thief
// cannot point it elsewhere, nor take it away: the hub refuses the write with
// its reason, and the entry consumers follow stays the hub's. The agent's own
// report (its properties) still goes through.
func TestAgentCannotRewriteTheTunnelProvider(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	agentClient, err := client.New(agentConfigs[member2], client.Options{Scheme: hubCP.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	want := strings.TrimSuffix(hubCP.Config.Host, "/") + debugv1alpha1.ClusterProxyPath(member2)
	g.Eventually(func(g Gomega) {
		p := getProfile(g, placementv1alpha1.DefaultClusterSet, member2)
		g.Expect(p.Status.AccessProviders).To(ContainElement(And(HaveField("Name", placementv1alpha1.TunnelProvider), HaveField("Cluster.Server", want))))
	}).Should(Succeed())

	for name, edit := range map[string]func(aps []cpv1alpha1.AccessProvider) []cpv1alpha1.AccessProvider{
		"another server": func(aps []cpv1alpha1.AccessProvider) []cpv1alpha1.AccessProvider {
			for i := range aps {
				if aps[i].Name == placementv1alpha1.TunnelProvider {
					aps[i].Cluster.Server = "https://thief.example.net/clusters/member-2/proxy"
					aps[i].Cluster.CertificateAuthorityData = []byte("the thief's CA")
				}
			}
			return aps
		},
		"no tunnel": func(aps []cpv1alpha1.AccessProvider) []cpv1alpha1.AccessProvider {
			return slices.DeleteFunc(aps, func(ap cpv1alpha1.AccessProvider) bool { return ap.Name == placementv1alpha1.TunnelProvider })
		},
	} {
		g.Eventually(func(g Gomega) {
			p := getProfile(g, placementv1alpha1.DefaultClusterSet, member2)
			p.Status.AccessProviders = edit(p.Status.AccessProviders)
			err := agentClient.Status().Update(ctx, p)
			g.Expect(apierrors.IsConflict(err)).To(BeFalse(), "the agent wrote meanwhile: again")
			g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "%s: %v", name, err)
			g.Expect(err).To(MatchError(ContainSubstring("the lodestar-tunnel access provider is written by the hub")), name)
		}).Should(Succeed())
	}
	g.Consistently(func(g Gomega) {
		p := getProfile(g, placementv1alpha1.DefaultClusterSet, member2)
		g.Expect(p.Status.AccessProviders).To(ContainElement(And(HaveField("Name", placementv1alpha1.TunnelProvider), HaveField("Cluster.Server", want))))
	}, 3*time.Second).Should(Succeed())

	// What the agent says of itself still goes through.
	g.Eventually(func(g Gomega) {
		p := getProfile(g, placementv1alpha1.DefaultClusterSet, member2)
		p.Status.Properties = append(p.Status.Properties, cpv1alpha1.Property{Name: "agent-says.example.com", Value: "1", LastObservedTime: metav1.Now()})
		g.Expect(agentClient.Status().Update(ctx, p)).To(Succeed())
	}).Should(Succeed())
}
