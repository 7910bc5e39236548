package integration

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/hub/scheduler"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// Works go only where the namespace may go: a decision naming a cluster of a
// cluster set the namespace may not use, a decision the Placement does not own and
// one written for another scheduler send nothing, whoever wrote them; the
// Placement's own valid decision still does.
func TestInjectedDecisionsSendNoWork(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	victim, _ := joinAux(t, "victim", 0)
	ns, _, p := configMapPlacement(t)
	p.Spec.Scheduling.SchedulerName = "acme-scheduler"
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())

	// Another set's cluster, next to a cluster the namespace may use.
	g.Expect(hubCP.Client.Create(ctx, externalDecision(p, "acme-0",
		cpv1alpha1.ClusterProfileReference{Namespace: auxSet, Name: victim},
		cpv1alpha1.ClusterProfileReference{Namespace: scheduler.DefaultClusterSetNamespace, Name: member2},
	))).To(Succeed())
	// The victim named under a set the namespace may use, where it is not.
	g.Expect(hubCP.Client.Create(ctx, externalDecision(p, "acme-1",
		cpv1alpha1.ClusterProfileReference{Namespace: scheduler.DefaultClusterSetNamespace, Name: victim},
	))).To(Succeed())
	// Not owned by the Placement.
	unowned := externalDecision(p, "acme-2", cpv1alpha1.ClusterProfileReference{Namespace: scheduler.DefaultClusterSetNamespace, Name: member1})
	unowned.OwnerReferences = nil
	g.Expect(hubCP.Client.Create(ctx, unowned)).To(Succeed())
	// Written for another scheduler.
	other := externalDecision(p, "acme-3", cpv1alpha1.ClusterProfileReference{Namespace: scheduler.DefaultClusterSetNamespace, Name: member1})
	other.SchedulerName = "someone-else"
	g.Expect(hubCP.Client.Create(ctx, other)).To(Succeed())

	workName := names.Work(ns, p.Name)
	g.Eventually(func(g Gomega) {
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: names.ClusterNamespace(member2), Name: workName}, &workv1alpha1.Work{})).To(Succeed())
		events := &eventsv1.EventList{}
		g.Expect(hubCP.Client.List(ctx, events, client.InNamespace(ns))).To(Succeed())
		g.Expect(events.Items).To(ContainElement(And(
			HaveField("Reason", placementv1alpha1.ReasonDecisionRejected),
			HaveField("Type", "Warning"),
			HaveField("Note", And(ContainSubstring("cluster set "+auxSet+" is not one the namespace may use"),
				ContainSubstring("not owned by the Placement"), ContainSubstring(`for scheduler "someone-else"`))),
		)))
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		for _, cluster := range []string{victim, member1} {
			err := hubCP.Client.Get(ctx, client.ObjectKey{Namespace: names.ClusterNamespace(cluster), Name: workName}, &workv1alpha1.Work{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a Work for %s: %v", cluster, err)
		}
	}).Should(Succeed())
}

// A Placement over more than 100 clusters has two PlacementDecision slices. A
// cluster that sorts first pushes the last cluster of slice 0 into slice 1; while
// the slices are written one after the other that cluster is in neither, and its
// Work must not be deleted. No Work of the Placement is ever deleted.
func TestClusterMovingBetweenSlicesKeepsItsWork(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	set, tenant := sliceFleet(t, 101)
	p := configMapOn(t, tenant, "sliced", func(s *placementv1alpha1.PlacementSpec) {
		s.Scheduling.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"slice": "yes"}}
	})
	works := func(g Gomega) []workv1alpha1.Work {
		list := &workv1alpha1.WorkList{}
		g.Expect(hubCP.Client.List(ctx, list, client.MatchingLabels{placementv1alpha1.PlacementNamespaceLabel: tenant})).To(Succeed())
		return list.Items
	}
	g.Eventually(func(g Gomega) { g.Expect(works(g)).To(HaveLen(101)) }).Should(Succeed())

	wc, err := client.NewWithWatch(hubCP.Config, client.Options{Scheme: hubCP.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	watcher, err := wc.Watch(ctx, &workv1alpha1.WorkList{}, client.MatchingLabels{placementv1alpha1.PlacementNamespaceLabel: tenant})
	g.Expect(err).NotTo(HaveOccurred())
	defer watcher.Stop()
	var deleted []string
	seen := func() {
		for {
			select {
			case ev := <-watcher.ResultChan():
				if w, ok := ev.Object.(*workv1alpha1.Work); ok && (ev.Type == watch.Deleted || !w.DeletionTimestamp.IsZero()) {
					deleted = append(deleted, w.Namespace)
				}
			default:
				return
			}
		}
	}

	// Three clusters that sort first, one after the other: each pushes one more
	// cluster from slice 0 into slice 1.
	for i, prefix := range []string{"a-001", "a-002", "a-000"} {
		addSliceCluster(t, set, prefix)
		g.Eventually(func(g Gomega) {
			seen()
			g.Expect(works(g)).To(HaveLen(102 + i))
			pds := &cpv1alpha1.PlacementDecisionList{}
			g.Expect(hubCP.Client.List(ctx, pds, client.InNamespace(tenant))).To(Succeed())
			g.Expect(pds.Items).To(HaveLen(2))
			g.Expect(pds.Items[0].Annotations[placementv1alpha1.DecisionRevisionAnnotation]).To(Equal(pds.Items[1].Annotations[placementv1alpha1.DecisionRevisionAnnotation]))
		}).Should(Succeed())
	}
	// The generator has caught up with the last decisions when the Placement's
	// Works are synchronized for all 104 clusters.
	g.Eventually(func(g Gomega) {
		c := placementCondition(g, t, client.ObjectKeyFromObject(p), placementv1alpha1.WorkSynchronizedCondition)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonWorkSynchronized))
		g.Expect(c.Message).To(ContainSubstring("of 104 clusters"))
	}).Should(Succeed())
	seen()
	g.Expect(deleted).To(BeEmpty(), "Works deleted while their clusters moved between slices")
}

// The work generator deletes a cluster's Work only when every slice agrees. As an
// external scheduler writes them: slice 0 rewritten first without c-002, which
// moves to slice 1; until slice 1 carries the same revision, c-002 keeps its Work.
func TestWorkKeptUntilEverySliceAgrees(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	set, tenant := sliceFleet(t, 3)
	p := configMapOn(t, tenant, "sliced", func(s *placementv1alpha1.PlacementSpec) { s.Scheduling.SchedulerName = "acme-scheduler" })
	ref := func(n int) cpv1alpha1.ClusterProfileReference {
		return cpv1alpha1.ClusterProfileReference{Namespace: set, Name: fmt.Sprintf("%s-c-%03d", set, n)}
	}
	slice := func(i int, revision string, clusters ...int) *cpv1alpha1.PlacementDecision {
		pd := externalDecision(p, fmt.Sprintf("acme-%d", i))
		for _, c := range clusters {
			pd.Decisions = append(pd.Decisions, cpv1alpha1.ClusterDecision{ClusterProfileRef: ref(c), Reason: "acme says so"})
		}
		pd.Annotations = map[string]string{placementv1alpha1.DecisionRevisionAnnotation: revision, placementv1alpha1.DecisionSlicesAnnotation: "2"}
		return pd
	}
	write := func(pd *cpv1alpha1.PlacementDecision) {
		g.Expect(updateOnHub(&cpv1alpha1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{Name: pd.Name, Namespace: pd.Namespace}}, func(cur *cpv1alpha1.PlacementDecision) {
			cur.Annotations, cur.Decisions = pd.Annotations, pd.Decisions
		})).To(Succeed())
	}
	synchronized := func(reason, message string) {
		g.Eventually(func(g Gomega) {
			c := placementCondition(g, t, client.ObjectKeyFromObject(p), placementv1alpha1.WorkSynchronizedCondition)
			g.Expect(c.Reason).To(Equal(reason))
			g.Expect(c.Message).To(ContainSubstring(message))
		}).Should(Succeed())
	}
	work := func(n int) error {
		return hubCP.Client.Get(ctx, client.ObjectKey{Namespace: names.ClusterNamespace(ref(n).Name), Name: names.Work(tenant, p.Name)}, &workv1alpha1.Work{})
	}

	g.Expect(hubCP.Client.Create(ctx, slice(0, "r1", 1, 2))).To(Succeed())
	g.Expect(hubCP.Client.Create(ctx, slice(1, "r1", 3))).To(Succeed())
	synchronized(placementv1alpha1.ReasonWorkSynchronized, "of 3 clusters")

	write(slice(0, "r2", 1))
	synchronized(placementv1alpha1.ReasonWaitingForDecisions, "being updated")
	g.Consistently(func() error { return work(2) }).Should(Succeed(), "c-002 is moving to slice 1")

	write(slice(1, "r2", 2, 3))
	synchronized(placementv1alpha1.ReasonWorkSynchronized, "of 3 clusters")
	g.Expect(work(2)).To(Succeed())

	// Once every slice agrees that c-002 is gone, its Work goes.
	write(slice(1, "r3", 3))
	write(slice(0, "r3", 1))
	synchronized(placementv1alpha1.ReasonWorkSynchronized, "of 2 clusters")
	g.Eventually(func(g Gomega) {
		w := &workv1alpha1.Work{}
		err := hubCP.Client.Get(ctx, client.ObjectKey{Namespace: names.ClusterNamespace(ref(2).Name), Name: names.Work(tenant, p.Name)}, w)
		g.Expect(apierrors.IsNotFound(err) || err == nil && !w.DeletionTimestamp.IsZero()).To(BeTrue(), "the Work of c-002 is deleted: %v", err)
	}).Should(Succeed())
}

// A cluster name that another cluster set's profile claims gets no Work: its hub
// namespace would be shared, and one set's Works could reach the other set's
// cluster.
func TestAmbiguousClusterNameGetsNoWork(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	set, tenant := sliceFleet(t, 1)
	other := newNamespace(t)
	name := set + "-c-001"
	// Claimed as the hub claims the profiles of the sets it manages.
	twin := &cpv1alpha1.ClusterProfile{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: other, Labels: map[string]string{placementv1alpha1.WorkNamespaceLabel: names.ClusterNamespace(name)}},
		Spec:       cpv1alpha1.ClusterProfileSpec{ClusterManager: cpv1alpha1.ClusterManager{Name: scheduler.ClusterManagerName}},
	}
	g.Expect(hubCP.Client.Create(ctx, twin)).To(Succeed())
	p := configMapOn(t, tenant, "twin", func(s *placementv1alpha1.PlacementSpec) { s.Scheduling.SchedulerName = "acme-scheduler" })
	g.Expect(hubCP.Client.Create(ctx, externalDecision(p, "acme-0", cpv1alpha1.ClusterProfileReference{Namespace: set, Name: name}))).To(Succeed())
	g.Eventually(func(g Gomega) {
		events := &eventsv1.EventList{}
		g.Expect(hubCP.Client.List(ctx, events, client.InNamespace(tenant))).To(Succeed())
		g.Expect(events.Items).To(ContainElement(And(
			HaveField("Reason", placementv1alpha1.ReasonDecisionRejected),
			HaveField("Note", ContainSubstring("is used in cluster sets")))))
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		err := hubCP.Client.Get(ctx, client.ObjectKey{Namespace: names.ClusterNamespace(name), Name: names.Work(tenant, p.Name)}, &workv1alpha1.Work{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
	}).Should(Succeed())
}

// Decisions written by another scheduler are consumed like Lodestar's own.
func TestExternalSchedulerDecisions(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	_, cm, p := configMapPlacement(t)
	p.Spec.Scheduling.SchedulerName = "acme-scheduler"
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())

	pd := externalDecision(p, "acme-web", cpv1alpha1.ClusterProfileReference{Namespace: scheduler.DefaultClusterSetNamespace, Name: member2})
	g.Expect(hubCP.Client.Create(ctx, pd)).To(Succeed())
	g.Eventually(func(g Gomega) {
		expectCM := &corev1.ConfigMap{}
		g.Expect(members[member2].Client.Get(ctx, client.ObjectKeyFromObject(cm), expectCM)).To(Succeed())
		c := placementCondition(g, t, client.ObjectKeyFromObject(p), placementv1alpha1.AppliedCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
	}).Should(Succeed())
	got := &placementv1alpha1.Placement{}
	g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
	g.Expect(got.Status.Conditions).NotTo(ContainElement(HaveField("Type", placementv1alpha1.ScheduledCondition)), "Lodestar's scheduler stays out")
	g.Eventually(func(g Gomega) {
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(got.Status.SelectedClusters).To(HaveValue(BeEquivalentTo(1)), "the other scheduler's decisions count as selected clusters")
	}).Should(Succeed())
}
