package workgenerator_test

import (
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/render"
)

// Each decided cluster gets a Work of the revision the revision maker names,
// labelled with its Placement and cluster, held by the agent's finalizer, with
// the apply strategy the agents read.
func TestWorksFollowTheRevisionAndTheDecisions(t *testing.T) {
	f := newFixture(t, 2, placementv1alpha1.PlacementSpec{ApplyStrategy: &lodestarworkv1alpha1.ApplyStrategy{Type: lodestarworkv1alpha1.ApplyCreateOnly}})
	hash := f.render(configMap("a", 10), configMap("b", 10))
	f.decide(f.clusters...)
	eventually(f, func(g Gomega) {
		for _, c := range f.clusters {
			works := f.works(g, c)
			g.Expect(works).To(HaveLen(1))
			w := works[0]
			g.Expect(w.Name).To(Equal(names.Work(f.ns, "web")))
			g.Expect(w.Labels).To(And(HaveKeyWithValue(placementv1alpha1.PlacementNameLabel, "web"),
				HaveKeyWithValue(placementv1alpha1.PlacementNamespaceLabel, f.ns), HaveKeyWithValue(placementv1alpha1.ClusterLabel, c),
				Not(HaveKey(placementv1alpha1.WorkPartLabel))))
			g.Expect(w.Annotations).To(And(HaveKeyWithValue(placementv1alpha1.RevisionAnnotation, hash),
				HaveKey(placementv1alpha1.RevisionSinceAnnotation), Not(HaveKey(placementv1alpha1.WorkPartsAnnotation)),
				HaveKeyWithValue(lodestarworkv1alpha1.ApplyStrategyAnnotation, ContainSubstring(`"type":"CreateOnly"`))))
			g.Expect(w.Finalizers).To(ContainElement(lodestarworkv1alpha1.WorkFinalizer))
			g.Expect(w.Spec.Workload.Manifests).To(HaveLen(2))
		}
		c := f.condition(g, placementv1alpha1.WorkSynchronizedCondition)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonWorkSynchronized), c.Message)
	})

	// A Work's finalizer is the agent's: a Work without it (released by the
	// agent, say) does not get it back from the work generator.
	w := f.works(f.g, f.clusters[0])[0]
	f.g.Expect(hubCP.Client.Patch(t.Context(), &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: w.Namespace}},
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))).To(Succeed())
	next := f.render(configMap("a", 10), configMap("b", 11))
	eventually(f, func(g Gomega) {
		g.Expect(f.revisionOn(g, f.clusters[0])).To(Equal(next))
		g.Expect(f.works(g, f.clusters[0])[0].Finalizers).To(BeEmpty())
	})
}

// A revision larger than a Work goes to each cluster as several Works, each
// within the limit; when it fits in one again, the parts beyond go once the
// first reports its objects applied.
func TestRevisionsLargerThanAWorkAreSplit(t *testing.T) {
	f := newFixture(t, 1, placementv1alpha1.PlacementSpec{})
	c := f.clusters[0]
	big := f.render(configMap("a", 500<<10), configMap("b", 500<<10), configMap("c", 10))
	f.decide(c)
	eventually(f, func(g Gomega) {
		works := f.works(g, c)
		g.Expect(works).To(HaveLen(2))
		for i, w := range works {
			g.Expect(w.Name).To(Equal(names.WorkPart(f.ns, "web", i)))
			g.Expect(w.Annotations).To(And(HaveKeyWithValue(placementv1alpha1.RevisionAnnotation, big), HaveKeyWithValue(placementv1alpha1.WorkPartsAnnotation, "2")))
			size := 0
			for _, m := range w.Spec.Workload.Manifests {
				size += len(m.Raw) + 1
			}
			g.Expect(size).To(BeNumerically("<=", render.MaxManifestBytes))
		}
		g.Expect(works[1].Labels).To(HaveKeyWithValue(placementv1alpha1.WorkPartLabel, "1"))
	})

	small := f.render(configMap("a", 10))
	eventually(f, func(g Gomega) {
		works := f.works(g, c)
		g.Expect(works[0].Annotations).To(And(HaveKeyWithValue(placementv1alpha1.RevisionAnnotation, small), Not(HaveKey(placementv1alpha1.WorkPartsAnnotation))))
	})
	never(f, func(g Gomega) {
		g.Expect(live(f.works(g, c))).To(HaveLen(2), "part 1 stays while part 0 has not applied the new revision")
	})
	f.reportAvailable(c)
	eventually(f, func(g Gomega) {
		g.Expect(live(f.works(g, c))).To(HaveLen(1), "part 1 is deleted (its agent, not running here, would then release it)")
	})
}

// A Rolling strategy gives the new revision to maxUnavailable clusters at a
// time, each until it reports its objects Available.
func TestRollingGivesTheRevisionToFewClustersAtATime(t *testing.T) {
	f := newFixture(t, 2, placementv1alpha1.PlacementSpec{Strategy: placementv1alpha1.RolloutStrategy{Type: placementv1alpha1.RolloutRolling,
		Rolling: &placementv1alpha1.RollingStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxSurge: ptr.To(intstr.FromInt32(0))}}})
	first := f.render(configMap("a", 10))
	f.decide(f.clusters...)
	eventually(f, func(g Gomega) {
		for _, c := range f.clusters {
			g.Expect(f.revisionOn(g, c)).To(Equal(first))
		}
	})
	for _, c := range f.clusters {
		f.reportAvailable(c)
	}
	second := f.render(configMap("a", 20))
	updated := func(g Gomega) []string {
		var out []string
		for _, c := range f.clusters {
			if f.revisionOn(g, c) == second {
				out = append(out, c)
			}
		}
		return out
	}
	eventually(f, func(g Gomega) { g.Expect(updated(g)).To(HaveLen(1)) })
	never(f, func(g Gomega) { g.Expect(updated(g)).To(HaveLen(1), "one cluster at a time") })
	f.reportAvailable(updated(f.g)[0])
	eventually(f, func(g Gomega) { g.Expect(updated(g)).To(HaveLen(2)) })
}

// A cluster the decisions leave keeps its Work until the cluster added in its
// place reports the objects Available: make-before-break.
func TestALeftClusterGoesOnceItsReplacementIsAvailable(t *testing.T) {
	f := newFixture(t, 2, placementv1alpha1.PlacementSpec{})
	old, replacement := f.clusters[0], f.clusters[1]
	f.render(configMap("a", 10))
	f.decide(old)
	eventually(f, func(g Gomega) { g.Expect(f.works(g, old)).To(HaveLen(1)) })
	f.reportAvailable(old)

	f.decide(replacement)
	eventually(f, func(g Gomega) {
		g.Expect(f.works(g, replacement)).To(HaveLen(1))
		g.Expect(f.works(g, old)[0].Annotations).To(HaveKey(placementv1alpha1.LeavingSinceAnnotation))
	})
	never(f, func(g Gomega) {
		g.Expect(f.works(g, old)).To(HaveLen(1), "kept while its replacement is not Available")
	})
	f.reportAvailable(replacement)
	eventually(f, func(g Gomega) {
		for _, w := range f.works(g, old) {
			g.Expect(w.DeletionTimestamp).NotTo(BeNil(), "deleted once the replacement is Available")
		}
	})
}

// When the revision maker cannot render the Placement's current spec, the
// Works keep what they hold and WorkSynchronized says so.
func TestNothingChangesWhileTheSpecCannotBeRendered(t *testing.T) {
	f := newFixture(t, 2, placementv1alpha1.PlacementSpec{})
	c := f.clusters[0]
	hash := f.render(configMap("a", 10))
	f.decide(c)
	eventually(f, func(g Gomega) { g.Expect(f.revisionOn(g, c)).To(Equal(hash)) })

	f.setRendered(metav1.ConditionFalse, placementv1alpha1.ReasonInvalidOverride, names.Revision("web", hash))
	eventually(f, func(g Gomega) {
		g.Expect(f.condition(g, placementv1alpha1.WorkSynchronizedCondition).Reason).To(Equal(placementv1alpha1.ReasonNotRendered))
	})
	f.decide(f.clusters[1])
	never(f, func(g Gomega) {
		g.Expect(live(f.works(g, c))).To(HaveLen(1), "not even a left cluster goes")
		g.Expect(f.works(g, f.clusters[1])).To(BeEmpty(), "nor is a new one given the objects")
	})
}

// live are the Works not being deleted.
func live(works []*workv1alpha1.Work) []*workv1alpha1.Work {
	var out []*workv1alpha1.Work
	for _, w := range works {
		if w.DeletionTimestamp.IsZero() {
			out = append(out, w)
		}
	}
	return out
}

// A deleted Placement's Works go first; once the members have released them
// the Placement goes with its finalizer. Its revisions and decisions are
// their makers' to delete (or the garbage collector's): the work generator
// deletes nothing else (this suite runs none of them, nor a garbage collector).
func TestADeletedPlacementGoesOnceItsWorksAreGone(t *testing.T) {
	f := newFixture(t, 1, placementv1alpha1.PlacementSpec{})
	f.render(configMap("a", 10))
	f.decide(f.clusters...)
	eventually(f, func(g Gomega) { g.Expect(f.works(g, f.clusters[0])).To(HaveLen(1)) })
	ctx := t.Context()
	f.g.Expect(hubCP.Client.Delete(ctx, f.placement)).To(Succeed())
	eventually(f, func(g Gomega) {
		works := f.works(g, f.clusters[0])
		g.Expect(works).To(HaveLen(1))
		g.Expect(works[0].DeletionTimestamp).NotTo(BeNil())
	})
	// The agent releases the Work once the member is clean.
	w := f.works(f.g, f.clusters[0])[0]
	f.g.Expect(hubCP.Client.Patch(ctx, &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: w.Namespace}},
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))).To(Succeed())
	eventually(f, func(g Gomega) {
		err := hubCP.Client.Get(ctx, client.ObjectKeyFromObject(f.placement), &placementv1alpha1.Placement{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Placement is gone: %v", err)
	})
	revs := &placementv1alpha1.PlacementRevisionList{}
	f.g.Expect(hubCP.Client.List(ctx, revs, client.InNamespace(f.ns))).To(Succeed())
	f.g.Expect(revs.Items).To(HaveLen(1), "the revision maker's to delete")
}

// Works carry their hub manager's name, and the manager caches only those: a
// Work of the Placement an older manager wrote without the label (its cache
// does not show it) is taken over, labelled, and brought to the revision.
func TestWorksCarryTheirManagerAndOldOnesAreAdopted(t *testing.T) {
	f := newFixture(t, 2, placementv1alpha1.PlacementSpec{})
	hash := f.render(configMap("a", 10))
	old := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: names.Work(f.ns, "web"), Namespace: names.ClusterNamespace(f.clusters[1]),
		Labels:      map[string]string{placementv1alpha1.PlacementNameLabel: "web", placementv1alpha1.PlacementNamespaceLabel: f.ns},
		Annotations: map[string]string{placementv1alpha1.RevisionAnnotation: hash}}}
	f.g.Expect(hubCP.Client.Create(t.Context(), old)).To(Succeed())
	f.decide(f.clusters...)
	eventually(f, func(g Gomega) {
		for _, c := range f.clusters {
			works := f.works(g, c)
			g.Expect(works).To(HaveLen(1))
			g.Expect(works[0].Labels).To(HaveKeyWithValue(placementv1alpha1.HubManagerLabel, placementv1alpha1.DefaultHubManager))
			g.Expect(works[0].Annotations).To(HaveKeyWithValue(placementv1alpha1.RevisionAnnotation, hash))
			g.Expect(works[0].Spec.Workload.Manifests).To(HaveLen(1))
		}
	})
}
