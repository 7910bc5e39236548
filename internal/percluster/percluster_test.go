package percluster

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/division"
	"github.com/lodestar-dev/lodestar/internal/metrics"
	"github.com/lodestar-dev/lodestar/internal/render"
	"github.com/lodestar-dev/lodestar/internal/scheduling"
)

func deployment(replicas int) runtime.RawExtension {
	b, _ := json.Marshal(map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "web", "namespace": "shop"},
		"spec": map[string]any{"replicas": replicas, "template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "nginx"}}}}}})
	return runtime.RawExtension{Raw: b}
}

func replicasOf(g Gomega, c Content) (int, string) {
	var d struct {
		Metadata struct{ Labels map[string]string }
		Spec     struct{ Replicas int }
	}
	g.Expect(c.Manifests).To(HaveLen(1))
	g.Expect(json.Unmarshal(c.Manifests[0].Raw, &d)).To(Succeed())
	return d.Spec.Replicas, d.Metadata.Labels["where"]
}

func revision(manifests []runtime.RawExtension, ov []placementv1alpha1.Override, div *placementv1alpha1.ReplicaDivision) *placementv1alpha1.PlacementRevision {
	rev := &placementv1alpha1.PlacementRevision{Spec: placementv1alpha1.PlacementRevisionSpec{Hash: "h1", Overrides: ov, Division: div}}
	if err := render.SetRevisionManifests(&rev.Spec, manifests); err != nil {
		panic(err)
	}
	return rev
}

// What a cluster gets: the revision as it is, its share of a division, then
// its overrides; the rules are evaluated once per cluster view across
// renderers (reconciles), and an override that fails fails that cluster only.
func TestForIsShareThenOverrides(t *testing.T) {
	g := NewWithT(t)
	key := types.NamespacedName{Namespace: "shop", Name: "web"}
	views := map[string]scheduling.Cluster{
		"eu": {Name: "eu", Labels: map[string]string{"region": "eu"}},
		"us": {Name: "us", Labels: map[string]string{"region": "us"}},
	}
	where := []placementv1alpha1.Override{{Name: "where", JSONPatch: []placementv1alpha1.JSONPatchOperation{{
		Op: "add", Path: "/metadata/labels", ValueExpression: "{'where': cluster.labels['region']}"}}}}
	compiled := &Compiled{}

	// Plain: the revision as it is.
	rd := NewRenderer(key, compiled, views)
	plain, err := rd.Revision(revision([]runtime.RawExtension{deployment(4)}, nil, nil))
	g.Expect(err).NotTo(HaveOccurred())
	got, err := rd.For(plain, "eu")
	g.Expect(err).NotTo(HaveOccurred())
	n, w := replicasOf(g, got)
	g.Expect(n).To(Equal(4))
	g.Expect(w).To(BeEmpty())

	// Divided over two clusters, then overridden per cluster.
	before := testutil.ToFloat64(metrics.OverrideEvaluations)
	for range 2 { // two reconciles: the rules run once per view
		rd = NewRenderer(key, compiled, views)
		c, err := rd.Revision(revision([]runtime.RawExtension{deployment(4)}, where, &placementv1alpha1.ReplicaDivision{}))
		g.Expect(err).NotTo(HaveOccurred())
		d := NewDivider("uid", &division.Memo{}, []Chosen{{Candidate: division.Candidate{Name: "eu"}}, {Candidate: division.Candidate{Name: "us"}}}, nil)
		rd.Divide(d)
		d.Settle(c)
		g.Expect(rd.Surging()).To(BeTrue(), "nothing carried yet: no share is lowered before every cluster carries its own")
		total := 0
		for _, cluster := range []string{"eu", "us"} {
			got, err := rd.For(c, cluster)
			g.Expect(err).NotTo(HaveOccurred())
			n, w := replicasOf(g, got)
			g.Expect(w).To(Equal(cluster))
			g.Expect(got.Shares).NotTo(BeEmpty())
			total += n
		}
		g.Expect(total).To(Equal(4))
	}
	g.Expect(testutil.ToFloat64(metrics.OverrideEvaluations) - before).To(BeEquivalentTo(2))

	// An override that fails fails only the cluster it fails on.
	bad := []placementv1alpha1.Override{{Name: "bad", JSONPatch: []placementv1alpha1.JSONPatchOperation{{
		Op: "replace", Path: "/spec/replicas", ValueExpression: "cluster.labels['region'] == 'us' ? 1 / 0 : 2"}}}}
	rd = NewRenderer(key, compiled, views)
	c, err := rd.Revision(func() *placementv1alpha1.PlacementRevision {
		r := revision([]runtime.RawExtension{deployment(4)}, bad, nil)
		r.Spec.Hash = "h2"
		return r
	}())
	g.Expect(err).NotTo(HaveOccurred())
	got, err = rd.For(c, "eu")
	g.Expect(err).NotTo(HaveOccurred())
	n, _ = replicasOf(g, got)
	g.Expect(n).To(Equal(2))
	_, err = rd.For(c, "us")
	g.Expect(OverrideFailure(err)).To(ContainSubstring("bad"))
	g.Expect(OverrideFailures(map[string]string{"us": OverrideFailure(err)}, 2)).To(HavePrefix("overrides fail on 1 of 2 clusters"))

	// Pruned revisions are forgotten.
	compiled.Keep(key, []string{"h2"})
	g.Expect(compiled.sets[key]).To(HaveLen(1))
	compiled.Forget(key)
	g.Expect(compiled.sets).NotTo(HaveKey(key))
}

// The case of a Capacity-divided Deployment after a drain and an uncordon:
// member-1 carries 5 of its target 3 (one pod without room: not Available),
// member-2 carries 3 of its target 2 (Available). Nothing increases anywhere,
// so nothing is waited for: both are lowered. A cluster whose share rises
// still holds the others until it is Available.
func TestSurgeFirstDoesNotWaitOnClustersThatOnlyGiveBack(t *testing.T) {
	g := NewWithT(t)
	key := types.NamespacedName{Namespace: "shop", Name: "web"}
	weights := &placementv1alpha1.ReplicaDivision{Method: placementv1alpha1.DivisionWeighted, Weights: []placementv1alpha1.ReplicaWeight{
		{ClusterNames: []string{"member-1"}, Weight: ptr.To[int32](3)}, {ClusterNames: []string{"member-2"}, Weight: ptr.To[int32](2)}}}
	divide := func(carried1, carried2 int64, available1, available2 bool) (int, int, bool) {
		rd := NewRenderer(key, &Compiled{}, nil)
		c, err := rd.Revision(revision([]runtime.RawExtension{deployment(5)}, nil, weights))
		g.Expect(err).NotTo(HaveOccurred())
		d := NewDivider("uid", &division.Memo{}, []Chosen{
			{Candidate: division.Candidate{Name: "member-1"}, Carried: map[string]int64{"Deployment/web": carried1}, HasWorks: true, Available: available1},
			{Candidate: division.Candidate{Name: "member-2"}, Carried: map[string]int64{"Deployment/web": carried2}, HasWorks: true, Available: available2},
		}, nil)
		rd.Divide(d)
		d.Settle(c)
		var got [2]int
		for i, cluster := range []string{"member-1", "member-2"} {
			out, err := rd.For(c, cluster)
			g.Expect(err).NotTo(HaveOccurred())
			got[i], _ = replicasOf(g, out)
		}
		return got[0], got[1], rd.Surging()
	}
	one, two, surging := divide(5, 3, false, true)
	g.Expect([]int{one, two}).To(Equal([]int{3, 2}), "both only give back: lowered")
	g.Expect(surging).To(BeFalse())

	// member-2 rises from 0 to 2 and is not Available yet: member-1 keeps 5.
	one, two, surging = divide(5, 2, false, false)
	g.Expect([]int{one, two}).To(Equal([]int{5, 2}))
	g.Expect(surging).To(BeTrue())
}
