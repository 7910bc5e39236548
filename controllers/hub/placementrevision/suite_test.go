package placementrevision_test

import (
	"context"
	"os"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/hub"
	"github.com/lodestar-dev/lodestar/controllers/hub/placementrevision"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/render"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

var hubCP *testenv.ControlPlane

// clusterSet is the cluster-set namespace of this package's tenants.
const clusterSet = "placementrevision-test-set"

func TestMain(m *testing.M) {
	// The package's Gomega defaults, sized for a busy 2-core CI machine.
	testenv.SetGomegaDefaults()
	os.Exit(testenv.HubSuite(m, hub.ManagerOptions(ctrl.Options{}, ""), clusterSet, &hubCP, startRevisionMaker))
}

// startRevisionMaker runs only the revision maker on the hub.
func startRevisionMaker(mgr ctrl.Manager) error {
	disc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return err
	}
	return (&placementrevision.Reconciler{
		Client: mgr.GetClient(), Cache: mgr.GetCache(), Mapper: mgr.GetRESTMapper(), Discovery: disc,
		Recorder: mgr.GetEventRecorder(placementrevision.Name), Scope: lookup.Scope{Sets: []string{clusterSet}},
	}).SetupWithManager(mgr)
}

// The revision maker renders what a Placement selects into a
// PlacementRevision named in status.revision; an edit of a selected object is
// the next revision, an edit that changes nothing placed is none, and a
// revision whose content comes back is the old one again (no new number).
func TestRevisionsFollowTheSelectedObjects(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, err := testenv.NewTenant(ctx, hubCP.Client, clusterSet)
	g.Expect(err).NotTo(HaveOccurred())
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}, Data: map[string]string{"color": "blue"}}
	g.Expect(hubCP.Client.Create(ctx, cm)).To(Succeed())
	p := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: placementv1alpha1.PlacementSpec{
		ResourceSelectors: []placementv1alpha1.ResourceSelector{{Version: "v1", Kind: "ConfigMap", Name: "settings"}},
	}}
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())

	current := func(g Gomega) placementv1alpha1.PlacementRevision {
		got := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, placementv1alpha1.RenderedCondition)).To(BeTrue())
		rev := placementv1alpha1.PlacementRevision{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: got.Status.Revision}, &rev)).To(Succeed())
		return rev
	}
	data := func(g Gomega, rev placementv1alpha1.PlacementRevision) string {
		manifests, err := render.RevisionManifests(&rev.Spec)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(manifests).To(HaveLen(1))
		return string(manifests[0].Raw)
	}
	var first placementv1alpha1.PlacementRevision
	g.Eventually(func(g Gomega) {
		first = current(g)
		g.Expect(first.Spec.Revision).To(BeEquivalentTo(1))
		g.Expect(metav1.IsControlledBy(&first, p)).To(BeTrue(), "controlled by its Placement")
		g.Expect(data(g, first)).To(ContainSubstring(`"color":"blue"`))
	}).Should(Succeed())

	// An edit of the object: revision 2.
	g.Expect(hubCP.Client.Patch(ctx, cm, client.RawPatch("application/merge-patch+json", []byte(`{"data":{"color":"green"}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		rev := current(g)
		g.Expect(rev.Spec.Revision).To(BeEquivalentTo(2))
		g.Expect(data(g, rev)).To(ContainSubstring(`"color":"green"`))
	}).Should(Succeed())

	// An edit back to blue is revision 1's content again.
	g.Expect(hubCP.Client.Patch(ctx, cm, client.RawPatch("application/merge-patch+json", []byte(`{"data":{"color":"blue"}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		rev := current(g)
		g.Expect(rev.Spec.Hash).To(Equal(first.Spec.Hash))
		g.Expect(data(g, rev)).To(ContainSubstring(`"color":"blue"`))
	}).Should(Succeed())
	list := &placementv1alpha1.PlacementRevisionList{}
	g.Expect(hubCP.Client.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
	g.Expect(list.Items).To(HaveLen(2), "the old content is the old revision, not a third")
}

// A deleted Placement's revisions go with it, on a hub without a garbage
// collector too (this suite's runs none); another Placement's stay.
func TestRevisionsGoWithTheirPlacement(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, err := testenv.NewTenant(ctx, hubCP.Client, clusterSet)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hubCP.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}})).To(Succeed())
	for _, name := range []string{"web", "api"} {
		g.Expect(hubCP.Client.Create(ctx, &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{{Version: "v1", Kind: "ConfigMap", Name: "settings"}},
		}})).To(Succeed())
	}
	revisionsOf := func(g Gomega, name string) []placementv1alpha1.PlacementRevision {
		list := &placementv1alpha1.PlacementRevisionList{}
		g.Expect(hubCP.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		var out []placementv1alpha1.PlacementRevision
		for _, rv := range list.Items {
			if rv.Spec.Placement == name {
				out = append(out, rv)
			}
		}
		return out
	}
	g.Eventually(func(g Gomega) {
		g.Expect(revisionsOf(g, "web")).To(HaveLen(1))
		g.Expect(revisionsOf(g, "api")).To(HaveLen(1))
	}).Should(Succeed())
	g.Expect(hubCP.Client.Delete(ctx, &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}})).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(revisionsOf(g, "web")).To(BeEmpty()) }).Should(Succeed())
	g.Expect(revisionsOf(g, "api")).To(HaveLen(1))
}

// A revision's data Secret (written with every new revision of a Placement
// that holds Secrets) wakes only the Placement that owns it, however many
// select every Secret of the namespace: one tenant's Placements of every
// Secret would otherwise look at every one of them again for each revision
// any of them makes. Any other Secret of the namespace still wakes them all.
func TestRevisionDataWakesOnlyItsPlacement(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, err := testenv.NewTenant(ctx, hubCP.Client, clusterSet)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(testenv.CreateYAML(ctx, hubCP.Client, ns, `apiVersion: v1
kind: Secret
metadata:
  name: token
stringData: {token: s3cret}
---
apiVersion: placement.lodestar.dev/v1alpha1
kind: Placement
metadata:
  name: every-secret
spec:
  resourceSelectors:
    - {version: v1, kind: Secret}
`)).To(Succeed())
	secrets := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	var data, token *unstructured.Unstructured
	g.Eventually(func(g Gomega) {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(secrets.GroupVersion().WithKind("SecretList"))
		g.Expect(hubCP.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		data, token = nil, nil
		for i := range list.Items {
			switch {
			case list.Items[i].GetName() == "token":
				token = &list.Items[i]
			case list.Items[i].Object["type"] == placementv1alpha1.RevisionDataSecretType:
				data = &list.Items[i]
			}
		}
		g.Expect(data).NotTo(BeNil(), "the revision's data Secret")
		g.Expect(token).NotTo(BeNil())
	}).Should(Succeed())
	maker := &placementrevision.Reconciler{Client: hubCP.Client}
	// Only its owner, which writes it again if someone changed it.
	g.Expect(maker.PlacementsSelecting(ctx, secrets, data)).To(ConsistOf(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "every-secret"}}))
	// A second Placement of every Secret: woken by the Secret, not by the first one's data.
	g.Expect(testenv.CreateYAML(ctx, hubCP.Client, ns, `apiVersion: placement.lodestar.dev/v1alpha1
kind: Placement
metadata:
  name: every-secret-too
spec:
  resourceSelectors:
    - {version: v1, kind: Secret}
`)).To(Succeed())
	g.Expect(maker.PlacementsSelecting(ctx, secrets, data)).To(ConsistOf(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "every-secret"}}))
	g.Expect(maker.PlacementsSelecting(ctx, secrets, token)).To(HaveLen(2))
}
