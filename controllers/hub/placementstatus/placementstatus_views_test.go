package placementstatus

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
)

// reportedWork is a Work of cluster at generation 2 whose agent reported a PVC
// Pending and a Deployment available with feedback.
func reportedWork(cluster string, ready string) workv1alpha1.Work {
	w := work(cluster, 2, 2, metav1.ConditionTrue)
	w.ResourceVersion = "1"
	cond := func(t string, st metav1.ConditionStatus, msg string) metav1.Condition {
		return metav1.Condition{Type: t, Status: st, Reason: "R", Message: msg, ObservedGeneration: 2}
	}
	w.Spec.Workload.Manifests = []workv1alpha1.Manifest{
		{RawExtension: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"uploads","namespace":"shop"}}`)}},
		{RawExtension: runtime.RawExtension{Raw: []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"api","namespace":"shop"}}`)}},
	}
	w.Status.ManifestConditions = []workv1alpha1.ManifestCondition{
		{Identifier: workv1alpha1.ResourceIdentifier{Version: "v1", Kind: "PersistentVolumeClaim", Namespace: "shop", Name: "uploads"}, Conditions: []metav1.Condition{
			cond(lodestarworkv1alpha1.ConditionApplied, metav1.ConditionTrue, "applied"),
			cond(lodestarworkv1alpha1.ConditionAvailable, metav1.ConditionFalse, "the claim is Pending"),
		}},
		{Identifier: workv1alpha1.ResourceIdentifier{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "shop", Name: "api", Ordinal: 1}, Conditions: []metav1.Condition{
			cond(lodestarworkv1alpha1.ConditionApplied, metav1.ConditionTrue, "applied"),
			cond(lodestarworkv1alpha1.ConditionAvailable, metav1.ConditionTrue, "3 of 3 replicas available"),
			cond(lodestarworkv1alpha1.ConditionStatusFeedback, metav1.ConditionTrue, `{"values":{"ready":`+ready+`,"lodestar.generation":1}}`),
		}},
	}
	w.Status.Conditions = append(w.Status.Conditions, cond(lodestarworkv1alpha1.ConditionAvailable, metav1.ConditionFalse, "1 of 2 manifests not available"))
	return w
}

func TestDescribeNamesTheObjects(t *testing.T) {
	g := NewWithT(t)
	works := []workv1alpha1.Work{reportedWork("a", "3")}
	agg := Aggregate([]string{"a"}, works, false, nil)
	vs := byCluster((&views{}).refresh(placementKey, works))
	agg.describe(vs)

	g.Expect(agg.Clusters).To(HaveLen(1))
	cs := agg.Clusters[0]
	g.Expect(cs.Reasons).To(Equal([]string{"PersistentVolumeClaim shop/uploads: the claim is Pending"}))
	g.Expect(cs.Objects).To(HaveLen(2))
	g.Expect(cs.Objects[0]).To(And(HaveField("Kind", "PersistentVolumeClaim"), HaveField("State", placementv1alpha1.ObjectProgressing), HaveField("Feedback", BeNil())))
	g.Expect(cs.Objects[1]).To(And(HaveField("Kind", "Deployment"), HaveField("State", placementv1alpha1.ObjectAvailable), HaveField("Message", "")))
	g.Expect(string(cs.Objects[1].Feedback.Raw)).To(Equal(`{"ready":3}`), "without the values status reflection reads")
	g.Expect(agg.AvailableCondition.Message).To(Equal("0 of 1 cluster available; not yet: a (a: PersistentVolumeClaim shop/uploads: the claim is Pending)"))
}

func TestViewsAreKeptWhileWorksDoNotChange(t *testing.T) {
	g := NewWithT(t)
	vs := &views{}
	w := reportedWork("a", "3")
	key := w.Namespace + "/" + w.Name
	first := vs.refresh(placementKey, []workv1alpha1.Work{w})
	again := vs.refresh(placementKey, []workv1alpha1.Work{reportedWork("a", "3")})
	g.Expect(again[key]).To(BeIdenticalTo(first[key]), "not decoded again")
	changed := reportedWork("a", "1")
	changed.ResourceVersion = "2"
	third := vs.refresh(placementKey, []workv1alpha1.Work{changed})
	g.Expect(third[key].objects[1].values).To(HaveKey("ready"))
	g.Expect(third[key]).NotTo(BeIdenticalTo(first[key]))
	vs.forget(placementKey)
	g.Expect(vs.byPlacement).To(BeEmpty())
}

func TestSummaryInputCountsStaleClusters(t *testing.T) {
	g := NewWithT(t)
	p := &placementv1alpha1.Placement{Spec: placementv1alpha1.PlacementSpec{
		Reporting: placementv1alpha1.Reporting{Feedback: []lodestarworkv1alpha1.FeedbackRule{
			{Group: "apps", Kind: "Deployment", Fields: []lodestarworkv1alpha1.FeedbackField{{Name: "ready", JSONPath: ".status.readyReplicas"}}},
		}},
	}}
	s := placementv1alpha1.StatusSummary{Name: "ready", Operation: placementv1alpha1.SummarySum, Value: "ready", Resource: placementv1alpha1.SummaryResource{Group: "apps", Kind: "Deployment"}}
	works := []workv1alpha1.Work{reportedWork("a", "3"), reportedWork("b", "2"), reportedWork("c", "5")}
	works[2].Status.ManifestConditions[1].Conditions[0].ObservedGeneration = 1 // c reports an older generation
	vs := byCluster((&views{}).refresh(placementKey, works))

	in := summaryInput(s, p, []string{"a", "b", "c", "d"}, vs, nil)
	g.Expect(in.Err).NotTo(HaveOccurred())
	g.Expect(in.Observations).To(HaveLen(2))
	g.Expect(in.Stale).To(Equal(2), "c is behind, d has no Work")

	s.Value = "replicas"
	g.Expect(summaryInput(s, p, []string{"a"}, vs, nil).Err).To(MatchError(`no spec.reporting.feedback rule of Deployment.apps reports "replicas" (it reports [ready])`))
	s.Resource.Kind = "StatefulSet"
	g.Expect(summaryInput(s, p, []string{"a"}, vs, nil).Err).To(MatchError("no spec.reporting.feedback rule reports values of StatefulSet.apps"))
}

var placementKey = types.NamespacedName{Namespace: "shop", Name: "p"}

// A report counts only for the manifest at its ordinal, once, named as the
// manifest is: an agent cannot report objects its Work does not carry, report
// one twice, or rename one.
func TestReportsCountOnlyForTheWorksManifests(t *testing.T) {
	g := NewWithT(t)
	w := reportedWork("a", "3")
	good := w.Status.ManifestConditions
	forged := func(id workv1alpha1.ResourceIdentifier) workv1alpha1.ManifestCondition {
		return workv1alpha1.ManifestCondition{Identifier: id, Conditions: good[1].Conditions}
	}
	w.Status.ManifestConditions = append(good,
		forged(workv1alpha1.ResourceIdentifier{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "shop", Name: "payments", Ordinal: 1}),
		forged(workv1alpha1.ResourceIdentifier{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "shop", Name: "api", Ordinal: 1}),
		forged(workv1alpha1.ResourceIdentifier{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "shop", Name: "api", Ordinal: 7}),
		forged(workv1alpha1.ResourceIdentifier{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "shop", Name: "api", Ordinal: -1}))
	w.Status.ManifestConditions[1].Identifier.Version = "v0" // the manifest's own version is what counts
	v := viewOf(&w, nil)
	g.Expect(v.objects).To(HaveLen(2))
	g.Expect(v.objects[1].id).To(Equal(workv1alpha1.ResourceIdentifier{Ordinal: 1, Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "shop", Name: "api"}))

	// Feedback is read up to what the agent's budget lets it write.
	big := `{"values":{"ready":"` + strings.Repeat("x", maxFeedbackRead) + `"}}`
	w.Status.ManifestConditions[1].Conditions[2].Message = big
	g.Expect(viewOf(&w, nil).objects[1].values).To(BeNil())
}
