package placementstatus_test

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
)

// The aggregator folds every decided cluster's Works into one entry per
// cluster: a cluster in two Works is available only when both parts are, and
// names the object that is not; the counts and conditions follow.
func TestStatusFoldsEachClustersWorks(t *testing.T) {
	f := newFixture(t, 2, placementv1alpha1.PlacementSpec{})
	whole, split := f.clusters[0], f.clusters[1]
	f.work(whole, 0, 1, objectReport{name: "web", available: true})
	f.work(split, 0, 2, objectReport{name: "web", available: true})
	f.work(split, 1, 2, objectReport{name: "api", available: false, message: "1 of 3 replicas available"})
	f.g.Eventually(func(g Gomega) {
		st := f.status(g)
		g.Expect(st.Clusters).To(HaveLen(2), "one entry per cluster")
		g.Expect(st.AppliedClusters).To(HaveValue(BeEquivalentTo(2)))
		g.Expect(st.AvailableClusters).To(HaveValue(BeEquivalentTo(1)))
		g.Expect(meta.IsStatusConditionTrue(st.Conditions, placementv1alpha1.AppliedCondition)).To(BeTrue())
		available := meta.FindStatusCondition(st.Conditions, placementv1alpha1.AvailableCondition)
		g.Expect(available).NotTo(BeNil())
		g.Expect(available.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(available.Message).To(ContainSubstring("1 of 2 clusters available; not yet: " + split))
		for _, cs := range st.Clusters {
			if cs.Name != split {
				g.Expect(cs.Available).To(Equal(metav1.ConditionTrue))
				continue
			}
			g.Expect(cs.Available).To(Equal(metav1.ConditionFalse))
			g.Expect(cs.Work).To(Equal(f.ns+".web"), "named by its first Work")
			g.Expect(cs.Reasons).To(ConsistOf("Deployment app/api: 1 of 3 replicas available"))
			g.Expect(cs.Objects).To(ConsistOf(And(HaveField("Name", "api"), HaveField("State", placementv1alpha1.ObjectProgressing))))
		}
	}).Should(Succeed())
}

// Feedback of every part is summed over the fleet.
func TestSummariesReadEveryPart(t *testing.T) {
	f := newFixture(t, 2, placementv1alpha1.PlacementSpec{Reporting: placementv1alpha1.Reporting{
		Feedback: []lodestarworkv1alpha1.FeedbackRule{{Group: "apps", Kind: "Deployment",
			Fields: []lodestarworkv1alpha1.FeedbackField{{Name: "ready", JSONPath: ".status.readyReplicas"}}}},
		Summaries: []placementv1alpha1.StatusSummary{{Name: "ready", Resource: placementv1alpha1.SummaryResource{Group: "apps", Kind: "Deployment"},
			Value: "ready", Operation: placementv1alpha1.SummarySum}},
	}})
	f.work(f.clusters[0], 0, 1, objectReport{name: "web", available: true, feedback: map[string]any{"ready": 2}})
	f.work(f.clusters[1], 0, 2, objectReport{name: "web", available: true, feedback: map[string]any{"ready": 3}})
	f.work(f.clusters[1], 1, 2, objectReport{name: "api", available: true, feedback: map[string]any{"ready": 4}})
	f.g.Eventually(func(g Gomega) {
		st := f.status(g)
		g.Expect(st.Summaries).To(ConsistOf(And(HaveField("Name", "ready"), HaveField("Value", "9"), HaveField("Count", HaveValue(BeEquivalentTo(3))))))
	}).Should(Succeed())
}
