package integration

import (
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/rolloutctl"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// Every sample in config/samples applies, and the sample application lands on both
// members, as `make quickstart` shows.
func TestSamples(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	objs, err := testenv.ApplyDir(ctx, hubCP.Client, filepath.Join("..", "..", "config", "samples"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objs).NotTo(BeEmpty())

	key := client.ObjectKey{Namespace: "demo", Name: "web"}
	g.Eventually(func(g Gomega) {
		p := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, key, p)).To(Succeed())
		c := meta.FindStatusCondition(p.Status.Conditions, placementv1alpha1.AppliedCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
		g.Expect(p.Status.AppliedClusters).To(HaveValue(BeEquivalentTo(2)))
		for _, cluster := range []string{member1, member2} {
			mc := members[cluster].Client
			g.Expect(mc.Get(ctx, client.ObjectKey{Namespace: "demo", Name: "web"}, &appsv1.Deployment{})).To(Succeed())
			g.Expect(mc.Get(ctx, client.ObjectKey{Namespace: "demo", Name: "web-config"}, &corev1.ConfigMap{})).To(Succeed())
			svc := &corev1.Service{}
			g.Expect(mc.Get(ctx, client.ObjectKey{Namespace: "demo", Name: "web"}, svc)).To(Succeed())
			g.Expect(svc.Spec.ClusterIP).NotTo(BeEmpty(), "each member allocates its own cluster IP")
		}
		// The sample's overrides: staging runs one replica, each ConfigMap names its region.
		for cluster, want := range map[string]struct {
			replicas int32
			region   string
		}{member1: {2, "eu-west"}, member2: {1, "us-east"}} {
			d := &appsv1.Deployment{}
			g.Expect(members[cluster].Client.Get(ctx, client.ObjectKey{Namespace: "demo", Name: "web"}, d)).To(Succeed())
			g.Expect(*d.Spec.Replicas).To(Equal(want.replicas), cluster)
			cm := &corev1.ConfigMap{}
			g.Expect(members[cluster].Client.Get(ctx, client.ObjectKey{Namespace: "demo", Name: "web-config"}, cm)).To(Succeed())
			g.Expect(cm.Data).To(HaveKeyWithValue("region", want.region), cluster)
		}
	}).Should(Succeed())

	// The sample's status summaries and reflection: member-1 runs the pods,
	// member-2's Deployment status is written here (it runs no controllers).
	setDeploymentStatus(t, "demo", "web", 1)
	g.Eventually(func(g Gomega) {
		p := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, key, p)).To(Succeed())
		g.Expect(p.Status.Summaries).To(ConsistOf(
			And(HaveField("Name", "ready-replicas"), HaveField("Value", "3"), HaveField("Count", HaveValue(BeEquivalentTo(2)))),
			And(HaveField("Name", "clusters-per-image"), HaveField("Groups", ConsistOf(HaveField("Count", BeEquivalentTo(2))))),
		))
		d := &appsv1.Deployment{}
		g.Expect(hubCP.Client.Get(ctx, key, d)).To(Succeed())
		g.Expect(d.Status.ReadyReplicas).To(BeEquivalentTo(2), "both clusters run what they were given (staging's override: 1)")
		g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
	}).Should(Succeed())

	// The staged sample: a change reaches staging, and production only once approved.
	release := client.ObjectKey{Namespace: "demo", Name: "release"}
	expectRolledOut(t, release, 1, "", member1, member2)
	g.Expect(updateOnHub(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "release"}},
		func(cm *corev1.ConfigMap) { cm.Data["notes"] = "second release" })).To(Succeed())
	notes := func(g Gomega, cluster string) string {
		cm := &corev1.ConfigMap{}
		g.Expect(members[cluster].Client.Get(ctx, release, cm)).To(Succeed())
		return cm.Data["notes"]
	}
	g.Eventually(func(g Gomega) {
		_, c := progressing(g, release)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonWaitingForApproval), c.Message)
		g.Expect(notes(g, member2)).To(Equal("second release"))
		g.Expect(notes(g, member1)).To(Equal("first release"))
	}).Should(Succeed())
	_, err = rolloutctl.Approve(ctx, hubCP.Client, release, "production", nil, 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		_, c := progressing(g, release)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonRolloutComplete), c.Message)
		g.Expect(notes(g, member1)).To(Equal("second release"))
	}).Should(Succeed())

	// The member-access sample: member-1 (production, member access on) has its
	// credential in platform-tools.
	g.Eventually(func(g Gomega) {
		grant := &placementv1alpha1.MemberAccessGrant{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Name: "platform-tools"}, grant)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(grant.Status.Conditions, placementv1alpha1.ReadyCondition)).To(BeTrue(), "%v", grant.Status.Conditions)
		g.Expect(grant.Status.Credentials).To(HaveValue(BeEquivalentTo(1)))
		s := &corev1.Secret{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: "platform-tools", Name: member1}, s)).To(Succeed())
		g.Expect(s.Data).To(HaveKey("token"))
	}).Should(Succeed())

	// The hub's cluster IP is not copied to the members.
	hubSvc := &corev1.Service{}
	g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: "demo", Name: "web"}, hubSvc)).To(Succeed())
	g.Expect(hubSvc.Spec.ClusterIP).NotTo(BeEmpty())

	g.Expect(hubCP.Client.Delete(ctx, &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		for _, cluster := range []string{member1, member2} {
			err := members[cluster].Client.Get(ctx, client.ObjectKey{Namespace: "demo", Name: "web"}, &appsv1.Deployment{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		}
	}).Should(Succeed())
}
