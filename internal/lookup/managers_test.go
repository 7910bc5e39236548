package lookup_test

import (
	"context"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/fleet"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/scheme"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// Two hub managers on one API server: each marks its sets (a third cannot take
// a marked one, and changes nothing trying), and every namespace, set and the
// ClusterPlacements have exactly one of them.
func TestHubManagersDivideTheHub(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	scheme := runtime.NewScheme()
	g.Expect(placementv1alpha1.AddToScheme(scheme)).To(Succeed())
	g.Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	hub, err := testenv.StartHub(scheme, testenv.QuickShutdown)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = hub.Stop() })
	c := hub.Client

	// set-a exists already; set-b is created by its mark.
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "set-a", Labels: map[string]string{"team": "platform"}}})).To(Succeed())
	g.Expect(lookup.MarkClusterSets(ctx, c, "main", []string{"set-a"})).To(Succeed())
	g.Expect(lookup.MarkClusterSets(ctx, c, "edge", []string{"set-b"})).To(Succeed())
	g.Expect(lookup.MarkClusterSets(ctx, c, "edge", []string{"set-b"})).To(Succeed(), "marking again is a no-op")
	err = lookup.MarkClusterSets(ctx, c, "intruder", []string{"set-c", "set-b"})
	g.Expect(err).To(MatchError(ContainSubstring(`cluster set set-b is managed by hub manager "edge"`)))
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "set-c"}, &corev1.Namespace{})).NotTo(Succeed(), "a refused manager changes nothing")
	// The replicas of one manager start together: each marks, none fails.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = lookup.MarkClusterSets(ctx, c, "edge", []string{"set-b", "set-d"}) })
	}
	wg.Wait()
	g.Expect(errs).To(HaveEach(Succeed()))
	for set, manager := range map[string]string{"set-a": "main", "set-b": "edge", "set-d": "edge"} {
		ns := &corev1.Namespace{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: set}, ns)).To(Succeed())
		g.Expect(ns.Labels).To(HaveKeyWithValue(placementv1alpha1.HubManagerLabel, manager))
	}

	main := lookup.Scope{Sets: []string{"set-a"}}
	edge := lookup.Scope{Sets: []string{"set-b"}, SetsOnly: true}
	for ns, sets := range map[string][]string{
		"none": nil, "a": {"set-a"}, "b": {"set-b"}, "both": {"set-b", "set-a"}, "loose": {"loose"}, "loose-b": {"loose", "set-b"},
	} {
		g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		for _, set := range sets {
			g.Expect(fleet.BindClusterSet(ctx, c, ns, set)).To(Succeed())
		}
	}
	for _, tc := range []struct {
		namespace, deciding string
		mainOwns            bool
	}{
		{"none", "", true},
		{"a", "set-a", true},
		{"b", "set-b", false},
		{"both", "set-a", true}, // the first marked set, by name
		{"loose", "", true},     // a set no manager marked decides nothing
		{"loose-b", "set-b", false},
		{placementv1alpha1.ClusterPlacementNamespace, "", true},
	} {
		deciding, err := main.DecidingSet(ctx, c, tc.namespace)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(deciding).To(Equal(tc.deciding), tc.namespace)
		edgeDeciding, err := edge.DecidingSet(ctx, c, tc.namespace)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(edgeDeciding).To(Equal(tc.deciding), "both managers read the same marks: %s", tc.namespace)
		mainOwns, err := main.Owns(ctx, c, tc.namespace)
		g.Expect(err).NotTo(HaveOccurred())
		edgeOwns, err := edge.Owns(ctx, c, tc.namespace)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(mainOwns).To(Equal(tc.mainOwns), tc.namespace)
		g.Expect(edgeOwns).To(Equal(!tc.mainOwns), "exactly one manager: %s", tc.namespace)
	}
	for _, tc := range []struct {
		set            string
		main, edgeOwns bool
	}{
		{"set-a", true, false},
		{"set-b", false, true},
		{"loose", true, false}, // the hub-wide manager reports it not managed
	} {
		m, err := main.OwnsSet(ctx, c, tc.set)
		g.Expect(err).NotTo(HaveOccurred())
		e, err := edge.OwnsSet(ctx, c, tc.set)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect([]bool{m, e}).To(Equal([]bool{tc.main, tc.edgeOwns}), tc.set)
	}
}

// A manager labels, when it starts, the Works of its sets' clusters written
// before Works carried their manager's name, and only those; Only and
// OnlySets run a reconciler for what the manager takes and nothing else.
func TestManagersLabelTheirWorksAndShardOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	hub, err := testenv.StartHub(scheme.Hub(), testenv.QuickShutdown)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = hub.Stop() })
	c := hub.Client
	g.Expect(lookup.MarkClusterSets(ctx, c, "main", []string{"set-a"})).To(Succeed())
	g.Expect(lookup.MarkClusterSets(ctx, c, "edge", []string{"set-b"})).To(Succeed())
	work := func(cluster, name string, labels map[string]string) client.ObjectKey {
		ns := names.ClusterNamespace(cluster)
		g.Expect(client.IgnoreAlreadyExists(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		g.Expect(c.Create(ctx, &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}})).To(Succeed())
		return client.ObjectKey{Namespace: ns, Name: name}
	}
	for cluster, set := range map[string]string{"a-1": "set-a", "b-1": "set-b"} {
		g.Expect(c.Create(ctx, &cpv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Name: cluster, Namespace: set},
			Spec: cpv1alpha1.ClusterProfileSpec{DisplayName: cluster, ClusterManager: cpv1alpha1.ClusterManager{Name: placementv1alpha1.ClusterManagerName}}})).To(Succeed())
	}
	placed := map[string]string{placementv1alpha1.PlacementNamespaceLabel: "team", placementv1alpha1.PlacementNameLabel: "web"}
	mine := work("a-1", "team-web", placed)
	theirs := work("b-1", "team-web", placed)
	notOurs := work("a-1", "someone-else", map[string]string{"app": "x"})
	labelled := work("a-1", "team-api", map[string]string{placementv1alpha1.PlacementNamespaceLabel: "team", placementv1alpha1.PlacementNameLabel: "api",
		placementv1alpha1.HubManagerLabel: "main"})

	// LabelWorks reads the API server's watch cache: run again until it shows
	// the Works just made (as a manager's next start would).
	g.Eventually(func(g Gomega) {
		g.Expect(lookup.LabelWorks(ctx, c, "main", []string{"set-a"})).To(Succeed())
		for key, want := range map[client.ObjectKey]string{mine: "main", theirs: "", notOurs: "", labelled: "main"} {
			w := &workv1alpha1.Work{}
			g.Expect(c.Get(ctx, key, w)).To(Succeed())
			g.Expect(w.Labels[placementv1alpha1.HubManagerLabel]).To(Equal(want), "Work %s", key)
		}
	}).Should(Succeed())

	// Only: namespace b binds edge's set; main's wrapped reconciler never runs for it.
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b"}})).To(Succeed())
	g.Expect(fleet.BindClusterSet(ctx, c, "team-b", "set-b")).To(Succeed())
	var ran []string
	inner := reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
		ran = append(ran, req.String())
		return reconcile.Result{}, nil
	})
	main := lookup.Scope{Sets: []string{"set-a"}, Manager: "main"}
	edge := lookup.Scope{Sets: []string{"set-b"}, SetsOnly: true, Manager: "edge"}
	for _, s := range []lookup.Scope{main, edge} {
		_, err := s.Only(c, inner).Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "team-b", Name: "web"}})
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(ran).To(Equal([]string{"team-b/web"}), "only edge takes team-b")

	// OnlySets: a binding of set-b is edge's; one gone goes to the reconciler.
	ran = nil
	bindingOf := func() *placementv1alpha1.ClusterSetBinding { return &placementv1alpha1.ClusterSetBinding{} }
	setOf := func(b *placementv1alpha1.ClusterSetBinding) string { return b.Spec.ClusterSet }
	for _, s := range []lookup.Scope{main, edge} {
		for _, name := range []string{"set-b", "gone"} {
			_, err := lookup.OnlySets(s, c, inner, bindingOf, setOf).Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "team-b", Name: name}})
			g.Expect(err).NotTo(HaveOccurred())
		}
	}
	g.Expect(ran).To(Equal([]string{"team-b/gone", "team-b/set-b", "team-b/gone"}))
	g.Expect(main.ManagerName()).To(Equal("main"))
	g.Expect(lookup.Scope{}.ManagerName()).To(Equal(placementv1alpha1.DefaultHubManager))
}
