package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	aboutv1alpha1 "sigs.k8s.io/about-api/pkg/apis/v1alpha1"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/config"
	"github.com/lodestar-dev/lodestar/controllers/agent/profile"
	"github.com/lodestar-dev/lodestar/controllers/hub/clustercleanup"
	"github.com/lodestar-dev/lodestar/controllers/hub/scheduler"
	"github.com/lodestar-dev/lodestar/internal/agentidentity"
	"github.com/lodestar-dev/lodestar/internal/fleet"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/scheme"
)

// Join registers a cluster: profile, namespace, identity and RBAC; again is
// idempotent; a name owned by another cluster or identity is refused.
func TestJoin(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	name := "joiner-" + rand.String(5)
	opts := fleet.JoinOptions{Name: name, ClusterSet: auxSet, Labels: map[string]string{"env": "edge"}, ClusterID: "uid-1", TokenTTL: time.Hour}
	cfg, err := fleet.Join(ctx, hubCP.Config, hubCP.Client, opts)
	g.Expect(err).NotTo(HaveOccurred())

	p := getProfile(g, auxSet, name)
	g.Expect(p.Spec.ClusterManager.Name).To(Equal(placementv1alpha1.ClusterManagerName))
	g.Expect(p.Labels).To(HaveKeyWithValue(cpv1alpha1.LabelClusterManagerKey, placementv1alpha1.ClusterManagerName))
	g.Expect(p.Labels).To(HaveKeyWithValue("env", "edge"))
	g.Expect(p.Annotations).To(HaveKeyWithValue(placementv1alpha1.AgentIdentityAnnotation, agentidentity.User(name)))
	ns := names.ClusterNamespace(name)
	g.Expect(p.Labels).To(HaveKeyWithValue(placementv1alpha1.WorkNamespaceLabel, ns), "consumers find the Work namespace on the profile")
	g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})).To(Succeed())
	g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: agentidentity.ServiceAccount}, &corev1.ServiceAccount{})).To(Succeed())
	role := &rbacv1.Role{}
	g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: auxSet, Name: agentidentity.ProfileRoleName(name)}, role)).To(Succeed())
	for _, r := range role.Rules {
		g.Expect(r.ResourceNames).To(Equal([]string{name}), "the profile rules name this cluster's profile only")
	}

	// The returned connection is the agent's own identity.
	agentClient, err := client.New(cfg, client.Options{Scheme: scheme.Agent()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(agentClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: placementv1alpha1.AgentLeaseName}, &coordinationv1.Lease{})).To(Satisfy(apierrors.IsNotFound), "no agent has renewed it yet")

	// Joining again changes nothing and works; labels are merged in.
	rv := p.ResourceVersion
	_, err = fleet.Join(ctx, hubCP.Config, hubCP.Client, opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(getProfile(g, auxSet, name).ResourceVersion).To(Equal(rv), "an identical join writes nothing")

	// Refused: the same name from another member, in another set, or a profile
	// managed by someone else.
	other := opts
	other.ClusterID = "uid-2"
	_, err = fleet.Join(ctx, hubCP.Config, hubCP.Client, other)
	g.Expect(fleet.IsConflict(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("another cluster already uses this name"))
	other = opts
	other.ClusterSet = placementv1alpha1.DefaultClusterSet
	_, err = fleet.Join(ctx, hubCP.Config, hubCP.Client, other)
	g.Expect(fleet.IsConflict(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("already registered in cluster set " + `"` + auxSet))

	// A profile Lodestar manages that was written without join (by a GitOps tool,
	// say) gets the label from the hub.
	bare := &cpv1alpha1.ClusterProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "bare-" + rand.String(5), Namespace: auxSet},
		Spec:       cpv1alpha1.ClusterProfileSpec{ClusterManager: cpv1alpha1.ClusterManager{Name: placementv1alpha1.ClusterManagerName}},
	}
	g.Expect(hubCP.Client.Create(ctx, bare)).To(Succeed())
	t.Cleanup(func() { _ = hubCP.Client.Delete(context.Background(), bare) })
	g.Eventually(func(g Gomega) {
		g.Expect(getProfile(g, auxSet, bare.Name).Labels).To(HaveKeyWithValue(placementv1alpha1.WorkNamespaceLabel, names.ClusterNamespace(bare.Name)))
	}).Should(Succeed())

	foreign := &cpv1alpha1.ClusterProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "foreign-" + rand.String(5), Namespace: auxSet},
		Spec:       cpv1alpha1.ClusterProfileSpec{ClusterManager: cpv1alpha1.ClusterManager{Name: "someone-else"}},
	}
	g.Expect(hubCP.Client.Create(ctx, foreign)).To(Succeed())
	_, err = fleet.Join(ctx, hubCP.Config, hubCP.Client, fleet.JoinOptions{Name: foreign.Name, ClusterSet: auxSet})
	g.Expect(fleet.IsConflict(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring(`managed by "someone-else"`))

	_, err = fleet.Join(ctx, hubCP.Config, hubCP.Client, fleet.JoinOptions{Name: "Not_A_Name"})
	g.Expect(err).To(MatchError(ContainSubstring("cluster name")))
}

// The agent renews its own hub token before it expires, keeps it in its token
// file, and keeps working with it.
func TestAgentRenewsItsToken(t *testing.T) {
	g := NewWithT(t)
	name, cfg := joinAux(t, "renewer", 10*time.Minute)
	tokenFile := filepath.Join(t.TempDir(), "hub-token")
	// Renew after 1% of the token's 10 minutes: about every 6 s.
	opts := auxAgent(name, cfg, member2)
	opts.TokenFile, opts.TokenTTL, opts.TokenRenewAt = tokenFile, 10*time.Minute, 0.01
	startAgent(t, opts)

	var first string
	g.Eventually(func(g Gomega) {
		b, err := os.ReadFile(tokenFile)
		g.Expect(err).NotTo(HaveOccurred())
		first = strings.TrimSpace(string(b))
		g.Expect(first).NotTo(BeEmpty())
		g.Expect(first).NotTo(Equal(cfg.BearerToken))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Eventually(func(g Gomega) {
		b, err := os.ReadFile(tokenFile)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(strings.TrimSpace(string(b))).NotTo(Equal(first), "renewed again, with the renewed token")
	}).WithTimeout(30 * time.Second).Should(Succeed())

	// The agent still reaches the hub: its Lease keeps being renewed.
	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: names.ClusterNamespace(name), Name: placementv1alpha1.AgentLeaseName}
	g.Expect(hubCP.Client.Get(t.Context(), key, lease)).To(Succeed())
	before := lease.Spec.RenewTime.Time
	g.Eventually(func(g Gomega) {
		g.Expect(hubCP.Client.Get(t.Context(), key, lease)).To(Succeed())
		g.Expect(lease.Spec.RenewTime.Time.After(before)).To(BeTrue())
	}).Should(Succeed())

	// The kept token is readable by the agent only.
	stat, err := os.Stat(tokenFile)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stat.Mode().Perm()).To(Equal(os.FileMode(0o600)))
}

// The agent's Lease makes the cluster AgentReachable and carries the member's
// readiness into ControlPlaneHealthy; a stopped agent's cluster becomes
// unreachable after the lease and grace period, and reachable again when it returns.
func TestHeartbeatAndHealth(t *testing.T) {
	g := NewWithT(t)

	// The fleet's own agents.
	for _, m := range []string{member1, member2} {
		g.Eventually(func(g Gomega) {
			p := getProfile(g, placementv1alpha1.DefaultClusterSet, m)
			g.Expect(meta.IsStatusConditionTrue(p.Status.Conditions, placementv1alpha1.AgentReachableCondition)).To(BeTrue())
			g.Expect(meta.IsStatusConditionTrue(p.Status.Conditions, placementv1alpha1.ControlPlaneHealthyCondition)).To(BeTrue())
		}).Should(Succeed())
	}

	name, cfg := joinAux(t, "flaky", time.Hour)
	condition := func(g Gomega, t string) *metav1.Condition {
		c := meta.FindStatusCondition(getProfile(g, auxSet, name).Status.Conditions, t)
		g.Expect(c).NotTo(BeNil())
		return c
	}
	g.Eventually(func(g Gomega) {
		g.Expect(condition(g, placementv1alpha1.AgentReachableCondition).Reason).To(Equal(placementv1alpha1.ReasonAgentNotSeen))
	}).Should(Succeed())

	opts := auxAgent(name, cfg, member2)
	stop := startAgent(t, opts)
	g.Eventually(func(g Gomega) {
		g.Expect(condition(g, placementv1alpha1.AgentReachableCondition).Status).To(Equal(metav1.ConditionTrue))
		c := condition(g, placementv1alpha1.ControlPlaneHealthyCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonMemberReady))
	}).Should(Succeed())

	stop()
	g.Eventually(func(g Gomega) {
		c := condition(g, placementv1alpha1.AgentReachableCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonLeaseExpired))
		g.Expect(condition(g, placementv1alpha1.ControlPlaneHealthyCondition).Status).To(Equal(metav1.ConditionUnknown))
	}).Should(Succeed())

	startAgent(t, opts)
	g.Eventually(func(g Gomega) {
		g.Expect(condition(g, placementv1alpha1.AgentReachableCondition).Status).To(Equal(metav1.ConditionTrue))
	}).Should(Succeed())
}

// The agent mirrors the member's ClusterProperties, its version and capacity into
// the ClusterProfile's status.
func TestPropertiesMirrored(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	member := members[fullMember].Client
	ks := &corev1.Namespace{}
	g.Expect(member.Get(ctx, client.ObjectKey{Name: "kube-system"}, ks)).To(Succeed())

	props := func(g Gomega) map[string]string {
		out := map[string]string{}
		for _, p := range getProfile(g, placementv1alpha1.DefaultClusterSet, fullMember).Status.Properties {
			g.Expect(p.LastObservedTime.IsZero()).To(BeFalse(), "property %s has a lastObservedTime", p.Name)
			out[p.Name] = p.Value
		}
		return out
	}
	g.Eventually(func(g Gomega) {
		p := props(g)
		g.Expect(p).To(HaveKeyWithValue(profile.PropertyClusterID, string(ks.UID)), "the KEP-2149 name")
		g.Expect(p).To(HaveKeyWithValue(profile.PropertyClusterIDLegacy, string(ks.UID)), "the first KEP-2149 name, kept")
		g.Expect(p).To(HaveKeyWithValue(profile.PropertyClusterSet, placementv1alpha1.DefaultClusterSet))
		g.Expect(p).To(HaveKeyWithValue(placementv1alpha1.PropertyNodeCount, "1"), "the kwok node")
		for _, k := range []string{placementv1alpha1.PropertyCPUAllocatable, placementv1alpha1.PropertyCPUFree, placementv1alpha1.PropertyMemoryAllocatable, placementv1alpha1.PropertyMemoryFree} {
			g.Expect(p).To(HaveKey(k))
		}
		g.Expect(getProfile(g, placementv1alpha1.DefaultClusterSet, fullMember).Status.Version.Kubernetes).To(HavePrefix("v1."))
	}).Should(Succeed())

	// A ClusterProperty the member's admin writes appears as it is, and follows changes.
	cp := &aboutv1alpha1.ClusterProperty{ObjectMeta: metav1.ObjectMeta{Name: "zone.example.com"}, Spec: aboutv1alpha1.ClusterPropertySpec{Value: "eu-west-1a"}}
	g.Expect(member.Create(ctx, cp)).To(Succeed())
	t.Cleanup(func() { _ = member.Delete(context.Background(), cp) })
	g.Eventually(func(g Gomega) { g.Expect(props(g)).To(HaveKeyWithValue("zone.example.com", "eu-west-1a")) }).WithTimeout(20 * time.Second).Should(Succeed())
	cp.Spec.Value = "eu-west-1b"
	g.Expect(member.Update(ctx, cp)).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(props(g)).To(HaveKeyWithValue("zone.example.com", "eu-west-1b")) }).WithTimeout(20 * time.Second).Should(Succeed())

	// Both ID properties exist on the member itself, with the same value.
	for _, name := range []string{profile.PropertyClusterID, profile.PropertyClusterIDLegacy} {
		id := &aboutv1alpha1.ClusterProperty{}
		g.Expect(member.Get(ctx, client.ObjectKey{Name: name}, id)).To(Succeed())
		g.Expect(id.Spec.Value).To(Equal(string(ks.UID)), name)
	}
}

// Cordon keeps new Placements off a cluster; uncordon lets them back.
func TestCordon(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	g.Expect(fleet.Cordon(ctx, hubCP.Client, "", member2)).To(Succeed())
	t.Cleanup(func() { _ = fleet.Uncordon(context.Background(), hubCP.Client, "", member2) })
	g.Expect(fleet.Cordon(ctx, hubCP.Client, "", member2)).To(Succeed(), "cordoning twice is fine")

	_, _, p := configMapPlacement(t)
	p.Spec.Scheduling.ClusterSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"production", "staging"}},
	}}
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)
	g.Eventually(func(g Gomega) {
		got := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, key, got)).To(Succeed())
		g.Expect(got.Status.SelectedClusters).To(HaveValue(BeEquivalentTo(1)))
		g.Expect(got.Status.Scheduling).NotTo(BeNil())
		g.Expect(got.Status.Scheduling.Excluded).To(ContainElement(HaveField("Clusters", ContainElement(member2))))
	}).Should(Succeed())

	g.Expect(fleet.Uncordon(ctx, hubCP.Client, "", member2)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, key, got)).To(Succeed())
		g.Expect(got.Status.SelectedClusters).To(HaveValue(BeEquivalentTo(2)))
	}).Should(Succeed())
}

// Unjoin deletes what was placed on the member, then the hub side; with --orphan
// the member keeps its objects, released.
func TestUnjoin(t *testing.T) {
	for _, orphan := range []bool{false, true} {
		t.Run(fmt.Sprintf("orphan=%v", orphan), func(t *testing.T) {
			g := NewWithT(t)
			ctx := t.Context()
			name, cfg := joinAux(t, "leaver", time.Hour)
			startAgent(t, auxAgent(name, cfg, member2))
			ns, cm := placeOnAux(t, name)
			g.Expect(cm.OwnerReferences).To(HaveLen(1), "owned by the AppliedWork")

			var progress []string
			g.Expect(fleet.Unjoin(ctx, hubCP.Client, name, fleet.UnjoinOptions{ClusterSet: auxSet, Orphan: orphan, Wait: time.Minute,
				Progress: func(s string) { progress = append(progress, s) }})).To(Succeed())
			g.Expect(progress).NotTo(BeEmpty())

			err := hubCP.Client.Get(ctx, client.ObjectKey{Namespace: auxSet, Name: name}, &cpv1alpha1.ClusterProfile{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the ClusterProfile is gone")
			hubNS := &corev1.Namespace{}
			err = hubCP.Client.Get(ctx, client.ObjectKey{Name: names.ClusterNamespace(name)}, hubNS)
			g.Expect(apierrors.IsNotFound(err) || !hubNS.DeletionTimestamp.IsZero()).To(BeTrue(), "the cluster namespace is being deleted")
			err = hubCP.Client.Get(ctx, client.ObjectKey{Namespace: auxSet, Name: agentidentity.ProfileRoleName(name)}, &rbacv1.Role{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the agent's Role in the cluster set is gone")

			got := &corev1.ConfigMap{}
			err = members[member2].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "left-behind"}, got)
			if orphan {
				g.Expect(err).NotTo(HaveOccurred(), "orphaned: the member keeps it")
				g.Expect(got.UID).To(Equal(cm.UID))
				g.Expect(got.OwnerReferences).To(BeEmpty(), "released by the AppliedWork")
			} else {
				g.Expect(apierrors.IsNotFound(err) || !got.DeletionTimestamp.IsZero()).To(BeTrue(), "deleted from the member, got %v", err)
			}
		})
	}
}

// A deleted ClusterProfile whose agent is down gets its hub side cleaned after the
// grace period; the member keeps its objects.
func TestDeletedClusterWithAgentDownIsCleanedAfterGracePeriod(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	name, cfg := joinAux(t, "ghost", time.Hour)
	stop := startAgent(t, auxAgent(name, cfg, member2))
	ns, cm := placeOnAux(t, name)
	stop()

	g.Expect(hubCP.Client.Delete(ctx, &cpv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Namespace: auxSet, Name: name}})).To(Succeed())
	deleted := getProfile(g, auxSet, name).DeletionTimestamp
	g.Expect(deleted).NotTo(BeNil(), "held by the cleanup finalizer")
	g.Eventually(func(g Gomega) {
		err := hubCP.Client.Get(ctx, client.ObjectKey{Namespace: auxSet, Name: name}, &cpv1alpha1.ClusterProfile{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
	}).Should(Succeed())
	// While the agent might still come back, the Work waited for it: the hub gave
	// up no earlier than the grace period (3 s here) after the deletion.
	g.Eventually(func(g Gomega) {
		events := &eventsv1.EventList{}
		g.Expect(hubCP.Client.List(ctx, events, client.InNamespace(auxSet))).To(Succeed())
		var gaveUp *eventsv1.Event
		for i := range events.Items {
			if e := &events.Items[i]; e.Regarding.Name == name && e.Reason == clustercleanup.EventMemberCleanupAbandoned {
				gaveUp = e
			}
		}
		g.Expect(gaveUp).NotTo(BeNil())
		g.Expect(gaveUp.EventTime.Time).To(BeTemporally(">=", deleted.Add(3*time.Second)))
	}).Should(Succeed())
	err := hubCP.Client.Get(ctx, client.ObjectKey{Namespace: names.ClusterNamespace(name), Name: "leaving"}, &workv1alpha1.Work{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Work was given up on, got %v", err)

	got := &corev1.ConfigMap{}
	g.Expect(members[member2].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "left-behind"}, got)).To(Succeed())
	g.Expect(got.UID).To(Equal(cm.UID), "the member keeps its objects")
}

// A cluster name is unique across the cluster sets the hub manages, enforced by
// the hub's (optional) admission policy: a ClusterProfile named like a cluster of
// the default set is refused in any other namespace.
func TestClusterNamesAreUniqueAcrossSets(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	policies, err := config.ClusterNamesPolicy()
	g.Expect(err).NotTo(HaveOccurred())
	for _, p := range policies {
		g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
		t.Cleanup(func() { _ = hubCP.Client.Delete(context.Background(), p) })
	}
	// In a namespace the hub does not manage, so that a twin admitted before the
	// policy takes effect is never acted on.
	foreign := newNamespace(t)
	g.Eventually(func(g Gomega) {
		twin := &cpv1alpha1.ClusterProfile{
			ObjectMeta: metav1.ObjectMeta{Name: member1, Namespace: foreign},
			Spec:       cpv1alpha1.ClusterProfileSpec{ClusterManager: cpv1alpha1.ClusterManager{Name: scheduler.ClusterManagerName}},
		}
		err := hubCP.Client.Create(ctx, twin)
		if err == nil {
			_ = hubCP.Client.Delete(ctx, twin)
		}
		g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("cluster name " + member1 + " is already used in cluster set " + scheduler.DefaultClusterSetNamespace))
	}).Should(Succeed())
	// A name of its own is admitted.
	g.Expect(hubCP.Client.Create(ctx, &cpv1alpha1.ClusterProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "unique-" + rand.String(5), Namespace: foreign},
		Spec:       cpv1alpha1.ClusterProfileSpec{ClusterManager: cpv1alpha1.ClusterManager{Name: scheduler.ClusterManagerName}},
	})).To(Succeed())
}

// Cleanup trusts only the cluster sets the hub manages: a ClusterProfile named
// like a cluster of another set (the name policy is optional), created and deleted
// in a namespace that is not a managed set, is never marked, and its deletion
// removes nothing of that cluster's.
func TestForeignClusterProfileDeletesNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	victim, _ := joinAux(t, "victim", 0)
	foreign := newNamespace(t)
	impostor := &cpv1alpha1.ClusterProfile{
		ObjectMeta: metav1.ObjectMeta{Name: victim, Namespace: foreign},
		Spec:       cpv1alpha1.ClusterProfileSpec{ClusterManager: cpv1alpha1.ClusterManager{Name: scheduler.ClusterManagerName}},
	}
	g.Expect(hubCP.Client.Create(ctx, impostor)).To(Succeed())
	g.Consistently(func(g Gomega) {
		got := &cpv1alpha1.ClusterProfile{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(impostor), got)).To(Succeed())
		g.Expect(got.Finalizers).To(BeEmpty())
		g.Expect(got.Status.Conditions).To(BeEmpty(), "no health is judged")
	}).Should(Succeed())
	g.Expect(hubCP.Client.Delete(ctx, impostor)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(impostor), &cpv1alpha1.ClusterProfile{}))
	}).Should(BeTrue())
	g.Consistently(func(g Gomega) {
		ns := &corev1.Namespace{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Name: names.ClusterNamespace(victim)}, ns)).To(Succeed())
		g.Expect(ns.DeletionTimestamp.IsZero()).To(BeTrue(), "the cluster's namespace stays")
		profile := getProfile(g, auxSet, victim)
		g.Expect(profile.DeletionTimestamp.IsZero()).To(BeTrue())
	}).Should(Succeed())
}
