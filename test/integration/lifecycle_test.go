package integration

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/agentidentity"
	"github.com/lodestar-dev/lodestar/internal/fleet"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// A cluster joined without its agent running is not chosen by a Placement that
// selects every cluster of its set: the Placement keeps the clusters it has and
// says why the new one is not chosen (HealthNotReported). Unjoining it finishes
// without waiting for the agent that never came.
func TestJoinedClusterWithoutAgentIsNotChosen(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	set, tenant := sliceFleet(t, 2)
	p := &placementv1alpha1.Placement{
		ObjectMeta: metav1.ObjectMeta{Name: "broad", Namespace: tenant},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{{Version: "v1", Kind: "ConfigMap", Name: "none"}},
			Scheduling:        placementv1alpha1.Scheduling{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"slice": "yes"}}},
		},
	}
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)
	g.Eventually(func(g Gomega) {
		got := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, key, got)).To(Succeed())
		g.Expect(got.Status.SelectedClusters).To(HaveValue(BeEquivalentTo(2)))
	}).Should(Succeed())

	name := set + "-new-" + rand.String(4)
	_, err := fleet.Join(ctx, hubCP.Config, hubCP.Client, fleet.JoinOptions{Name: name, ClusterSet: set, Labels: map[string]string{"slice": "yes"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		profile := getProfile(g, set, name)
		c := meta.FindStatusCondition(profile.Status.Conditions, placementv1alpha1.AgentReachableCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonAgentNotSeen))
		got := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, key, got)).To(Succeed())
		g.Expect(got.Status.Scheduling).NotTo(BeNil())
		g.Expect(got.Status.Scheduling.Excluded).To(ContainElement(And(
			HaveField("Reason", placementv1alpha1.ExclusionHealthNotReported), HaveField("Clusters", ContainElement(name)))))
		// The status explains it filter by filter, for tenants' `why`.
		g.Expect(got.Status.Scheduling.Clusters).To(ContainElement(And(
			HaveField("Name", name), HaveField("Reason", placementv1alpha1.ExclusionHealthNotReported),
			HaveField("Verdicts", ContainElement(And(HaveField("Filter", "health"), HaveField("Detail", ContainSubstring("health not reported yet"))))))))
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		got := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, key, got)).To(Succeed())
		g.Expect(got.Status.SelectedClusters).To(HaveValue(BeEquivalentTo(2)), "the cluster without agent is not chosen")
	}).Should(Succeed())

	g.Expect(fleet.Unjoin(ctx, hubCP.Client, name, fleet.UnjoinOptions{ClusterSet: set, Wait: time.Minute})).To(Succeed())
	err = hubCP.Client.Get(ctx, client.ObjectKey{Namespace: set, Name: name}, &cpv1alpha1.ClusterProfile{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
}

// A join that fails after it started (here: the hub refuses the token request)
// leaves no half-registered cluster; a member already joined cannot join again
// under another name.
func TestFailedJoinLeavesNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	name := "halfway-" + rand.String(4)
	unreachable := rest.CopyConfig(hubCP.Config)
	unreachable.Host = "https://127.0.0.1:1"
	_, err := fleet.Join(ctx, unreachable, hubCP.Client, fleet.JoinOptions{Name: name, ClusterSet: auxSet})
	g.Expect(err).To(MatchError(ContainSubstring("requesting a token")))
	// The ClusterProfile goes once the hub's cleanup has released it (its
	// finalizer may be on it already).
	g.Eventually(func() bool {
		err := hubCP.Client.Get(ctx, client.ObjectKey{Namespace: auxSet, Name: name}, &cpv1alpha1.ClusterProfile{})
		return apierrors.IsNotFound(err)
	}).Should(BeTrue(), "no ClusterProfile is left")
	err = hubCP.Client.Get(ctx, client.ObjectKey{Namespace: auxSet, Name: agentidentity.ProfileRoleName(name)}, &rbacv1.Role{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no Role is left: %v", err)
	ns := &corev1.Namespace{}
	if err := hubCP.Client.Get(ctx, client.ObjectKey{Name: names.ClusterNamespace(name)}, ns); err == nil {
		g.Expect(ns.DeletionTimestamp).NotTo(BeNil(), "the cluster's namespace is being deleted")
	} else {
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
	}

	id := rand.String(12)
	first := "twin-a-" + rand.String(4)
	_, err = fleet.Join(ctx, hubCP.Config, hubCP.Client, fleet.JoinOptions{Name: first, ClusterSet: auxSet, ClusterID: id})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = fleet.Unjoin(ctx, hubCP.Client, first, fleet.UnjoinOptions{ClusterSet: auxSet}) })
	_, err = fleet.Join(ctx, hubCP.Config, hubCP.Client, fleet.JoinOptions{Name: "twin-b-" + rand.String(4), ClusterSet: auxSet, ClusterID: id})
	g.Expect(fleet.IsConflict(err)).To(BeTrue(), "%v", err)
	g.Expect(err).To(MatchError(ContainSubstring("the member with cluster ID " + id + " is already joined as \"" + first + "\"")))
}

// A member joined without its agent leaves a Ready Placement that selects it by
// labels Ready: it is not chosen until its agent connects.
func TestJoinWithoutAgentLeavesPlacementsReady(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	_, _, p := configMapPlacement(t) // env=production: member-1
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)
	available := func(g Gomega) {
		c := placementCondition(g, t, key, placementv1alpha1.AvailableCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
		got := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, key, got)).To(Succeed())
		g.Expect(got.Status.SelectedClusters).To(HaveValue(BeEquivalentTo(1)))
	}
	g.Eventually(available).Should(Succeed())

	name := "noagent-" + rand.String(4)
	_, err := fleet.Join(ctx, hubCP.Config, hubCP.Client, fleet.JoinOptions{Name: name, Labels: map[string]string{"env": "production"}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		_ = fleet.Unjoin(context.Background(), hubCP.Client, name, fleet.UnjoinOptions{Wait: time.Minute})
	})
	g.Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(getProfile(g, placementv1alpha1.DefaultClusterSet, name).Status.Conditions, placementv1alpha1.AgentReachableCondition)
		g.Expect(c).NotTo(BeNil())
	}).Should(Succeed())
	g.Consistently(available).Should(Succeed())
}
