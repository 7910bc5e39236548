package integration

import (
	"context"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
)

// A ClusterPlacement places a CRD, a ClusterRole and a whole namespace (its
// objects, not its Secret); a custom resource a tenant's Placement places waits
// for the CRD, saying why, and applies once the CRD is there. The
// ClusterPlacement reports the status of the Placement that carries it out, and
// deleting it removes what it placed.
func TestClusterPlacement(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	// member-1 runs a namespace controller: a placed namespace can go away.
	member := members[member1].Client

	// On the hub: a CRD, a ClusterRole, and a namespace with a ServiceAccount, a
	// ConfigMap and a Secret.
	group := "g" + rand.String(6) + ".example.com"
	crd := createWidgetCRD(t, hubCP.Client, group, apiextensionsv1.NamespaceScoped, "v1")
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "widget-reader-" + rand.String(5)},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{group}, Resources: []string{"widgets"}, Verbs: []string{"get", "list"}}}}
	g.Expect(hubCP.Client.Create(ctx, role)).To(Succeed())
	t.Cleanup(func() { _ = hubCP.Client.Delete(context.Background(), role) })
	whole := newTenant(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: whole}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: whole}, Data: map[string]string{"k": "v"}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "credentials", Namespace: whole}, StringData: map[string]string{"password": "x"}}
	for _, obj := range []client.Object{sa, cm, secret} {
		g.Expect(hubCP.Client.Create(ctx, obj)).To(Succeed())
	}

	// A tenant's Placement of a custom resource of the CRD, before the CRD is on
	// the member: it waits, and says why.
	tenant := newNamespace(t)
	widget := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w1", "namespace": tenant}, "spec": map[string]any{"size": int64(3)}}}
	g.Eventually(func() error { return hubCP.Client.Create(ctx, widget) }).Should(Succeed())
	crs := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "widgets", Namespace: tenant},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{{Group: group, Version: "v1", Kind: "Widget"}},
			Scheduling:        placementv1alpha1.Scheduling{ClusterNames: []string{member1}},
		}}
	g.Expect(hubCP.Client.Create(ctx, crs)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := clusterStatusOf(g, client.ObjectKeyFromObject(crs), member1)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Applied).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reasons).To(ContainElement(ContainSubstring("does not serve " + group)))
	}).Should(Succeed())

	cp := &placementv1alpha1.ClusterPlacement{
		ObjectMeta: metav1.ObjectMeta{Name: "platform-" + rand.String(5)},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{
				{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition", Name: crd.GetName()},
				{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: role.Name},
				{Version: "v1", Kind: "Namespace", Name: whole},
			},
			Scheduling:    placementv1alpha1.Scheduling{ClusterNames: []string{member1}},
			ApplyStrategy: &lodestarworkv1alpha1.ApplyStrategy{DeletionPolicy: lodestarworkv1alpha1.DeletionOrphan},
		},
	}
	g.Expect(hubCP.Client.Create(ctx, cp)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(member.Get(ctx, client.ObjectKey{Name: crd.GetName()}, crd.DeepCopy())).To(Succeed())
		g.Expect(member.Get(ctx, client.ObjectKeyFromObject(role), &rbacv1.ClusterRole{})).To(Succeed())
		g.Expect(member.Get(ctx, client.ObjectKey{Name: whole}, &corev1.Namespace{})).To(Succeed())
		g.Expect(member.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})).To(Succeed())
		g.Expect(member.Get(ctx, client.ObjectKeyFromObject(sa), &corev1.ServiceAccount{})).To(Succeed())

		got := &placementv1alpha1.ClusterPlacement{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(cp), got)).To(Succeed())
		applied := meta.FindStatusCondition(got.Status.Conditions, placementv1alpha1.AppliedCondition)
		g.Expect(applied).NotTo(BeNil())
		g.Expect(applied.Status).To(Equal(metav1.ConditionTrue), applied.Message)
		g.Expect(applied.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(got.Status.SelectedClusters).To(HaveValue(BeEquivalentTo(1)))
		g.Expect(got.Status.AppliedClusters).To(HaveValue(BeEquivalentTo(1)))
	}).Should(Succeed())
	err := member.Get(ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a whole namespace leaves its Secrets: %v", err)

	// Changes on the hub follow: a ClusterRole's rules, an object added to the
	// placed namespace.
	g.Expect(updateOnHub(role, func(r *rbacv1.ClusterRole) { r.Rules[0].Verbs = []string{"get", "list", "watch"} })).To(Succeed())
	added := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "added-later", Namespace: whole}, Data: map[string]string{"k": "v"}}
	g.Expect(hubCP.Client.Create(ctx, added)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &rbacv1.ClusterRole{}
		g.Expect(member.Get(ctx, client.ObjectKeyFromObject(role), got)).To(Succeed())
		g.Expect(got.Rules[0].Verbs).To(ConsistOf("get", "list", "watch"))
		g.Expect(member.Get(ctx, client.ObjectKeyFromObject(added), &corev1.ConfigMap{})).To(Succeed())
	}).Should(Succeed())

	// The custom resource follows its CRD.
	g.Eventually(func(g Gomega) {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(widget.GroupVersionKind())
		g.Expect(member.Get(ctx, client.ObjectKeyFromObject(widget), got)).To(Succeed())
		c := clusterStatusOf(g, client.ObjectKeyFromObject(crs), member1)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Applied).To(Equal(metav1.ConditionTrue))
	}).Should(Succeed())

	// A ClusterPlacement may not name a namespaced kind.
	bad := &placementv1alpha1.ClusterPlacement{ObjectMeta: metav1.ObjectMeta{Name: "bad-" + rand.String(5)},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{{Version: "v1", Kind: "ConfigMap"}},
			Scheduling:        placementv1alpha1.Scheduling{ClusterNames: []string{member1}},
		}}
	g.Expect(hubCP.Client.Create(ctx, bad)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &placementv1alpha1.ClusterPlacement{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(bad), got)).To(Succeed())
		c := meta.FindStatusCondition(got.Status.Conditions, placementv1alpha1.RenderedCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonInvalidResourceSelector))
		g.Expect(c.Message).To(ContainSubstring("a ClusterPlacement places cluster-scoped kinds and whole namespaces"))
	}).Should(Succeed())
	g.Expect(hubCP.Client.Delete(ctx, bad)).To(Succeed())

	// Deleting the ClusterPlacement removes its carrier and Works; with
	// deletionPolicy Orphan what it placed stays on the member, released.
	g.Expect(hubCP.Client.Delete(ctx, crs)).To(Succeed())
	g.Expect(hubCP.Client.Delete(ctx, cp)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := hubCP.Client.Get(ctx, client.ObjectKeyFromObject(cp), &placementv1alpha1.ClusterPlacement{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
		err = hubCP.Client.Get(ctx, client.ObjectKey{Namespace: placementv1alpha1.ClusterPlacementNamespace, Name: cp.Name}, &placementv1alpha1.Placement{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the carrier goes too: %v", err)
		g.Expect(workOf(g, &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: placementv1alpha1.ClusterPlacementNamespace, Name: cp.Name}}, member1)).To(BeNil())
	}).Should(Succeed())
	g.Expect(member.Get(ctx, client.ObjectKeyFromObject(role), &rbacv1.ClusterRole{})).To(Succeed(), "orphaned, not deleted")
}

// The ClusterPlacement namespace holds only carriers: a Placement there that the hub did not make is never adopted (nor
// changed, nor deleted) by a ClusterPlacement of its name, and a carrier whose
// ClusterPlacement is gone goes too.
func TestClusterPlacementCarriersOnly(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	name := "carrier-" + rand.String(5)
	spec := placementv1alpha1.PlacementSpec{
		ResourceSelectors: []placementv1alpha1.ResourceSelector{{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: "nothing-" + name}},
		Scheduling:        placementv1alpha1.Scheduling{ClusterNames: []string{member1}},
	}
	// Something that is not a carrier, in the way.
	carrierNamespace(t)
	squatter := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: placementv1alpha1.ClusterPlacementNamespace}, Spec: spec}
	g.Eventually(func() error { return hubCP.Client.Create(ctx, squatter) }).Should(Succeed())

	cp := &placementv1alpha1.ClusterPlacement{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	cp.Spec.Scheduling.ClusterNames = []string{member1, member2}
	g.Expect(hubCP.Client.Create(ctx, cp)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &placementv1alpha1.ClusterPlacement{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(cp), got)).To(Succeed())
		c := meta.FindStatusCondition(got.Status.Conditions, placementv1alpha1.ScheduledCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonCarrierInTheWay), c.Message)
		g.Expect(c.Message).To(ContainSubstring("is not a carrier the hub made"))
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		got := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(squatter), got)).To(Succeed())
		g.Expect(got.Annotations).NotTo(HaveKey(placementv1alpha1.ClusterPlacementAnnotation))
		g.Expect(got.Spec.Scheduling.ClusterNames).To(Equal([]string{member1}), "not adopted")
	}).Should(Succeed())
	g.Expect(hubCP.Client.Delete(ctx, cp)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := hubCP.Client.Get(ctx, client.ObjectKeyFromObject(cp), &placementv1alpha1.ClusterPlacement{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
	}).Should(Succeed())
	g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(squatter), &placementv1alpha1.Placement{})).To(Succeed(), "not deleted")
	g.Expect(hubCP.Client.Delete(ctx, squatter)).To(Succeed())

	// A carrier left without its ClusterPlacement goes.
	orphan := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "orphan-" + name, Namespace: placementv1alpha1.ClusterPlacementNamespace,
		Annotations: map[string]string{placementv1alpha1.ClusterPlacementAnnotation: "orphan-" + name}}, Spec: spec}
	g.Expect(hubCP.Client.Create(ctx, orphan)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := hubCP.Client.Get(ctx, client.ObjectKeyFromObject(orphan), &placementv1alpha1.Placement{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
	}).Should(Succeed())
}

// The control plane's and Lodestar's namespaces never become tenants: no
// ClusterSetBinding is made there, and a Placement there does not label them.
func TestReservedNamespacesAreNoTenants(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	err := hubCP.Client.Create(ctx, newBinding("kube-system", placementv1alpha1.DefaultClusterSet))
	g.Expect(err).To(MatchError(ContainSubstring("namespace kube-system belongs to the control plane or to Lodestar")))
	p := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "reserved-" + rand.String(5), Namespace: "kube-system"},
		Spec: placementv1alpha1.PlacementSpec{ResourceSelectors: []placementv1alpha1.ResourceSelector{{Version: "v1", Kind: "ConfigMap", Name: "nothing"}}}}
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = hubCP.Client.Delete(context.Background(), p) })
	g.Eventually(func(g Gomega) {
		got := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(got.Finalizers).To(ContainElement(placementv1alpha1.PlacementFinalizer), "the work generator has seen it")
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		ns := &corev1.Namespace{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Name: "kube-system"}, ns)).To(Succeed())
		g.Expect(ns.Labels).NotTo(HaveKey(placementv1alpha1.TenantNamespaceLabel))
	}).Should(Succeed())
}

// carrierNamespace makes the ClusterPlacement namespace as the hub chart does,
// when it is missing (the ClusterPlacement controller makes it alike, marked,
// for the first ClusterPlacement), and checks that it is marked as Lodestar's.
func carrierNamespace(t *testing.T) {
	g := NewWithT(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: placementv1alpha1.ClusterPlacementNamespace,
		Labels: map[string]string{placementv1alpha1.ReservedNamespaceLabel: placementv1alpha1.ReservedForClusterPlacements}}}
	g.Expect(client.IgnoreAlreadyExists(hubCP.Client.Create(t.Context(), ns))).To(Succeed())
	g.Expect(hubCP.Client.Get(t.Context(), client.ObjectKeyFromObject(ns), ns)).To(Succeed())
	g.Expect(ns.Labels).To(HaveKeyWithValue(placementv1alpha1.ReservedNamespaceLabel, placementv1alpha1.ReservedForClusterPlacements))
}

// A whole namespace placed by a ClusterPlacement keeps its own limits: the kinds
// it forbids stay on the hub (its annotation is read, not the ClusterPlacement
// namespace's), and the member namespace enforces the member's Pod Security
// standard like one the agent creates.
func TestWholeNamespaceKeepsItsLimits(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newTenant(t)
	g.Expect(hubCP.Client.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"placement.lodestar.dev/forbidden-kinds":"rbac.authorization.k8s.io/*"}}}`)))).To(Succeed())
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}, Data: map[string]string{"k": "v"}}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "viewers", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: ns}}}
	for _, obj := range []client.Object{cm, rb} {
		g.Expect(hubCP.Client.Create(ctx, obj)).To(Succeed())
	}
	cp := &placementv1alpha1.ClusterPlacement{ObjectMeta: metav1.ObjectMeta{Name: "whole-" + ns},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{{Version: "v1", Kind: "Namespace", Name: ns}},
			Scheduling:        placementv1alpha1.Scheduling{ClusterNames: []string{member1}},
		}}
	g.Expect(hubCP.Client.Create(ctx, cp)).To(Succeed())
	t.Cleanup(func() { _ = hubCP.Client.Delete(context.Background(), cp) })
	member := members[member1].Client
	g.Eventually(func(g Gomega) {
		g.Expect(member.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})).To(Succeed())
		placed := &corev1.Namespace{}
		g.Expect(member.Get(ctx, client.ObjectKey{Name: ns}, placed)).To(Succeed())
		g.Expect(placed.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "baseline"))
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		err := member.Get(ctx, client.ObjectKeyFromObject(rb), &rbacv1.RoleBinding{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the forbidden RoleBinding stays on the hub: %v", err)
	}).Should(Succeed())
}

// The ClusterPlacement examples, applied as users apply them (kubectl apply of
// the files, which leave strategy and reporting out), get a status: kubectl
// wait sees them Available, `kubectl get clusterplacements` shows their
// clusters, and what they place is on the members. Before their carriers'
// defaults were the ClusterPlacements' own, such a ClusterPlacement never got
// a status.
func TestClusterPlacementExamplesFromYAML(t *testing.T) {
	files, doc := examplesOn(t, "cluster-placement", "placement", 2)
	expect := map[string]struct {
		name     string
		clusters []string
		on       client.Object
	}{
		"01-platform-rbac.yaml": {"example-platform", []string{member1, member2},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "retention", Namespace: "example-monitoring"}}},
		"02-rolling-one-at-a-time.yaml": {"example-node-viewer", []string{member1},
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "example-node-viewer"}}},
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			g := NewWithT(t)
			want, ok := expect[filepath.Base(file)]
			g.Expect(ok).To(BeTrue(), "a check for %s", file)
			exampleObjects(t, file, doc, "") // the page shows it as it is
			out, err := hubKubectl(t, "apply", "-f", file)
			g.Expect(err).NotTo(HaveOccurred(), out)
			t.Cleanup(func() {
				if out, err := hubKubectl(t, "delete", "--wait=false", "-f", file); err != nil {
					t.Logf("deleting %s: %v: %s", file, err, out)
				}
				// member-2 runs no namespace controller: the placed namespace
				// it deletes is finalized here, as its controller would, so
				// that the ClusterPlacement's Work goes.
				finalizer := kubernetes.NewForConfigOrDie(members[member2].Config).CoreV1().Namespaces()
				NewWithT(t).Eventually(func(g Gomega) {
					if ns, err := finalizer.Get(context.Background(), "example-monitoring", metav1.GetOptions{}); err == nil && !ns.DeletionTimestamp.IsZero() {
						ns.Spec.Finalizers = nil
						_, _ = finalizer.Finalize(context.Background(), ns, metav1.UpdateOptions{})
					}
					err := hubCP.Client.Get(context.Background(), client.ObjectKey{Name: want.name}, &placementv1alpha1.ClusterPlacement{})
					g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "ClusterPlacement %s is gone: %v", want.name, err)
				}).Should(Succeed())
			})
			g.Eventually(func() (string, error) {
				return hubKubectl(t, "wait", "--for=condition=Available", "--timeout=5s", "clusterplacement/"+want.name)
			}).Should(ContainSubstring("condition met"))
			cp := &placementv1alpha1.ClusterPlacement{}
			g.Expect(hubCP.Client.Get(t.Context(), client.ObjectKey{Name: want.name}, cp)).To(Succeed())
			g.Expect(cp.Spec.Strategy.Type).NotTo(BeEmpty(), "defaulted as the carrier is")
			g.Expect(cp.Status.ObservedGeneration).To(Equal(cp.Generation))
			g.Expect(cp.Status.SelectedClusters).To(HaveValue(BeEquivalentTo(len(want.clusters))))
			var names []string
			for _, c := range cp.Status.Clusters {
				names = append(names, c.Name)
			}
			g.Expect(names).To(ConsistOf(want.clusters))
			table, err := hubKubectl(t, "get", "clusterplacements", want.name)
			g.Expect(err).NotTo(HaveOccurred(), table)
			g.Expect(table).To(MatchRegexp(`%s\s+True\s+%d\s+%d\s+%d`, want.name, len(want.clusters), len(want.clusters), len(want.clusters)))
			for _, c := range want.clusters {
				g.Eventually(func() error {
					return members[c].Client.Get(t.Context(), client.ObjectKeyFromObject(want.on), want.on)
				}).Should(Succeed(), "%s on %s", want.on.GetName(), c)
			}
		})
	}
}
