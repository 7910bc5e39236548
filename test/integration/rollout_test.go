package integration

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/clusterworks"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/rolloutctl"
)

// A Rolling update over four members never has more than maxUnavailable of them
// not Available, sampled all along; paused, it gives no cluster the new revision.
func TestRollingUpdateKeepsMaxUnavailable(t *testing.T) {
	extraMembers(t)
	g := NewWithT(t)
	ns := rolloutNamespace(t)
	clusters := []string{member1, member2, member3, member4}
	p := greetingPlacement(ns, clusters, placementv1alpha1.RolloutStrategy{Type: placementv1alpha1.RolloutRolling,
		Rolling: &placementv1alpha1.RollingStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(1)), MinAvailableSeconds: 1}})
	g.Expect(hubCP.Client.Create(t.Context(), p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)
	expectRolledOut(t, key, 1, "v1", clusters...)

	// Sample every Work until the rollout is done.
	var maxUnavailable, maxMixed atomic.Int32
	stop := sample(20*time.Millisecond, func() {
		unavailable, revisions := int32(0), map[string]int32{}
		for _, cl := range clusters {
			w := &workv1alpha1.Work{}
			if err := hubCP.Client.Get(context.Background(), client.ObjectKey{Namespace: names.ClusterNamespace(cl), Name: names.Work(ns, "web")}, w); err != nil {
				unavailable++ // gone counts as not Available
				continue
			}
			if clusterworks.WorkAvailability(w) != metav1.ConditionTrue {
				unavailable++
			}
			revisions[w.Annotations[placementv1alpha1.RevisionAnnotation]]++
		}
		if unavailable > maxUnavailable.Load() {
			maxUnavailable.Store(unavailable)
		}
		if len(revisions) > 1 {
			maxMixed.Store(1)
		}
	})
	setGreeting(t, ns, "v2")
	expectRolledOut(t, key, 2, "v2", clusters...)
	stop()
	g.Expect(maxUnavailable.Load()).To(BeNumerically("<=", 1), "at most maxUnavailable (1) cluster not Available")
	g.Expect(maxMixed.Load()).To(BeNumerically("==", 1), "clusters were updated one after the other, not at once")

	// Paused: no cluster is given the next revision.
	g.Expect(rolloutctl.SetPaused(t.Context(), hubCP.Typed(), key, true)).To(Succeed())
	setGreeting(t, ns, "v3")
	g.Eventually(func(g Gomega) {
		got, c := progressing(g, key)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonRolloutPaused))
		g.Expect(got.Status.Rollout.TargetRevisionNumber).To(BeEquivalentTo(3))
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		for _, cl := range clusters {
			g.Expect(greetingOn(g, cl, ns)).To(Equal("v2"))
		}
	}).Should(Succeed())
	g.Expect(rolloutctl.SetPaused(t.Context(), hubCP.Typed(), key, false)).To(Succeed())
	expectRolledOut(t, key, 3, "v3", clusters...)

	revs, err := rolloutctl.History(t.Context(), hubCP.Typed(), key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(revs).To(HaveLen(3))
	g.Expect(revs[0].Spec.ChangeCause).To(Equal("first revision: 1 object"))
	g.Expect(revs[1].Spec.ChangeCause).To(Equal("changed ConfigMap/web-config"))
	g.Expect(revs[2].Name).To(Equal(names.Revision("web", revs[2].Spec.Hash)))
	g.Expect(revs[2].OwnerReferences).To(ContainElement(HaveField("Name", "web")))
}

// Rapid edits land in few revisions, and the last one wins.
func TestRapidEditsAreCoalesced(t *testing.T) {
	g := NewWithT(t)
	ns := rolloutNamespace(t)
	p := greetingPlacement(ns, []string{member2}, placementv1alpha1.RolloutStrategy{})
	p.Spec.RevisionHistoryLimit = ptr.To[int32](2)
	g.Expect(hubCP.Client.Create(t.Context(), p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)
	expectRolledOut(t, key, 1, "v1", member2)
	for i := range 5 {
		setGreeting(t, ns, fmt.Sprintf("edit-%d", i))
	}
	g.Eventually(func(g Gomega) {
		_, c := progressing(g, key)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonRolloutComplete))
		g.Expect(greetingOn(g, member2, ns)).To(Equal("edit-4"))
	}).Should(Succeed())
	got, _ := progressing(g, key)
	g.Expect(got.Status.Rollout.TargetRevisionNumber).To(BeNumerically("<=", 3), "five edits in a burst make at most two revisions")
	g.Eventually(func(g Gomega) {
		revs, err := rolloutctl.History(t.Context(), hubCP.Typed(), key)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(revs).To(HaveLen(2), "revisionHistoryLimit 2")
	}).Should(Succeed())
}

// A Staged rollout stops before a stage that needs approval; an approval of
// another revision does nothing; a RolloutApproval of the target starts it.
func TestStagedRolloutWaitsForApproval(t *testing.T) {
	g := NewWithT(t)
	ns := rolloutNamespace(t)
	p := greetingPlacement(ns, []string{member1, member2}, placementv1alpha1.RolloutStrategy{
		Type: placementv1alpha1.RolloutStaged,
		Stages: []placementv1alpha1.RolloutStage{
			{Name: "staging", ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"env": "staging"}}},
			{Name: "production", ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"env": "production"}}, Approval: placementv1alpha1.ApprovalRequired},
		},
	})
	g.Expect(hubCP.Client.Create(t.Context(), p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)
	expectRolledOut(t, key, 1, "v1", member1, member2)

	setGreeting(t, ns, "v2")
	g.Eventually(func(g Gomega) {
		got, c := progressing(g, key)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonWaitingForApproval), c.Message)
		g.Expect(got.Status.Rollout.CurrentStage).To(Equal("production"))
		g.Expect(got.Status.Rollout.Clusters).To(ContainElement(And(HaveField("Name", member1), HaveField("Stage", "production"),
			HaveField("State", placementv1alpha1.ClusterPending))))
		g.Expect(greetingOn(g, member2, ns)).To(Equal("v2"))
	}).Should(Succeed())

	revs, err := rolloutctl.History(t.Context(), hubCP.Typed(), key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(revs).To(HaveLen(2))
	old := &placementv1alpha1.RolloutApproval{ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: ns},
		Spec: placementv1alpha1.RolloutApprovalSpec{Placement: "web", Revision: revs[0].Name, Stage: "production"}}
	g.Expect(hubCP.Client.Create(t.Context(), old)).To(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(greetingOn(g, member1, ns)).To(Equal("v1"), "production waits for an approval of revision 2")
	}).Should(Succeed())

	a, err := rolloutctl.Approve(t.Context(), hubCP.Client, key, "production", nil, 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.Spec.Revision).To(Equal(revs[1].Name))
	expectRolledOut(t, key, 2, "v2", member1, member2)
}

// A cluster that fails stops the rollout by itself (maxFailures 0): the next
// cluster keeps the stable revision. Going back to the previous objects heals it.
func TestFailingClusterStopsTheRollout(t *testing.T) {
	g := NewWithT(t)
	ns := rolloutNamespace(t)
	p := greetingPlacement(ns, []string{member1, member2}, placementv1alpha1.RolloutStrategy{Type: placementv1alpha1.RolloutRolling,
		Rolling: &placementv1alpha1.RollingStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(1))}})
	p.Spec.ResourceSelectors = append(p.Spec.ResourceSelectors, placementv1alpha1.ResourceSelector{Version: "v1", Kind: "ConfigMap", Name: "conflict"})
	g.Expect(hubCP.Client.Create(t.Context(), p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)
	expectRolledOut(t, key, 1, "v1", member1, member2)

	// Both members already have a ConfigMap "conflict" that Lodestar did not
	// place; the new revision places one, which the agents refuse to take over.
	for _, m := range []string{member1, member2} {
		g.Expect(members[m].Client.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conflict", Namespace: ns}})).To(Succeed())
	}
	conflict := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conflict", Namespace: ns}, Data: map[string]string{"k": "v"}}
	g.Expect(hubCP.Client.Create(t.Context(), conflict)).To(Succeed())

	var failed string
	g.Eventually(func(g Gomega) {
		got, c := progressing(g, key)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonFailureBudgetExceeded), c.Message)
		g.Expect(got.Status.Rollout.FailedClusters).To(HaveValue(BeEquivalentTo(1)))
		i := slices.IndexFunc(got.Status.Rollout.Clusters, func(c placementv1alpha1.ClusterRollout) bool { return c.State == placementv1alpha1.ClusterFailed })
		g.Expect(i).To(BeNumerically(">=", 0))
		failed = got.Status.Rollout.Clusters[i].Name
		g.Expect(c.Message).To(ContainSubstring(failed))
	}).Should(Succeed())
	other := member1
	if failed == member1 {
		other = member2
	}
	g.Consistently(func(g Gomega) {
		w := workOf(g, p, other)
		g.Expect(w.Spec.Workload.Manifests).To(HaveLen(1), "the other cluster keeps revision 1")
	}).Should(Succeed())

	// The fix: the hub goes back to revision 1's objects, which is revision 1
	// again; the failed cluster is given it without waiting for a budget.
	g.Expect(hubCP.Client.Delete(t.Context(), conflict)).To(Succeed())
	expectRolledOut(t, key, 1, "v1", member1, member2)
}

// Undo writes an earlier revision's objects back to the hub namespace and rolls
// them out.
func TestUndoRestoresThePreviousObjects(t *testing.T) {
	g := NewWithT(t)
	ns := rolloutNamespace(t)
	p := greetingPlacement(ns, []string{member1, member2}, placementv1alpha1.RolloutStrategy{})
	g.Expect(hubCP.Client.Create(t.Context(), p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)
	expectRolledOut(t, key, 1, "v1", member1, member2)
	setGreeting(t, ns, "v2")
	expectRolledOut(t, key, 2, "v2", member1, member2)

	to, err := rolloutctl.Undo(t.Context(), hubCP.Client, hubCP.Typed(), key, 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(to.Spec.Revision).To(BeEquivalentTo(1))
	cm := &corev1.ConfigMap{}
	g.Expect(hubCP.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web-config"}, cm)).To(Succeed())
	g.Expect(cm.Data["greeting"]).To(Equal("v1"), "the hub stays the source of truth")
	expectRolledOut(t, key, 1, "v1", member1, member2)

	_, err = rolloutctl.Undo(t.Context(), hubCP.Client, hubCP.Typed(), key, 2)
	g.Expect(err).NotTo(HaveOccurred())
	expectRolledOut(t, key, 2, "v2", member1, member2)
	_, err = rolloutctl.Undo(t.Context(), hubCP.Client, hubCP.Typed(), key, 9)
	g.Expect(err).To(MatchError(ContainSubstring("no revision 9")))
}

// Editing the cluster selection moves a Deployment with minReadySeconds between
// two members that run workloads make-before-break: the old member's copy, while
// available, stays until the new member's is available. (A copy that is not
// available protects nothing and goes at once, by design; a member's pods may
// drop out of Ready for a moment, which restarts minReadySeconds (kwok did so
// once a minute before it renewed its node's Lease), so the test judges each
// removal by what the Works reported when it began.)
func TestSelectorEditMovesWithoutDisruption(t *testing.T) {
	extraMembers(t)
	g := NewWithT(t)
	ns := rolloutNamespace(t)
	_, deploy, _ := webObjects(ns)
	deploy.Spec.MinReadySeconds = 10
	deploy.Spec.Replicas = ptr.To[int32](1)
	g.Expect(hubCP.Client.Create(t.Context(), deploy)).To(Succeed())
	p := &placementv1alpha1.Placement{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{{Group: "apps", Version: "v1", Kind: "Deployment", Name: "web"}},
			Scheduling:        placementv1alpha1.Scheduling{ClusterNames: []string{member1}},
		},
	}
	g.Expect(hubCP.Client.Create(t.Context(), p)).To(Succeed())
	available := func(cluster string) bool {
		d := &appsv1.Deployment{}
		if err := members[cluster].Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, d); err != nil {
			return false
		}
		return d.Status.AvailableReplicas >= 1 && d.DeletionTimestamp.IsZero()
	}
	g.Eventually(func(g Gomega) {
		g.Expect(available(member1)).To(BeTrue())
		w := workOf(g, p, member1)
		g.Expect(w).NotTo(BeNil())
		g.Expect(workAvailable(w)).To(BeTrue())
	}).Should(Succeed())

	// Available as Lodestar knows it: member-3's Work says so, or member-3's
	// Deployment does (either way, seen at least once).
	reportedAvailable := func() bool {
		w := &workv1alpha1.Work{}
		err := hubCP.Client.Get(context.Background(), client.ObjectKey{Namespace: names.ClusterNamespace(member3), Name: names.Work(p.Namespace, p.Name)}, w)
		return err == nil && workAvailable(w)
	}
	// A removal begins with the Work's deletion; its status then is what the
	// work generator acted on.
	var gap, replaced, removing atomic.Bool
	stop := sample(50*time.Millisecond, func() {
		if reportedAvailable() || available(member3) {
			replaced.Store(true)
		}
		w := &workv1alpha1.Work{}
		err := hubCP.Client.Get(context.Background(), client.ObjectKey{Namespace: names.ClusterNamespace(member1), Name: names.Work(p.Namespace, p.Name)}, w)
		if err == nil && !w.DeletionTimestamp.IsZero() && !removing.Swap(true) && workAvailable(w) && !replaced.Load() {
			gap.Store(true)
		}
	})
	g.Expect(updateOnHub(p, func(p *placementv1alpha1.Placement) { p.Spec.Scheduling.ClusterNames = []string{member3} })).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(workOf(g, p, member1)).To(BeNil())
		g.Expect(available(member3)).To(BeTrue())
		_, c := progressing(g, client.ObjectKeyFromObject(p))
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonRolloutComplete), c.Message)
	}).Should(Succeed())
	stop()
	g.Expect(replaced.Load()).To(BeTrue(), "member-3's copy was never seen available")
	g.Expect(gap.Load()).To(BeFalse(), "member-1's available copy was removed before member-3's was available")
	g.Eventually(func(g Gomega) {
		err := members[member1].Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web"}, &appsv1.Deployment{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}).Should(Succeed())
}

// With spec.scheduling.failover, a chosen cluster whose agent stops is replaced once the
// toleration passes, and its copy goes only when the replacement is Available;
// with no replacement possible, nothing moves and the condition says why.
func TestFailoverWithAnAgentStopped(t *testing.T) {
	extraMembers(t)
	g := NewWithT(t)
	ns := rolloutNamespace(t)
	p := greetingPlacement(ns, []string{member4}, placementv1alpha1.RolloutStrategy{})
	p.Spec.Scheduling.NumberOfClusters = ptr.To[int32](1)
	p.Spec.Scheduling.Failover = &placementv1alpha1.Failover{TolerationSeconds: ptr.To[int32](2), GracePeriodSeconds: ptr.To[int32](600)}
	g.Expect(hubCP.Client.Create(t.Context(), p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)
	expectRolledOut(t, key, 1, "v1", member4)

	stopExtraAgent(member4)
	t.Cleanup(func() {
		if err := startExtraAgent(member4); err != nil {
			t.Errorf("restarting the agent of %s: %v", member4, err)
		}
	})
	g.Eventually(func(g Gomega) {
		c := placementCondition(g, t, key, placementv1alpha1.ScheduledCondition)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonFailoverBlocked), c.Message)
		g.Expect(c.Message).To(ContainSubstring("no other cluster can replace it"))
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(workOf(g, p, member4)).NotTo(BeNil(), "no replacement: the copy stays")
	}).Should(Succeed())

	// A replacement is possible now.
	g.Expect(updateOnHub(p, func(p *placementv1alpha1.Placement) { p.Spec.Scheduling.ClusterNames = []string{member4, member2} })).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(greetingOn(g, member2, ns)).To(Equal("v1"))
		// Deleted on the hub; its agent, stopped, removes its finalizer when back.
		w := workOf(g, p, member4)
		g.Expect(w == nil || !w.DeletionTimestamp.IsZero()).To(BeTrue(), "the unreachable cluster's Work goes once the replacement is Available")
		c := placementCondition(g, t, key, placementv1alpha1.ScheduledCondition)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonScheduled))
	}).Should(Succeed())
	events := &corev1.EventList{}
	g.Expect(hubCP.Client.List(t.Context(), events, client.InNamespace(ns))).To(Succeed())
	g.Expect(events.Items).To(ContainElement(HaveField("Reason", placementv1alpha1.ReasonFailedOver)))
}

// Make-before-break is judged object by object: a Placement of a serving
// Deployment and a claim that is Pending everywhere (its class exists nowhere)
// is never Available as a whole, yet a move from member-1 to member-3 keeps
// the Deployment on member-1 until it is Available on member-3: some member
// runs it available at every 100 ms sample.
func TestMoveKeepsServingObjects(t *testing.T) {
	extraMembers(t)
	g := NewWithT(t)
	ctx := t.Context()
	ns := rolloutNamespace(t)
	_, deploy, _ := webObjects(ns)
	deploy.Spec.Replicas = ptr.To[int32](1)
	deploy.Spec.MinReadySeconds = 3
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "uploads", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: ptr.To("nowhere"),
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	for _, obj := range []client.Object{deploy, claim} {
		g.Expect(hubCP.Client.Create(ctx, obj)).To(Succeed())
	}
	p := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{
				{Group: "apps", Version: "v1", Kind: "Deployment", Name: "web"}, {Version: "v1", Kind: "PersistentVolumeClaim", Name: "uploads"}},
			Scheduling: placementv1alpha1.Scheduling{ClusterNames: []string{member1}},
		}}
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	serving := func(cluster string) bool {
		d := &appsv1.Deployment{}
		err := members[cluster].Client.Get(context.Background(), client.ObjectKeyFromObject(deploy), d)
		return err == nil && d.DeletionTimestamp.IsZero() && d.Status.AvailableReplicas >= 1
	}
	g.Eventually(func(g Gomega) {
		g.Expect(serving(member1)).To(BeTrue())
		w := workOf(g, p, member1)
		g.Expect(w).NotTo(BeNil())
		g.Expect(workAvailable(w)).To(BeFalse(), "the claim is Pending: the copy is not Available as a whole")
	}).Should(Succeed())

	var gaps atomic.Int32
	stop := sample(100*time.Millisecond, func() {
		if !serving(member1) && !serving(member3) {
			gaps.Add(1)
		}
	})
	g.Expect(updateOnHub(p, func(p *placementv1alpha1.Placement) { p.Spec.Scheduling.ClusterNames = []string{member3} })).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(workOf(g, p, member1)).To(BeNil(), "member-1's copy goes once the Deployment serves on member-3")
		g.Expect(serving(member3)).To(BeTrue())
	}).Should(Succeed())
	stop()
	g.Expect(gaps.Load()).To(BeZero(), "samples with the Deployment available nowhere")
}
