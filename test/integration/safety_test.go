package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/config"
	"github.com/lodestar-dev/lodestar/controllers/agent"
	"github.com/lodestar-dev/lodestar/controllers/hub/scheduler"
	"github.com/lodestar-dev/lodestar/internal/fleet"
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

// sliceFleet creates a cluster set (one of sliceSets, which the hub manages) of n
// managed, healthy ClusterProfiles named c-001..c-<n> (with their hub namespaces)
// and a tenant namespace bound to it, and removes the profiles when the test ends.
func sliceFleet(t *testing.T, n int) (set, tenant string) {
	t.Helper()
	g := NewWithT(t)
	i := int(nextSliceSet.Add(1)) - 1
	g.Expect(i).To(BeNumerically("<", len(sliceSets)), "more slice fleets than the hub manages cluster sets for")
	set = sliceSets[i]
	g.Expect(hubCP.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: set}})).To(Succeed())
	tenant = newTenant(t, set)
	for i := 1; i <= n; i++ {
		addSliceCluster(t, set, fmt.Sprintf("c-%03d", i))
	}
	return set, tenant
}

// addSliceCluster adds one healthy cluster to set, labelled slice=yes.
func addSliceCluster(t *testing.T, set, name string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	name = set + "-" + name // cluster names are unique across sets
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names.ClusterNamespace(name)}}
	g.Expect(client.IgnoreAlreadyExists(hubCP.Client.Create(ctx, ns))).To(Succeed())
	p := &cpv1alpha1.ClusterProfile{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: set, Labels: map[string]string{"slice": "yes"}},
		Spec:       cpv1alpha1.ClusterProfileSpec{ClusterManager: cpv1alpha1.ClusterManager{Name: scheduler.ClusterManagerName}},
	}
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	// A heartbeat as an agent's, good for the test's length: the cluster health
	// controller reports the cluster reachable and healthy.
	g.Expect(client.IgnoreAlreadyExists(hubCP.Client.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: placementv1alpha1.AgentLeaseName, Namespace: ns.Name,
			Labels:      map[string]string{placementv1alpha1.AgentLeaseLabel: "true"},
			Annotations: map[string]string{placementv1alpha1.MemberReadyAnnotation: "true"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](3600), RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}))).To(Succeed())
	t.Cleanup(func() {
		_ = hubCP.Client.Delete(context.Background(), p)
	})
}

// configMapOn creates, in tenant, a ConfigMap and a Placement of the same name
// that places it, with spec changed by mutate.
func configMapOn(t *testing.T, tenant, name string, mutate func(*placementv1alpha1.PlacementSpec)) *placementv1alpha1.Placement {
	t.Helper()
	g := NewWithT(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenant}, Data: map[string]string{"k": "v"}}
	g.Expect(hubCP.Client.Create(t.Context(), cm)).To(Succeed())
	p := &placementv1alpha1.Placement{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenant},
		Spec:       placementv1alpha1.PlacementSpec{ResourceSelectors: []placementv1alpha1.ResourceSelector{{Version: "v1", Kind: "ConfigMap", Name: name}}},
	}
	mutate(&p.Spec)
	g.Expect(hubCP.Client.Create(t.Context(), p)).To(Succeed())
	return p
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

// runAux joins an aux cluster named after prefix and runs its agent on member-2,
// with its options changed by mutate; it returns the cluster's name, the options
// and how to stop the agent.
func runAux(t *testing.T, prefix string, mutate func(*agent.Options)) (string, agent.Options, func()) {
	t.Helper()
	name, cfg := joinAux(t, prefix, 0)
	opts := auxAgent(name, cfg, member2)
	mutate(&opts)
	return name, opts, startAgent(t, opts)
}

// The missing-Work sweeper judges only its own hub's records and honours Orphan:
// an AppliedWork of another hub (same cluster name, a Work this hub never had)
// and its object survive the grace period; the objects of an Orphan Work removed
// from the hub while the agent was away are released, not deleted.
func TestSweeperLeavesAnotherHubsAndOrphanWorks(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	member := members[member2].Client
	name, opts, stop := runAux(t, "sweep", func(o *agent.Options) { o.MissingWorkGracePeriod = 2 * time.Second })
	ns := "sweep-" + rand.String(5)

	// Another hub's record, for a cluster of the same name.
	createOnMember(t, member2, ns, "foreign", map[string]string{"k": "v"})
	foreignCM := memberConfigMap(t, member2, ns, "foreign")
	foreign := &lodestarworkv1alpha1.AppliedWork{
		ObjectMeta: metav1.ObjectMeta{
			Name:   names.AppliedWork("other-hub", names.ClusterNamespace(name), "gone"),
			Labels: map[string]string{lodestarworkv1alpha1.HubLabel: "other-hub"},
		},
		Spec: lodestarworkv1alpha1.AppliedWorkSpec{WorkNamespace: names.ClusterNamespace(name), WorkName: "gone"},
	}
	g.Expect(member.Create(ctx, foreign)).To(Succeed())
	foreign.Status.AppliedResources = []lodestarworkv1alpha1.AppliedResource{{
		Version: "v1", Kind: "ConfigMap", Resource: "configmaps", Namespace: ns, Name: "foreign", UID: foreignCM.UID,
	}}
	g.Expect(member.Status().Update(ctx, foreign)).To(Succeed())
	g.Expect(updateWith(member, foreignCM, func(cm *corev1.ConfigMap) {
		cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: lodestarworkv1alpha1.GroupVersion.String(), Kind: "AppliedWork", Name: foreign.Name, UID: foreign.UID}}
	})).To(Succeed())

	// An Orphan Work, removed from the hub while its agent is away.
	orphan := newWork(t, name, "orphan", &lodestarworkv1alpha1.ApplyStrategy{DeletionPolicy: lodestarworkv1alpha1.DeletionOrphan},
		cmManifest(t, ns, "kept", map[string]any{"k": "v"}))
	eventuallyManifest(t, orphan, 0, metav1.ConditionTrue, "")
	applied := &lodestarworkv1alpha1.AppliedWork{}
	g.Eventually(func(g Gomega) {
		g.Expect(member.Get(ctx, client.ObjectKey{Name: names.AppliedWork(testHubID(), orphan.Namespace, orphan.Name)}, applied)).To(Succeed())
		g.Expect(applied.Labels).To(HaveKeyWithValue(lodestarworkv1alpha1.HubLabel, testHubID()))
		g.Expect(applied.Annotations).To(HaveKeyWithValue(lodestarworkv1alpha1.RecordedDeletionPolicyAnnotation, lodestarworkv1alpha1.DeletionPolicyOrphan))
	}).Should(Succeed())
	stop()
	forceRemove(t, orphan)
	startAgent(t, opts)

	g.Eventually(func(g Gomega) {
		err := member.Get(ctx, client.ObjectKeyFromObject(applied), &lodestarworkv1alpha1.AppliedWork{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Orphan Work's record is swept: %v", err)
		kept := memberConfigMap(t, member2, ns, "kept")
		g.Expect(kept.OwnerReferences).To(BeEmpty(), "released")
		g.Expect(kept.DeletionTimestamp.IsZero()).To(BeTrue())
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		got := &lodestarworkv1alpha1.AppliedWork{}
		g.Expect(member.Get(ctx, client.ObjectKeyFromObject(foreign), got)).To(Succeed())
		g.Expect(got.Annotations).NotTo(HaveKey(lodestarworkv1alpha1.WorkMissingSinceAnnotation), "another hub's record is not judged")
		cm := memberConfigMap(t, member2, ns, "foreign")
		g.Expect(cm.UID).To(Equal(foreignCM.UID))
		g.Expect(cm.DeletionTimestamp.IsZero()).To(BeTrue())
	}).WithTimeout(3 * opts.MissingWorkGracePeriod).Should(Succeed())
}

// An object the Work took over (it was on the member before) is released, not
// deleted, when its manifest or its Work goes; what the agent created is deleted.
func TestTakenOverObjectsAreReleased(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := "takeover-" + rand.String(5)
	createOnMember(t, member2, ns, "before", map[string]string{"k": "v"})
	createOnMember(t, member2, ns, "also-before", map[string]string{"k": "v"})
	always := &lodestarworkv1alpha1.ApplyStrategy{Takeover: lodestarworkv1alpha1.TakeoverAlways}
	w := newWork(t, member2, "takeover-"+rand.String(5), always,
		cmManifest(t, ns, "before", map[string]any{"k": "hub"}),
		cmManifest(t, ns, "also-before", map[string]any{"k": "hub"}),
		cmManifest(t, ns, "created", map[string]any{"k": "hub"}))
	for i := range 3 {
		eventuallyManifest(t, w, i, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)
	}
	g.Eventually(func(g Gomega) {
		applied := &lodestarworkv1alpha1.AppliedWork{}
		g.Expect(members[member2].Client.Get(ctx, appliedKey(w), applied)).To(Succeed())
		g.Expect(applied.Status.AppliedResources).To(ConsistOf(
			And(HaveField("Name", "before"), HaveField("TakenOver", true)),
			And(HaveField("Name", "also-before"), HaveField("TakenOver", true)),
			And(HaveField("Name", "created"), HaveField("TakenOver", false))))
	}).Should(Succeed())

	// The manifest goes: released.
	g.Expect(updateOnHub(w, func(w *workv1alpha1.Work) { w.Spec.Workload.Manifests = w.Spec.Workload.Manifests[1:] })).To(Succeed())
	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(members[member2].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "before"}, cm)).To(Succeed())
		g.Expect(cm.OwnerReferences).To(BeEmpty())
		g.Expect(cm.Data).To(HaveKeyWithValue("k", "hub"), "left as the Work last applied it")
	}).Should(Succeed())

	// Asked for explicitly, a taken-over object is deleted with its Work.
	createOnMember(t, member2, ns, "asked-for", map[string]string{"k": "v"})
	deleting := newWork(t, member2, "takeover-delete-"+rand.String(5), &lodestarworkv1alpha1.ApplyStrategy{
		Takeover: lodestarworkv1alpha1.TakeoverAlways, DeletionPolicy: lodestarworkv1alpha1.DeletionDeleteTakenOver,
	}, cmManifest(t, ns, "asked-for", map[string]any{"k": "hub"}))
	eventuallyManifest(t, deleting, 0, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)
	g.Expect(hubCP.Client.Delete(ctx, deleting)).To(Succeed())

	// The Work goes: the taken-over object is released, the created one deleted.
	g.Expect(hubCP.Client.Delete(ctx, w)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := members[member2].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "created"}, &corev1.ConfigMap{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "created by the agent: deleted (%v)", err)
		cm := &corev1.ConfigMap{}
		g.Expect(members[member2].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "also-before"}, cm)).To(Succeed())
		g.Expect(cm.OwnerReferences).To(BeEmpty())
		g.Expect(cm.DeletionTimestamp.IsZero()).To(BeTrue())
		err = members[member2].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "asked-for"}, &corev1.ConfigMap{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "DeleteTakenOver: deleted (%v)", err)
	}).Should(Succeed())
}

// Neither ReportOnly nor takeover IfNoDiff tells the hub whether a guessed value
// matches a member's Secret, and status feedback never reads an object the Work
// does not own.
func TestNoOracleForMemberSecrets(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := "oracle-" + rand.String(5)
	g.Expect(client.IgnoreAlreadyExists(members[member2].Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
	g.Expect(members[member2].Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns}, StringData: map[string]string{"password": "hunter2"}})).To(Succeed())
	createOnMember(t, member2, ns, "theirs", map[string]string{"k": "v"})
	guess := func(password string) workv1alpha1.Manifest {
		return manifest(t, map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "db", "namespace": ns},
			"stringData": map[string]any{"password": password}})
	}
	for _, password := range []string{"hunter2", "wrong"} {
		report := newWork(t, member2, "report-"+password, &lodestarworkv1alpha1.ApplyStrategy{Type: lodestarworkv1alpha1.ApplyReportOnly}, guess(password))
		msg := eventuallyManifest(t, report, 0, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonNotCompared)
		g.Expect(msg).NotTo(ContainSubstring("password"))
		ifNoDiff := newWork(t, member2, "ifnodiff-"+password, &lodestarworkv1alpha1.ApplyStrategy{Takeover: lodestarworkv1alpha1.TakeoverIfNoDiff}, guess(password))
		eventuallyManifest(t, ifNoDiff, 0, metav1.ConditionFalse, lodestarworkv1alpha1.ReasonNotOwned)
	}
	secret := &corev1.Secret{}
	g.Expect(members[member2].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, secret)).To(Succeed())
	g.Expect(secret.OwnerReferences).To(BeEmpty())
	g.Expect(string(secret.Data["password"])).To(Equal("hunter2"))

	// Feedback on a ReportOnly Work: the object is not the Work's, nothing is read.
	rules, err := json.Marshal([]lodestarworkv1alpha1.FeedbackRule{{Kind: "ConfigMap", Fields: []lodestarworkv1alpha1.FeedbackField{{Name: "value", JSONPath: ".data.k"}}}})
	g.Expect(err).NotTo(HaveOccurred())
	report := newWork(t, member2, "report-feedback", &lodestarworkv1alpha1.ApplyStrategy{Type: lodestarworkv1alpha1.ApplyReportOnly},
		cmManifest(t, ns, "theirs", map[string]any{"k": "v"}))
	g.Expect(updateOnHub(report, func(w *workv1alpha1.Work) {
		w.Annotations[lodestarworkv1alpha1.StatusFeedbackAnnotation] = string(rules)
	})).To(Succeed())
	eventuallyManifest(t, report, 0, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonInSync)
	g.Consistently(func(g Gomega) {
		got := &workv1alpha1.Work{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(report), got)).To(Succeed())
		g.Expect(got.Status.ManifestConditions).To(HaveLen(1))
		g.Expect(got.Status.ManifestConditions[0].Conditions).NotTo(ContainElement(HaveField("Type", lodestarworkv1alpha1.ConditionStatusFeedback)))
	}).Should(Succeed())
}

// setServedVersions rewrites which versions of a CRD on a member are served, and
// which one is stored.
func setServedVersions(t *testing.T, cluster string, crd *unstructured.Unstructured, served map[string]bool, storage string) {
	t.Helper()
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(crd.GroupVersionKind())
	obj.SetName(crd.GetName())
	NewWithT(t).Expect(updateWith(members[cluster].Client, obj, func(o *unstructured.Unstructured) {
		versions, _, _ := unstructured.NestedSlice(o.Object, "spec", "versions")
		for _, v := range versions {
			m := v.(map[string]any)
			m["served"] = served[m["name"].(string)]
			m["storage"] = m["name"] == storage
		}
		_ = unstructured.SetNestedSlice(o.Object, versions, "spec", "versions")
	})).To(Succeed())
}

// Cleanup is never stuck on a kind the member stopped serving: an object whose
// recorded version is no longer served is deleted through a version that is; one
// whose kind is served in no version holds the cleanup, says so and until when,
// and is released after the agent's bounded wait.
func TestCleanupOfUnservedKindsIsBounded(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	member := members[member2].Client
	name, _, _ := runAux(t, "unserved", func(o *agent.Options) { o.UnservedKindGracePeriod = 3 * time.Second })
	ns := "unserved-" + rand.String(5)
	moved, movedCRD := widgetCRD(t, member2, "v1", "v2")
	gone, goneCRD := widgetCRD(t, member2, "v1")
	w := newWork(t, name, "unserved", nil,
		manifest(t, map[string]any{"apiVersion": moved + "/v1", "kind": "Widget", "metadata": map[string]any{"name": "moved", "namespace": ns}}),
		manifest(t, map[string]any{"apiVersion": gone + "/v1", "kind": "Widget", "metadata": map[string]any{"name": "gone", "namespace": ns}}))
	eventuallyManifest(t, w, 0, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)
	eventuallyManifest(t, w, 1, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)

	setServedVersions(t, member2, movedCRD, map[string]bool{"v2": true}, "v2")
	setServedVersions(t, member2, goneCRD, map[string]bool{}, "v1")
	g.Expect(hubCP.Client.Delete(ctx, w)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := cleanupBlockedCondition(g, w)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(lodestarworkv1alpha1.ReasonKindNotServed))
		g.Expect(c.Message).To(And(ContainSubstring("Widget "+ns+"/gone"), ContainSubstring("released at")))
		g.Expect(c.Message).NotTo(ContainSubstring("moved"))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		err := hubCP.Client.Get(ctx, client.ObjectKeyFromObject(w), &workv1alpha1.Work{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Work's cleanup ends: %v", err)
	}).Should(Succeed())
	widget := &unstructured.Unstructured{}
	widget.SetAPIVersion(moved + "/v2")
	widget.SetKind("Widget")
	err := member.Get(ctx, client.ObjectKey{Namespace: ns, Name: "moved"}, widget)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "deleted through the version still served: %v", err)
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

// Namespaces the agent creates for manifests enforce the member policy's Pod
// Security Standard: a tenant's privileged hostPath pod is rejected there.
func TestCreatedNamespacesEnforcePodSecurity(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := "psa-" + rand.String(5)
	w := newWork(t, member2, "psa", nil, cmManifest(t, ns, "settings", map[string]any{"k": "v"}))
	eventuallyManifest(t, w, 0, metav1.ConditionTrue, lodestarworkv1alpha1.ReasonApplied)
	created := &corev1.Namespace{}
	g.Expect(members[member2].Client.Get(ctx, client.ObjectKey{Name: ns}, created)).To(Succeed())
	g.Expect(created.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "baseline"))

	privileged := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "root", Namespace: ns},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "busybox", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
				VolumeMounts: []corev1.VolumeMount{{Name: "host", MountPath: "/host"}}}},
			Volumes: []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}},
		},
	}
	err := members[member2].Client.Create(ctx, privileged)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("PodSecurity"))
}

// The hub bounds the lifetime of the tokens an agent renews itself: 24 hours.
func TestAgentTokenLifetimeIsBoundedByTheHub(t *testing.T) {
	g := NewWithT(t)
	cs, err := kubernetes.NewForConfig(agentConfigs[member1])
	g.Expect(err).NotTo(HaveOccurred())
	request := func(d time.Duration) error {
		_, err := cs.CoreV1().ServiceAccounts(names.ClusterNamespace(member1)).CreateToken(t.Context(), fleet.AgentServiceAccount,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(d.Seconds()))}}, metav1.CreateOptions{})
		return err
	}
	g.Expect(request(time.Hour)).To(Succeed())
	err = request(48 * time.Hour)
	g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("at most 24 hours"))
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

// An object that renders to more than a Work may carry is not placed: the
// Placement says why, naming it, and loses nothing placed.
func TestOversizeWorkIsNotWritten(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, cm, p := configMapPlacement(t)
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := placementCondition(g, t, client.ObjectKeyFromObject(p), placementv1alpha1.WorkSynchronizedCondition)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonWorkSynchronized))
	}).Should(Succeed())
	works := &workv1alpha1.WorkList{}
	g.Expect(hubCP.Client.List(ctx, works, client.MatchingLabels{placementv1alpha1.PlacementNamespaceLabel: ns})).To(Succeed())
	g.Expect(works.Items).NotTo(BeEmpty())
	work := &works.Items[0]
	cluster, _ := names.ClusterFromNamespace(work.Namespace)

	// A ConfigMap of 900 KiB: it fits etcd and a ConfigMap, not a Work.
	g.Expect(hubCP.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: ns, Labels: map[string]string{"size": "big"}},
		Data: map[string]string{"blob": strings.Repeat("x", 900<<10)}})).To(Succeed())
	g.Expect(updateOnHub(p, func(p *placementv1alpha1.Placement) {
		p.Spec.ResourceSelectors = append(p.Spec.ResourceSelectors, placementv1alpha1.ResourceSelector{
			Version: "v1", Kind: "ConfigMap", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"size": "big"}}})
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := placementCondition(g, t, client.ObjectKeyFromObject(p), placementv1alpha1.RenderedCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonWorkTooLarge))
		g.Expect(c.Message).To(ContainSubstring("ConfigMap " + ns + "/big"))
		c = placementCondition(g, t, client.ObjectKeyFromObject(p), placementv1alpha1.WorkSynchronizedCondition)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonNotRendered))
	}).Should(Succeed())
	got := &workv1alpha1.Work{}
	g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(work), got)).To(Succeed())
	g.Expect(got.Spec.Workload.Manifests).To(HaveLen(1), "the Work keeps what it carried")
	g.Expect(string(got.Spec.Workload.Manifests[0].Raw)).To(ContainSubstring(cm.Name))
	g.Eventually(func() error {
		return members[cluster].Client.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})
	}).Should(Succeed(), "what was placed stays")
}
