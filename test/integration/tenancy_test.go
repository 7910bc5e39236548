package integration

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// A tenant's namespace without a ClusterSetBinding gets no cluster. Binding a set
// needs the bind verb on it, which the admission policy checks; the binding's
// status says whether the set exists and how many clusters it has; deleting it
// takes the clusters away at once, without waiting for replacements.
func TestClusterSetBindings(t *testing.T) {
	g := NewWithT(t)
	ns := newTenant(t)
	tenant := identity(t, ns, "tenant", configMaps, "lodestar:tenant")

	// The tenant places a ConfigMap: no binding, no cluster.
	cm, _, _ := webObjects(ns)
	g.Expect(tenant.Create(t.Context(), cm)).To(Succeed())
	p := webPlacement(ns)
	p.Spec.ResourceSelectors = p.Spec.ResourceSelectors[:1]
	p.Spec.Scheduling.ClusterSelector = &metav1.LabelSelector{}
	g.Expect(tenant.Create(t.Context(), p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)
	g.Eventually(func(g Gomega) {
		c := placementCondition(g, t, key, placementv1alpha1.ScheduledCondition)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonNoClusterSetBinding))
		g.Expect(c.Message).To(ContainSubstring("namespace " + ns + " has no ClusterSetBinding"))
	}).Should(Succeed())
	g.Expect(workOf(g, p, member1)).To(BeNil())

	// Nor can the tenant bind a set itself: RBAC gives it no write on bindings.
	err := tenant.Create(t.Context(), newBinding(ns, placementv1alpha1.DefaultClusterSet))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)

	// A cluster-set admin who may write bindings here but not bind this set is
	// refused by the admission policy, with its message.
	admin := identity(t, ns, "setadmin", nil, "lodestar:clusterset-admin")
	err = admin.Create(t.Context(), newBinding(ns, placementv1alpha1.DefaultClusterSet))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("binding cluster set lodestar-fleet needs the bind verb on clustersets/lodestar-fleet in group placement.lodestar.dev"))

	// Granted bind on the set (as the hub chart's lodestar:clusterset:<set>:bind
	// role does), the same admin binds it.
	bindRole := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "bind-" + ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{placementv1alpha1.GroupVersion.Group}, Resources: []string{"clustersets"},
			ResourceNames: []string{placementv1alpha1.DefaultClusterSet}, Verbs: []string{"bind"}}},
	}
	g.Expect(hubCP.Client.Create(t.Context(), bindRole)).To(Succeed())
	t.Cleanup(func() { _ = hubCP.Client.Delete(context.Background(), bindRole) })
	g.Expect(hubCP.Client.Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "setadmin-bind", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: bindRole.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "setadmin", Namespace: ns}},
	})).To(Succeed())
	g.Eventually(func() error {
		return admin.Create(t.Context(), newBinding(ns, placementv1alpha1.DefaultClusterSet))
	}).Should(Succeed())
	// Binding another set still needs its own grant.
	err = admin.Create(t.Context(), newBinding(ns, auxSet))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	// A namespace owner's wildcard Role grants every verb on every resource of
	// the namespace, clustersets included: that is no grant to bind a set.
	owner := identity(t, ns, "owner", []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}})
	g.Eventually(func(g Gomega) {
		err := owner.Create(t.Context(), newBinding(ns, auxSet))
		g.Expect(err).To(MatchError(ContainSubstring("a role granting bind on every cluster set in this namespace is not a grant")))
	}).Should(Succeed())

	// The binding's status: bound, with the set's cluster count.
	g.Eventually(func(g Gomega) {
		b := bindingOf(g, ns, placementv1alpha1.DefaultClusterSet)
		c := meta.FindStatusCondition(b.Status.Conditions, placementv1alpha1.BoundCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.ObservedGeneration).To(Equal(b.Generation))
		g.Expect(b.Status.Clusters).To(HaveValue(Equal(managedClusters(g, placementv1alpha1.DefaultClusterSet))))
	}).Should(Succeed())
	// The Placement now reaches both members.
	g.Eventually(func(g Gomega) {
		g.Expect(workOf(g, p, member1)).NotTo(BeNil())
		g.Expect(workOf(g, p, member2)).NotTo(BeNil())
		c := placementCondition(g, t, key, placementv1alpha1.ScheduledCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
	}).Should(Succeed())

	// A tenant namespace runs no pod on the hub (the hub chart's default).
	g.Eventually(func(g Gomega) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stray", Namespace: ns},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27"}}}}
		err := hubCP.Client.Create(t.Context(), pod)
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		g.Expect(err.Error()).To(ContainSubstring("namespace " + ns + " is a Lodestar tenant namespace"))
	}).Should(Succeed())

	// A binding to a set the hub does not manage says so, and gives nothing.
	g.Expect(hubCP.Client.Create(t.Context(), newBinding(ns, "no-such-set"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(bindingOf(g, ns, "no-such-set").Status.Conditions, placementv1alpha1.BoundCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonClusterSetNotFound))
	}).Should(Succeed())

	// Access revoked: the Works go at once, with no cluster to replace them.
	g.Expect(admin.Delete(t.Context(), newBinding(ns, placementv1alpha1.DefaultClusterSet))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(workOf(g, p, member1)).To(BeNil())
		g.Expect(workOf(g, p, member2)).To(BeNil())
		err := members[member1].Client.Get(t.Context(), client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
		c := placementCondition(g, t, key, placementv1alpha1.ScheduledCondition)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonNoClusterSetBinding))
	}).Should(Succeed())

	// With neither a binding nor a Placement left, the namespace is no longer a
	// tenant's: the hub lets it run pods again.
	tenantLabel := func(g Gomega) map[string]string {
		n := &corev1.Namespace{}
		g.Expect(hubCP.Client.Get(t.Context(), client.ObjectKey{Name: ns}, n)).To(Succeed())
		return n.Labels
	}
	g.Expect(hubCP.Client.Delete(t.Context(), newBinding(ns, "no-such-set"))).To(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(tenantLabel(g)).To(HaveKeyWithValue(placementv1alpha1.TenantNamespaceLabel, "true"), "the Placement is still there")
	}).Should(Succeed())
	g.Expect(tenant.Delete(t.Context(), p)).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(tenantLabel(g)).NotTo(HaveKey(placementv1alpha1.TenantNamespaceLabel)) }).Should(Succeed())
}

// An approver may approve a namespace's rollouts but not change its Placements;
// a tenant may change them but not approve.
func TestApproverAndTenantRoles(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	tenant := identity(t, ns, "tenant", configMaps, "lodestar:tenant")
	approver := identity(t, ns, "approver", nil, "lodestar:approver")
	_, _, p := configMapPlacement(t)
	p.Namespace = ns
	g.Expect(tenant.Create(t.Context(), p)).To(Succeed())

	approval := &placementv1alpha1.RolloutApproval{
		ObjectMeta: metav1.ObjectMeta{Name: "ok", Namespace: ns},
		Spec:       placementv1alpha1.RolloutApprovalSpec{Placement: p.Name, Revision: "web-1", Stage: "canary"},
	}
	err := tenant.Create(t.Context(), approval.DeepCopy())
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a tenant approving: %v", err)
	g.Expect(approver.Create(t.Context(), approval.DeepCopy())).To(Succeed())

	got := &placementv1alpha1.Placement{}
	g.Expect(approver.Get(t.Context(), client.ObjectKeyFromObject(p), got)).To(Succeed())
	got.Spec.Strategy.Paused = true
	err = approver.Update(t.Context(), got)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "an approver editing a Placement: %v", err)

	// Neither writes what Lodestar writes.
	for who, c := range map[string]client.Client{"tenant": tenant, "approver": approver} {
		err := c.Create(t.Context(), &cpv1alpha1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{Name: "forged", Namespace: ns}})
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s writing a PlacementDecision: %v", who, err)
		err = c.Create(t.Context(), &cpv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Name: "forged", Namespace: ns}})
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s writing a ClusterProfile: %v", who, err)
		for _, workNS := range []string{ns, names.ClusterNamespace(member1)} {
			err = c.Create(t.Context(), &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: "forged", Namespace: workNS}})
			g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s writing a Work in %s: %v", who, workNS, err)
		}
		err = c.Create(t.Context(), newBinding(ns, auxSet))
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s binding a cluster set: %v", who, err)
	}
}

// A platform admin forbids RBAC objects from a namespace: a Placement naming Role
// is refused at admission with the policy's message, and a selector without kind
// leaves the labelled Role on the hub while it places the ConfigMap.
func TestForbiddenKinds(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	g.Expect(updateOnHub(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, func(n *corev1.Namespace) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[placementv1alpha1.ForbiddenKindsAnnotation] = "rbac.authorization.k8s.io/*, ServiceAccount"
	})).To(Succeed())
	labels := map[string]string{"app": "shop"}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns, Labels: labels}, Data: map[string]string{"k": "v"}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: ns, Labels: labels},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: ns, Labels: labels}}
	for _, obj := range []client.Object{cm, role, sa} {
		g.Expect(hubCP.Client.Create(t.Context(), obj)).To(Succeed())
	}

	named := &placementv1alpha1.Placement{
		ObjectMeta: metav1.ObjectMeta{Name: "roles", Namespace: ns},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"}},
			Scheduling:        placementv1alpha1.Scheduling{ClusterNames: []string{member2}},
		},
	}
	err := hubCP.Client.Create(t.Context(), named)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("namespace " + ns + " may not place rbac.authorization.k8s.io/Role: its platform admin forbids it"))

	p := &placementv1alpha1.Placement{
		ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: ns},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{{LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}},
			Scheduling:        placementv1alpha1.Scheduling{ClusterNames: []string{member2}},
		},
	}
	g.Expect(hubCP.Client.Create(t.Context(), p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		w := workOf(g, p, member2)
		g.Expect(w).NotTo(BeNil())
		g.Expect(w.Spec.Workload.Manifests).To(HaveLen(1), "only the ConfigMap")
		g.Expect(members[member2].Client.Get(t.Context(), client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})).To(Succeed())
	}).Should(Succeed())
	for _, obj := range []client.Object{&rbacv1.Role{}, &corev1.ServiceAccount{}} {
		key := client.ObjectKeyFromObject(role)
		if _, isSA := obj.(*corev1.ServiceAccount); isSA {
			key = client.ObjectKeyFromObject(sa)
		}
		err := members[member2].Client.Get(t.Context(), key, obj)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s must stay on the hub: %v", obj, key, err)
	}
}

// A kind forbidden after a Placement placed it is revoked: the selector that
// names it selects nothing, its Role leaves the member, the Placement says why
// and keeps placing the rest (a change to the ConfigMap still rolls out), and
// it can still be updated and deleted (the policy refuses only a selector an
// update adds).
func TestForbiddingAKindRevokesIt(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}, Data: map[string]string{"k": "v1"}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}}
	for _, obj := range []client.Object{cm, role} {
		g.Expect(hubCP.Client.Create(t.Context(), obj)).To(Succeed())
	}
	p := &placementv1alpha1.Placement{
		ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: ns},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{
				{Version: "v1", Kind: "ConfigMap", Name: cm.Name},
				{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role", Name: role.Name},
			},
			Scheduling: placementv1alpha1.Scheduling{ClusterNames: []string{member2}},
		},
	}
	g.Expect(hubCP.Client.Create(t.Context(), p)).To(Succeed())
	member := members[member2].Client
	g.Eventually(func(g Gomega) {
		g.Expect(member.Get(t.Context(), client.ObjectKeyFromObject(role), &rbacv1.Role{})).To(Succeed())
		g.Expect(member.Get(t.Context(), client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})).To(Succeed())
	}).Should(Succeed())

	g.Expect(updateOnHub(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, func(n *corev1.Namespace) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[placementv1alpha1.ForbiddenKindsAnnotation] = "rbac.authorization.k8s.io/*"
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := placementCondition(g, t, client.ObjectKeyFromObject(p), placementv1alpha1.RenderedCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonInvalidResourceSelector))
		g.Expect(c.Message).To(ContainSubstring("spec.resourceSelectors[1]: the namespace's platform admin forbids placing Role.rbac.authorization.k8s.io"))
		g.Expect(c.Message).To(ContainSubstring("revision 2 ("), c.Message)
		g.Expect(c.Message).To(ContainSubstring("holds the other selectors' 1 object"))
		err := member.Get(t.Context(), client.ObjectKeyFromObject(role), &rbacv1.Role{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the forbidden Role leaves the member: %v", err)
		g.Expect(member.Get(t.Context(), client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})).To(Succeed())
	}).Should(Succeed())

	// The rest keeps rolling out.
	g.Expect(updateOnHub(cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &corev1.ConfigMap{}
		g.Expect(member.Get(t.Context(), client.ObjectKeyFromObject(cm), got)).To(Succeed())
		g.Expect(got.Data).To(HaveKeyWithValue("k", "v2"))
	}).Should(Succeed())

	// An update that keeps the refused selector is allowed; one adding a
	// forbidden kind is not.
	g.Expect(updateOnHub(p, func(p *placementv1alpha1.Placement) {
		p.Labels = map[string]string{"touched": "yes"}
	})).To(Succeed())
	err := updateOnHub(p, func(p *placementv1alpha1.Placement) {
		p.Spec.ResourceSelectors = append(p.Spec.ResourceSelectors, placementv1alpha1.ResourceSelector{
			Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"})
	})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("may not place rbac.authorization.k8s.io/RoleBinding"))

	// And it can be deleted: its finalizer comes off, the ConfigMap leaves.
	g.Expect(hubCP.Client.Delete(t.Context(), p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := hubCP.Client.Get(t.Context(), client.ObjectKeyFromObject(p), &placementv1alpha1.Placement{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Placement is gone: %v", err)
		err = member.Get(t.Context(), client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the ConfigMap leaves the member: %v", err)
	}).Should(Succeed())
}

// Lodestar's namespaces and marks are Lodestar's: with the tenant role (what
// edit aggregates) in the ClusterPlacement namespace no one but the hub makes a
// Placement there; the
// right to create namespaces does not create lodestar-* ones; and the owner of a
// namespace who may label it cannot change its forbidden kinds or tenant mark.
func TestReservedNamespacesAndMarks(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newTenant(t, placementv1alpha1.DefaultClusterSet)
	owner := identity(t, ns, "owner", nil)
	carrierNamespace(t)
	g.Expect(hubCP.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "owner-tenant-" + ns, Namespace: placementv1alpha1.ClusterPlacementNamespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "lodestar:tenant"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "owner", Namespace: ns}},
	})).To(Succeed())
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "namespace-owner-" + ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, ResourceNames: []string{ns}, Verbs: []string{"get", "patch", "update"}},
	}}
	g.Expect(hubCP.Client.Create(ctx, role)).To(Succeed())
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "owner", Namespace: ns}}}
	g.Expect(hubCP.Client.Create(ctx, binding)).To(Succeed())
	t.Cleanup(func() {
		_ = hubCP.Client.Delete(context.Background(), binding)
		_ = hubCP.Client.Delete(context.Background(), role)
	})

	carrier := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "mine-" + ns, Namespace: placementv1alpha1.ClusterPlacementNamespace},
		Spec: placementv1alpha1.PlacementSpec{ResourceSelectors: []placementv1alpha1.ResourceSelector{{Version: "v1", Kind: "ConfigMap"}}}}
	g.Eventually(func(g Gomega) {
		err := owner.Create(ctx, carrier.DeepCopy())
		g.Expect(err).To(MatchError(ContainSubstring("only the hub makes Placements in lodestar-placements")))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		err := owner.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names.ClusterNamespace("ahead-" + ns)}})
		g.Expect(err).To(MatchError(ContainSubstring("namespaces named lodestar-* are Lodestar's")))
	}).Should(Succeed())
	plain := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "plain-" + ns}}
	g.Expect(owner.Create(ctx, plain)).To(Succeed(), "other namespaces are the owner's to create")
	t.Cleanup(func() { _ = hubCP.Client.Delete(context.Background(), plain) })

	mark := func(patch string) error {
		return owner.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, client.RawPatch(types.MergePatchType, []byte(patch)))
	}
	g.Expect(hubCP.Client.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"placement.lodestar.dev/forbidden-kinds":"Secret"}}}`)))).To(Succeed(), "an admin sets it")
	g.Eventually(func(g Gomega) {
		got := &corev1.Namespace{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Name: ns}, got)).To(Succeed())
		g.Expect(got.Labels).To(HaveKeyWithValue(placementv1alpha1.TenantNamespaceLabel, "true"), "the hub marked it")
	}).Should(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(mark(`{"metadata":{"labels":{"team":"shop"}}}`)).To(Succeed()) }).Should(Succeed())
	for _, patch := range []string{
		`{"metadata":{"annotations":{"placement.lodestar.dev/forbidden-kinds":null}}}`,
		`{"metadata":{"labels":{"placement.lodestar.dev/tenant":null}}}`,
		`{"metadata":{"labels":{"placement.lodestar.dev/hub-manager":"another-release"}}}`,
		`{"metadata":{"labels":{"quota.lodestar.dev/team":"shop"}}}`,
	} {
		g.Expect(mark(patch)).To(MatchError(ContainSubstring("are set by the hub and its admins only")), patch)
	}
	// A ClusterFleetQuota's membership label, set by an admin, stays: its
	// owner cannot take the namespace out of the quota.
	g.Expect(hubCP.Client.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"quota.lodestar.dev/team":"shop"}}}`)))).To(Succeed(), "an admin sets it")
	for _, patch := range []string{
		`{"metadata":{"labels":{"quota.lodestar.dev/team":null}}}`,
		`{"metadata":{"labels":{"quota.lodestar.dev/team":"free"}}}`,
	} {
		g.Expect(mark(patch)).To(MatchError(ContainSubstring("are set by the hub and its admins only")), patch)
	}
	g.Expect(mark(`{"metadata":{"labels":{"team":"shop2"}}}`)).To(Succeed(), "other labels stay the owner's")
}
