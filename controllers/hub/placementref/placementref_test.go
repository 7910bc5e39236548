package placementref

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/hub/lookup"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// Decided judges a few decided clusters by reading their profiles one by one and
// many with one List: both ways accept and reject the same clusters, for the
// same reasons.
func TestDecidedReadsProfilesOneByOneOrInBulk(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(cpv1alpha1.AddToScheme(scheme)).To(Succeed())
	g.Expect(placementv1alpha1.AddToScheme(scheme)).To(Succeed())

	profile := func(set, name string, managed, claimed bool) client.Object {
		p := &cpv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Namespace: set, Name: name, Labels: map[string]string{}}}
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
	}
	for i := range bulkReads + 10 {
		objs = append(objs, profile("fleet", fmt.Sprintf("c-%03d", i), true, true))
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithIndex(&cpv1alpha1.ClusterProfile{}, lookup.ClusterProfilesByName, func(o client.Object) []string { return []string{o.GetName()} }).
		Build()

	special := []string{"unmanaged", "twice", "shared", "missing"}
	decide := func(name string, clusters []string) Decisions {
		ctx := context.Background()
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
		g.Expect(c.Create(ctx, pd)).To(Succeed())
		d, err := Decided(ctx, c, placement, []string{"fleet"})
		g.Expect(err).NotTo(HaveOccurred())
		return d
	}

	few := decide("few", append([]string{"c-000"}, special...))
	var all []string
	for i := range bulkReads + 10 {
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
}
