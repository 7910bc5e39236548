package integration

import (
	"context"
	"fmt"
	mathrand "math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/testenv"
	"github.com/lodestar-dev/lodestar/internal/testenv/hostile"
)

// The attacks of a hostile tenant (docs/tenancy.md, threat model), each as the
// tenant types it: a ServiceAccount with only `admin` in its own hub namespace
// applies docs/examples/tenancy/. Meanwhile a bystander in another namespace
// changes a ConfigMap, and its change must still reach its member.

// tenantApplies creates the objects of an example of docs/examples/tenancy in
// a namespace of its own, as a ServiceAccount with only a namespace admin's
// rights there (hostile.AdminRules).
func tenantApplies(t *testing.T, example string) string {
	t.Helper()
	g := NewWithT(t)
	files, doc := examples(t, "tenancy", 3)
	file := filepath.Join(filepath.Dir(files[0]), example)
	g.Expect(files).To(ContainElement(file))
	ns := newNamespace(t)
	tenant := identity(t, ns, "tenant", hostile.AdminRules, "lodestar:tenant")
	for _, obj := range exampleObjects(t, file, doc, ns) {
		// The authorizer learns the new bindings a moment later.
		g.Eventually(func() error { return tenant.Create(t.Context(), obj) }).Should(Succeed(), "%s %s", obj.GetKind(), obj.GetName())
	}
	return ns
}

// bystander is another tenant's ConfigMap placed on member-2; change checks
// that a change of it reaches the member, while a hostile tenant is at work.
type bystander struct {
	t  *testing.T
	cm *corev1.ConfigMap
}

func newBystander(t *testing.T) *bystander {
	t.Helper()
	ns := newNamespace(t)
	configMapOn(t, ns, "bystander", func(s *placementv1alpha1.PlacementSpec) { s.Scheduling.ClusterNames = []string{member2} })
	b := &bystander{t: t, cm: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bystander", Namespace: ns}}}
	b.change()
	return b
}

func (b *bystander) change() {
	b.t.Helper()
	g := NewWithT(b.t)
	want := rand.String(8)
	g.Expect(updateOnHub(b.cm, func(cm *corev1.ConfigMap) { cm.Data = map[string]string{"k": want} })).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &corev1.ConfigMap{}
		g.Expect(members[member2].Client.Get(b.t.Context(), client.ObjectKeyFromObject(b.cm), got)).To(Succeed())
		g.Expect(got.Data).To(HaveKeyWithValue("k", want))
	}).Should(Succeed(), "another tenant's change reaches its member")
}

// An override that rewrites a placed Role's rules into rights the hub refuses
// the tenant (endpointslices: create) fails on the cluster, naming the rule and
// the right; the member never gets the Role. On earlier mains the member got it.
func TestOverrideCannotMintMemberRights(t *testing.T) {
	g := NewWithT(t)
	ns := tenantApplies(t, "01-role-rewritten-by-an-override.yaml")
	key := client.ObjectKey{Namespace: ns, Name: "reader"}

	// The tenant itself may not write such a Role on the hub.
	tenant := identity(t, ns, "other", hostile.AdminRules, "lodestar:tenant")
	g.Eventually(func(g Gomega) {
		err := tenant.Create(t.Context(), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "direct", Namespace: ns},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"create"}}}})
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the hub refuses the tenant: %v", err)
		g.Expect(err.Error()).To(ContainSubstring("attempting to grant RBAC permissions not currently held"))
	}).Should(Succeed())

	g.Eventually(func(g Gomega) {
		cs := clusterStatusOf(g, key, member1)
		g.Expect(cs).NotTo(BeNil())
		g.Expect(cs.Reason).To(Equal(placementv1alpha1.ReasonOverrideFailed))
		g.Expect(cs.Message).To(ContainSubstring("rule more-rights"))
		g.Expect(cs.Message).To(ContainSubstring("rule {verbs: [create], apiGroups: [discovery.k8s.io], resources: [endpointslices]}"))
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		err := members[member1].Client.Get(t.Context(), key, &rbacv1.Role{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Role is not on member-1: %v", err)
	}, "3s").Should(Succeed())

	// Without the override the Role, as the hub has it, is placed.
	g.Expect(updateOnHub(&placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: ns}},
		func(p *placementv1alpha1.Placement) { p.Spec.Overrides = nil })).To(Succeed())
	g.Eventually(func(g Gomega) {
		role := &rbacv1.Role{}
		g.Expect(members[member1].Client.Get(t.Context(), key, role)).To(Succeed())
		g.Expect(role.Rules).To(HaveLen(1))
		g.Expect(role.Rules[0].Resources).To(Equal([]string{"configmaps"}))
	}).Should(Succeed())
}

// Four Placements of ten Deployments of 2^30 replicas each, divided: another
// tenant's change still reaches its member. On earlier mains the division
// handed out one replica per step, and the work generator's workers stalled.
func TestHugeTotalsDoNotStallTheHub(t *testing.T) {
	g := NewWithT(t)
	b := newBystander(t)
	ns := tenantApplies(t, "03-huge-replicas.yaml")
	for p := range 4 {
		pl := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("huge-%d", p), Namespace: ns},
			Spec: placementv1alpha1.PlacementSpec{
				Scheduling: placementv1alpha1.Scheduling{ClusterNames: []string{member1, member2},
					Replicas: &placementv1alpha1.ReplicaDivision{Method: placementv1alpha1.DivisionEven}},
			}}
		for d := range 10 {
			name := fmt.Sprintf("huge-%d-%d", p, d)
			dep := hugeDeployment(ns, name)
			g.Expect(hubCP.Client.Create(t.Context(), dep)).To(Succeed())
			pl.Spec.ResourceSelectors = append(pl.Spec.ResourceSelectors, placementv1alpha1.ResourceSelector{Group: "apps", Version: "v1", Kind: "Deployment", Name: name})
		}
		g.Expect(hubCP.Client.Create(t.Context(), pl)).To(Succeed())
	}
	b.change()
	g.Eventually(func(g Gomega) {
		for _, cl := range []string{member1, member2} {
			d := &appsv1.Deployment{}
			g.Expect(members[cl].Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "huge-3-9"}, d)).To(Succeed())
			g.Expect(*d.Spec.Replicas).To(BeEquivalentTo(1 << 29))
		}
		d := &appsv1.Deployment{}
		g.Expect(members[member2].Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "huge"}, d)).To(Succeed())
		g.Expect(*d.Spec.Replicas).To(BeEquivalentTo(1 << 30))
	}).Should(Succeed())
	b.change()
}

func hugeDeployment(ns, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Paused: true, Replicas: new(int32(1 << 30)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}}},
		},
	}
}

// A Placement naming a kind in lower case is refused within the package's
// Eventually, naming the kind meant, and holds no worker: another tenant's
// change reaches its member. On earlier mains it stayed without a revision and
// no error, and four of them stopped rendering in every namespace.
func TestLowercaseKindIsRefusedAndHoldsNoWorker(t *testing.T) {
	g := NewWithT(t)
	b := newBystander(t)
	ns := tenantApplies(t, "02-lowercase-kind.yaml")
	for i := range 4 {
		p := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("lower-%d", i), Namespace: ns},
			Spec: placementv1alpha1.PlacementSpec{ResourceSelectors: []placementv1alpha1.ResourceSelector{{Group: "apps", Version: "v1", Kind: "deployment"}}}}
		g.Expect(hubCP.Client.Create(t.Context(), p)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		c := placementCondition(g, t, client.ObjectKey{Namespace: ns, Name: "lowercase"}, placementv1alpha1.RenderedCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonInvalidResourceSelector))
		g.Expect(c.Message).To(ContainSubstring("apps/v1 Deployment"))
	}).Should(Succeed())
	b.change()
}

// A kind whose CRD is deleted under Placements that select it: each Placement
// says so (InvalidResourceSelector naming the kind) and no worker is held.
// On earlier mains the revision maker's reconcile never returned.
func TestDeletedCRDIsNoticedAndHoldsNoWorker(t *testing.T) {
	g := NewWithT(t)
	b := newBystander(t)
	ns := newNamespace(t)
	group := "g" + rand.String(6) + ".example.com"
	crd := createWidgetCRD(t, hubCP.Client, group, apiextensionsv1.NamespaceScoped, "v1")
	widget := &unstructured.Unstructured{}
	widget.SetAPIVersion(group + "/v1")
	widget.SetKind("Widget")
	widget.SetName("w")
	widget.SetNamespace(ns)
	g.Eventually(func() error { return hubCP.Client.Create(t.Context(), widget) }).Should(Succeed())
	keys := make([]client.ObjectKey, 4)
	for i := range keys {
		p := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("widgets-%d", i), Namespace: ns},
			Spec: placementv1alpha1.PlacementSpec{
				ResourceSelectors: []placementv1alpha1.ResourceSelector{{Group: group, Version: "v1", Kind: "Widget"}},
				Scheduling:        placementv1alpha1.Scheduling{ClusterNames: []string{member2}},
			}}
		g.Expect(hubCP.Client.Create(t.Context(), p)).To(Succeed())
		keys[i] = client.ObjectKeyFromObject(p)
	}
	g.Eventually(func(g Gomega) {
		for _, key := range keys {
			c := placementCondition(g, t, key, placementv1alpha1.RenderedCondition)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
			g.Expect(c.Message).To(HavePrefix("1 object at"))
		}
	}).Should(Succeed())

	g.Expect(hubCP.Client.Delete(t.Context(), crd)).To(Succeed())
	g.Eventually(func(g Gomega) {
		for _, key := range keys {
			c := placementCondition(g, t, key, placementv1alpha1.RenderedCondition)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse), c.Message)
			g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonInvalidResourceSelector))
			g.Expect(c.Message).To(ContainSubstring(group))
		}
	}).Should(Succeed())
	b.change()
}

// The hostile-tenant soak, short (make bench runs it for ten minutes, with its
// figures): one tenant runs every attack at random, as it types them, while a
// bystander's ConfigMap changes every two seconds. Every change reaches the
// member, nothing of the bystander's is deleted, and every hostile Placement
// gets its Rendered condition (none holds a worker).
func TestHostileTenantSoak(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	g.Expect(hostile.InstallInterpreted(ctx, hubCP.Client, members[member1].Client, members[member2].Client)).To(Succeed())
	tenant, err := hostile.NewTenant(ctx, hubCP.Client, hubCP.Config, ns, "tenant")
	g.Expect(err).NotTo(HaveOccurred())
	byNS := newNamespace(t)
	g.Expect(hostile.PlaceBystander(ctx, hubCP.Client, byNS, "bystander", member2)).To(Succeed())

	soak, stop := context.WithTimeout(ctx, 45*time.Second)
	defer stop()
	attacker := &hostile.Tenant{Client: tenant, Namespace: ns, Clusters: []string{member1, member2}, Rand: mathrand.New(mathrand.NewPCG(1, 2)), Every: 500 * time.Millisecond}
	by := &hostile.Bystander{Hub: hubCP.Client, Member: members[member2].Client, Namespace: byNS, Name: "bystander",
		Every: 2 * time.Second, Within: testenv.EventuallyTimeout}
	var wg sync.WaitGroup
	var attackErr, byErr error
	wg.Go(func() { attackErr = attacker.Run(soak) })
	wg.Go(func() { byErr = by.Run(soak) })
	wg.Wait()
	g.Expect(attackErr).NotTo(HaveOccurred())
	g.Expect(byErr).NotTo(HaveOccurred())

	runs, refused := attacker.Counts()
	latencies, missed := by.Results()
	t.Logf("attacks %v (refused at admission %v); the bystander's %d changes landed in p50 %s, p99 %s",
		runs, refused, len(latencies), hostile.Quantile(latencies, 0.5), hostile.Quantile(latencies, 0.99))
	g.Expect(missed).To(BeEmpty(), "every change of the bystander's reaches its member")
	g.Expect(latencies).NotTo(BeEmpty())
	g.Expect(by.Deleted()).To(BeZero(), "nothing of the bystander's is deleted")
	for _, a := range hostile.Attacks {
		g.Expect(runs).To(HaveKey(a), "every attack ran")
	}
	g.Expect(refused[hostile.AttackSelfGrant]).To(Equal(runs[hostile.AttackSelfGrant]), "a tenant never grants itself member access")
	g.Expect(refused[hostile.AttackSelfInterpretation]).To(Equal(runs[hostile.AttackSelfInterpretation]), "a tenant never interprets a kind")
	g.Expect(refused[hostile.AttackSelfQuota]).To(Equal(runs[hostile.AttackSelfQuota]), "a tenant never writes its own quota")
	g.Expect(refused[hostile.AttackQuantityExponent]).To(Equal(runs[hostile.AttackQuantityExponent]), "a quantity with a huge exponent is refused at admission")
	// The revisions' data Secrets (the values of the Secrets revisions
	// hold) are there, and a Placement of every Secret placed none of them.
	data := &corev1.SecretList{}
	g.Expect(hubCP.Client.List(ctx, data, client.InNamespace(ns))).To(Succeed())
	g.Expect(data.Items).To(ContainElement(HaveField("Type", BeEquivalentTo(placementv1alpha1.RevisionDataSecretType))))
	for _, member := range []string{member1, member2} {
		placed := &corev1.SecretList{}
		g.Expect(members[member].Client.List(ctx, placed, client.InNamespace(ns))).To(Succeed())
		g.Expect(placed.Items).NotTo(ContainElement(HaveField("Type", BeEquivalentTo(placementv1alpha1.RevisionDataSecretType))), "on %s", member)
	}
	g.Eventually(func(g Gomega) {
		list := &placementv1alpha1.PlacementList{}
		g.Expect(hubCP.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).NotTo(BeEmpty())
		for _, p := range list.Items {
			c := meta.FindStatusCondition(p.Status.Conditions, placementv1alpha1.RenderedCondition)
			g.Expect(c).NotTo(BeNil(), "Placement %s has its Rendered condition", p.Name)
			g.Expect(p.Annotations).To(HaveKeyWithValue(placementv1alpha1.LastWriterAnnotation, "system:serviceaccount:"+ns+":tenant"),
				"Placement %s: a tenant never writes who wrote it", p.Name)
			if p.Spec.Dependencies == placementv1alpha1.DependenciesFollow {
				c := meta.FindStatusCondition(p.Status.Conditions, placementv1alpha1.DependenciesFollowedCondition)
				g.Expect(c).NotTo(BeNil(), "Placement %s has its DependenciesFollowed condition", p.Name)
				g.Expect(c.Message).To(ContainSubstring("not found on the hub"))
			}
		}
	}).Should(Succeed())
}
