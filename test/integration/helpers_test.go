package integration

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/util/retry"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/hub/scheduler"
	"github.com/lodestar-dev/lodestar/internal/fleet"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// The package's Gomega defaults, sized for a busy CI machine (testenv).
func init() {
	testenv.SetGomegaDefaults()
}

// newNamespace creates a namespace of its own for a test on the hub, bound to the
// default cluster set.
func newNamespace(t *testing.T) string {
	t.Helper()
	return newTenant(t, placementv1alpha1.DefaultClusterSet)
}

// newTenant creates a namespace of its own for a test on the hub, bound to sets.
func newTenant(t *testing.T, sets ...string) string {
	t.Helper()
	g := NewWithT(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("test-%s", rand.String(6))}}
	g.Expect(hubCP.Client.Create(t.Context(), ns)).To(Succeed())
	for _, set := range sets {
		bind(t, ns.Name, set)
	}
	return ns.Name
}

// bind lets the Placements of ns use set, as a cluster-set admin does.
func bind(t *testing.T, ns, set string) {
	t.Helper()
	NewWithT(t).Expect(fleet.BindClusterSet(t.Context(), hubCP.Client, ns, set)).To(Succeed())
}

// updateOnHub reads obj (by its name) from the hub, changes it with mutate and
// updates it, again when the controllers or agents changed it meanwhile (they
// write the status of Works, Placements and ClusterProfiles all the time).
func updateOnHub[T client.Object](obj T, mutate func(T)) error {
	return updateWith(hubCP.Client, obj, mutate)
}

// updateWith is updateOnHub through another client (an agent's identity).
func updateWith[T client.Object](c client.Client, obj T, mutate func(T)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		mutate(obj)
		return c.Update(context.Background(), obj)
	})
}

// setClusterLabels replaces the labels of a member's ClusterProfile (keeping the
// cluster-manager label) and restores them when the test ends.
func setClusterLabels(t *testing.T, cluster string, labels map[string]string) {
	t.Helper()
	g := NewWithT(t)
	key := client.ObjectKey{Namespace: scheduler.DefaultClusterSetNamespace, Name: cluster}
	profile := &cpv1alpha1.ClusterProfile{}
	g.Expect(hubCP.Client.Get(t.Context(), key, profile)).To(Succeed())
	original := profile.Labels
	write := func(l map[string]string) error {
		return updateOnHub(&cpv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}},
			func(p *cpv1alpha1.ClusterProfile) { p.Labels = l })
	}
	want := map[string]string{cpv1alpha1.LabelClusterManagerKey: scheduler.ClusterManagerName}
	for k, v := range labels {
		want[k] = v
	}
	g.Expect(write(want)).To(Succeed())
	t.Cleanup(func() {
		if err := write(original); err != nil {
			t.Errorf("restoring the labels of %s: %v", cluster, err)
		}
	})
}

// placementCondition returns the Placement's condition of type t, failing g when
// it is absent.
func placementCondition(g Gomega, t *testing.T, key client.ObjectKey, ct string) *metav1.Condition {
	p := &placementv1alpha1.Placement{}
	g.Expect(hubCP.Client.Get(t.Context(), key, p)).To(Succeed())
	c := meta.FindStatusCondition(p.Status.Conditions, ct)
	g.Expect(c).NotTo(BeNil(), "no %s condition", ct)
	return c
}

// appliedKey is the key of a Work's AppliedWork on its member.
func appliedKey(w *workv1alpha1.Work) client.ObjectKey {
	return client.ObjectKey{Name: appliedName(w.Namespace, w.Name)}
}

// appliedName is the name of the AppliedWork of the Work name in workNamespace, as
// the agents of the test hub name it.
func appliedName(workNamespace, name string) string {
	return names.AppliedWork(testHubID(), workNamespace, name)
}

// testHubID is the test hub's identity as its agents derive it from its address.
func testHubID() string {
	return names.HubID(hubCP.Config.Host)
}

// firstManifestCondition reads a Work from the hub and returns the condition of
// type ct of its first manifest.
func firstManifestCondition(g Gomega, w *workv1alpha1.Work, ct string) *metav1.Condition {
	got := &workv1alpha1.Work{}
	g.Expect(hubCP.Client.Get(context.Background(), client.ObjectKeyFromObject(w), got)).To(Succeed())
	return manifestCondition(g, got, 0, ct)
}
