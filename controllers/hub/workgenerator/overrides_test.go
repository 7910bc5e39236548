package workgenerator_test

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/metrics"
)

// A revision's override rules are evaluated once per cluster view: reconciles
// that change nothing a rule reads (agents reporting status) evaluate nothing,
// and a cluster whose labels change is evaluated again, alone.
func TestOverridesAreEvaluatedOncePerClusterView(t *testing.T) {
	overrides := []placementv1alpha1.Override{{Name: "where", JSONPatch: []placementv1alpha1.JSONPatchOperation{{
		Op: "add", Path: "/data/where", ValueExpression: "cluster.name + '/' + ('region' in cluster.labels ? cluster.labels['region'] : 'none')"}}}}
	f := newFixture(t, 2, placementv1alpha1.PlacementSpec{Overrides: overrides})
	before := testutil.ToFloat64(metrics.OverrideEvaluations)
	hash := f.renderWith(overrides, configMap("a", 10))
	f.decide(f.clusters...)
	where := func(g Gomega, cluster string) string {
		works := f.works(g, cluster)
		g.Expect(works).To(HaveLen(1))
		var cm struct{ Data map[string]string }
		g.Expect(json.Unmarshal(works[0].Spec.Workload.Manifests[0].Raw, &cm)).To(Succeed())
		return cm.Data["where"]
	}
	eventually(f, func(g Gomega) {
		for _, c := range f.clusters {
			g.Expect(f.revisionOn(g, c)).To(Equal(hash))
			g.Expect(where(g, c)).To(Equal(c + "/none"))
		}
	})
	g := f.g
	g.Expect(testutil.ToFloat64(metrics.OverrideEvaluations) - before).To(BeEquivalentTo(2))

	// Agents report: the Placement is reconciled again, and nothing is evaluated.
	for _, c := range f.clusters {
		f.reportAvailable(c)
	}
	eventually(f, func(g Gomega) {
		c := f.condition(g, placementv1alpha1.WorkSynchronizedCondition)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonWorkSynchronized), c.Message)
		g.Expect(f.condition(g, placementv1alpha1.ProgressingCondition).Reason).To(Equal(placementv1alpha1.ReasonRolloutComplete))
	})
	g.Expect(testutil.ToFloat64(metrics.OverrideEvaluations) - before).To(BeEquivalentTo(2))

	// One cluster's view changes: it alone is evaluated again.
	g.Expect(hubCP.Client.Patch(t.Context(), &cpv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Namespace: clusterSet, Name: f.clusters[0]}},
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"region":"eu"}}}`)))).To(Succeed())
	eventually(f, func(g Gomega) { g.Expect(where(g, f.clusters[0])).To(Equal(f.clusters[0] + "/eu")) })
	g.Expect(testutil.ToFloat64(metrics.OverrideEvaluations) - before).To(BeEquivalentTo(3))
}
