package lookup_test

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// The package's Gomega defaults, sized for a busy CI machine (testenv).
func init() {
	testenv.SetGomegaDefaults()
}

// Decided judges a few decided clusters by reading their profiles one by one and
// many with one List: both ways accept and reject the same clusters, for the
// same reasons.
func TestDecidedReadsProfilesOneByOneOrInBulk(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	scheme := runtime.NewScheme()
	g.Expect(cpv1alpha1.AddToScheme(scheme)).To(Succeed())
	g.Expect(placementv1alpha1.AddToScheme(scheme)).To(Succeed())
	g.Expect(workv1alpha1.AddToScheme(scheme)).To(Succeed())
	g.Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	hub, err := testenv.StartHub(scheme, testenv.QuickShutdown)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = hub.Stop() })

	profile := func(set, name string, managed, claimed bool) client.Object {
		p := &cpv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Namespace: set, Name: name, Labels: map[string]string{"set": set}}}
		if managed {
			p.Spec.ClusterManager.Name = placementv1alpha1.ClusterManagerName
		}
		if claimed {
			p.Labels[placementv1alpha1.WorkNamespaceLabel] = names.ClusterNamespace(name)
		}
		return p
	}
	objs := []client.Object{
		profile("fleet", "unmanaged", false, false),
		// The same name in another set, marked with the cluster's Work namespace.
		profile("fleet", "twice", true, true),
		profile("other", "twice", true, true),
		// The same name in another set, not marked: no ambiguity.
		profile("fleet", "shared", true, true),
		profile("other", "shared", true, false),
		// The same name unclaimed in a set that sorts first.
		profile("abc", "late", true, false),
		profile("fleet", "late", true, true),
	}
	for i := range lookup.BulkReads + 10 {
		objs = append(objs, profile("fleet", fmt.Sprintf("c-%03d", i), true, true))
	}
	for _, ns := range []string{"fleet", "other", "abc", "app"} {
		g.Expect(hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	for _, o := range objs {
		g.Expect(hub.Client.Create(ctx, o)).To(Succeed())
	}
	// Decided reads through the hub manager's cache, with its indexes.
	c, err := cache.New(hub.Config, cache.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lookup.AddIndexes(ctx, c)).To(Succeed())
	go func() { _ = c.Start(ctx) }()
	g.Expect(c.WaitForCacheSync(ctx)).To(BeTrue())
	g.Eventually(func(g Gomega) {
		list := &cpv1alpha1.ClusterProfileList{}
		g.Expect(c.List(ctx, list)).To(Succeed())
		g.Expect(list.Items).To(HaveLen(len(objs)))
	}).Should(Succeed())

	special := []string{"unmanaged", "twice", "shared", "missing"}
	decide := func(name string, clusters []string) lookup.Decisions {
		placement := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, UID: types.UID("uid-" + name)}}
		pd := &cpv1alpha1.PlacementDecision{
			ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name + "-1",
				Labels:          map[string]string{cpv1alpha1.PlacementKeyLabel: name},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "placement.lodestar.dev/v1alpha1", Kind: "Placement", Name: name, UID: placement.UID}}},
			SchedulerName: placementv1alpha1.DefaultSchedulerName,
		}
		for _, cl := range clusters {
			pd.Decisions = append(pd.Decisions, cpv1alpha1.ClusterDecision{ClusterProfileRef: cpv1alpha1.ClusterProfileReference{Namespace: "fleet", Name: cl}})
		}
		g.Expect(hub.Client.Create(ctx, pd)).To(Succeed())
		g.Eventually(func(g Gomega) {
			got := &cpv1alpha1.PlacementDecision{}
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(pd), got)).To(Succeed())
		}).Should(Succeed())
		d, err := lookup.Decided(ctx, c, placement, []string{"fleet"})
		g.Expect(err).NotTo(HaveOccurred())
		return d
	}

	few := decide("few", append([]string{"c-000"}, special...))
	var all []string
	for i := range lookup.BulkReads + 10 {
		all = append(all, fmt.Sprintf("c-%03d", i))
	}
	many := decide("many", append(all, special...))

	g.Expect(few.Clusters).To(ConsistOf("c-000", "shared"))
	g.Expect(many.Clusters).To(ConsistOf(append(all, "shared")))
	g.Expect(few.Rejected).To(ConsistOf(
		"PlacementDecision few-1 names cluster unmanaged: no ClusterProfile fleet/unmanaged that Lodestar manages",
		"PlacementDecision few-1 names cluster twice: cluster name twice is used in cluster sets fleet and other; its Works would be ambiguous",
		"PlacementDecision few-1 names cluster missing: no ClusterProfile fleet/missing that Lodestar manages",
	))
	for i, r := range few.Rejected {
		g.Expect(many.Rejected[i]).To(Equal("PlacementDecision many-1" + r[len("PlacementDecision few-1"):]))
	}
	g.Expect(many.Rejected).To(HaveLen(len(few.Rejected)))

	// ClusterLabels reads the same labels both ways: the claiming profile's, else
	// the first Lodestar profile's by cluster set; none without one.
	fewLabels, err := lookup.ClusterLabels(ctx, c, append([]string{"c-000", "late"}, special...))
	g.Expect(err).NotTo(HaveOccurred())
	manyLabels, err := lookup.ClusterLabels(ctx, c, append(append(all, "late"), special...))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fewLabels).To(HaveLen(4))
	g.Expect(fewLabels).NotTo(HaveKey("unmanaged"))
	g.Expect(fewLabels).NotTo(HaveKey("missing"))
	g.Expect(fewLabels["c-000"]).To(HaveKeyWithValue("set", "fleet"))
	g.Expect(fewLabels["late"]).To(HaveKeyWithValue("set", "fleet"), "the claiming profile")
	g.Expect(fewLabels["shared"]).To(HaveKeyWithValue("set", "fleet"), "the claiming profile")
	g.Expect(fewLabels["twice"]).To(HaveKeyWithValue("set", "fleet"), "both claim: the first by set")
	g.Expect(manyLabels).To(HaveLen(len(all) + 3))
	for name, labels := range fewLabels {
		g.Expect(manyLabels).To(HaveKeyWithValue(name, labels))
	}
}
