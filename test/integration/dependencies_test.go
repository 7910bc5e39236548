package integration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/rolloutctl"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// What a Placement with dependencies: Follow places, as the docs' example
// shows it: the Deployment it selects and what its pod template references,
// except the Secret its writer (a tenant who may read only some Secrets) may
// not read; they move with it, follow edits, and go with it.
func TestDependenciesFollow(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	placementsGoAtEnd(t, ns)
	files, doc := examples(t, "dependencies", 2)
	for _, obj := range exampleObjects(t, files[0], doc, ns) {
		g.Expect(hubCP.Client.Create(ctx, obj)).To(Succeed(), "%s %s", obj.GetKind(), obj.GetName())
	}
	readsSome := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"web-db", "registry"}, Verbs: []string{"get"}}}
	alice := identity(t, ns, "alice", readsSome, "lodestar:tenant")
	for _, obj := range exampleObjects(t, files[1], doc, ns) {
		g.Expect(alice.Create(ctx, obj)).To(Succeed(), "the tenant writes the Placement")
	}
	key := client.ObjectKey{Namespace: ns, Name: "web"}
	writer := "system:serviceaccount:" + ns + ":alice"

	on := func(_ Gomega, cluster string, obj client.Object, name string) error {
		return members[cluster].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
	}
	expectOn := func(g Gomega, cluster string) {
		g.Expect(on(g, cluster, &corev1.ConfigMap{}, "web-settings")).To(Succeed())
		g.Expect(on(g, cluster, &corev1.Secret{}, "web-db")).To(Succeed())
		g.Expect(on(g, cluster, &corev1.Secret{}, "registry")).To(Succeed(), "the ServiceAccount's pull Secret follows it")
		g.Expect(on(g, cluster, &corev1.ServiceAccount{}, "web")).To(Succeed())
		g.Expect(apierrors.IsNotFound(on(g, cluster, &corev1.Secret{}, "web-admin"))).To(BeTrue(), "alice may not read web-admin: it stays on the hub")
	}
	g.Eventually(func(g Gomega) {
		expectOn(g, member1)
		p := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, key, p)).To(Succeed())
		g.Expect(p.Annotations).To(HaveKeyWithValue(placementv1alpha1.LastWriterAnnotation, writer))
		c := meta.FindStatusCondition(p.Status.Conditions, placementv1alpha1.DependenciesFollowedCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonNotFollowed))
		g.Expect(c.Message).To(ContainSubstring("4 referenced objects followed"))
		g.Expect(c.Message).To(ContainSubstring("Secret/web-admin (referenced by Deployment web): " + writer + ", who last changed the Placement, may not get it on the hub"))
		expectPreviewIsTheWork(g, p, member1)
	}).Should(Succeed())

	// The tenant cannot pass for someone else: the admission policy keeps
	// who last changed the spec.
	g.Eventually(func() error {
		return updateWith(alice, &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}, func(p *placementv1alpha1.Placement) {
			p.Annotations[placementv1alpha1.LastWriterAnnotation] = "kubernetes-admin"
			p.Annotations[placementv1alpha1.LastWriterGroupsAnnotation] = "system:masters"
		})
	}).Should(Succeed())
	p := &placementv1alpha1.Placement{}
	g.Expect(hubCP.Client.Get(ctx, key, p)).To(Succeed())
	g.Expect(p.Annotations).To(HaveKeyWithValue(placementv1alpha1.LastWriterAnnotation, writer))
	g.Expect(p.Annotations[placementv1alpha1.LastWriterGroupsAnnotation]).NotTo(ContainSubstring("system:masters"))

	// Without the mutating policy (as for the seconds the API server
	// republishes schemas: it fails open), the guard refuses a writer of the
	// tenant's choosing.
	binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{}
	g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Name: "lodestar-placement-writer"}, binding)).To(Succeed())
	g.Expect(hubCP.Client.Delete(ctx, binding)).To(Succeed())
	restore := func() {
		binding.ResourceVersion, binding.UID = "", ""
		_ = hubCP.Client.Create(context.Background(), binding)
		g.Expect(testenv.PlacementsAdmitted(context.Background(), hubCP.Client)).To(Succeed())
	}
	t.Cleanup(restore)
	g.Eventually(func(g Gomega) {
		forged := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forged",
			Annotations: map[string]string{placementv1alpha1.LastWriterAnnotation: "kubernetes-admin", placementv1alpha1.LastWriterGroupsAnnotation: "system:masters"}},
			Spec: placementv1alpha1.PlacementSpec{ResourceSelectors: []placementv1alpha1.ResourceSelector{{Group: "apps", Version: "v1", Kind: "Deployment", Name: "web"}},
				Dependencies: placementv1alpha1.DependenciesFollow}}
		err := alice.Create(ctx, forged)
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		g.Expect(err.Error()).To(ContainSubstring("are written by the hub (policy lodestar-placement-writer), never by hand"))
	}).Should(Succeed())
	restore()

	// An admin who may read it takes the Placement over: the Secret follows.
	// The Placement moves to member 2, and the followed objects with it.
	g.Eventually(func() error {
		return updateOnHub(&placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}, func(p *placementv1alpha1.Placement) {
			p.Spec.Scheduling.ClusterNames = []string{member2}
		})
	}).Should(Succeed())
	// Member 2 runs no deployment controller: the member-1 copy goes once
	// the new one is Available (make-before-break).
	setDeploymentStatus(t, ns, "web", 1)
	g.Eventually(func(g Gomega) {
		g.Expect(on(g, member2, &corev1.Secret{}, "web-admin")).To(Succeed(), "the admin may read it")
		for _, name := range []string{"web-db", "registry"} {
			g.Expect(on(g, member2, &corev1.Secret{}, name)).To(Succeed())
		}
		g.Expect(on(g, member2, &corev1.ConfigMap{}, "web-settings")).To(Succeed())
		g.Expect(on(g, member2, &corev1.ServiceAccount{}, "web")).To(Succeed())
		g.Expect(apierrors.IsNotFound(on(g, member1, &corev1.ConfigMap{}, "web-settings"))).To(BeTrue(), "gone with the move")
		g.Expect(apierrors.IsNotFound(on(g, member1, &corev1.Secret{}, "web-db"))).To(BeTrue(), "gone with the move")
		g.Expect(placementCondition(g, t, key, placementv1alpha1.DependenciesFollowedCondition).Status).To(Equal(metav1.ConditionTrue))
	}).Should(Succeed())

	// An edit of a followed object rolls out like one of a selected object.
	g.Eventually(func() error {
		return updateOnHub(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-settings"}}, func(cm *corev1.ConfigMap) {
			cm.Data["greeting"] = "bonjour"
		})
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(on(g, member2, cm, "web-settings")).To(Succeed())
		g.Expect(cm.Data).To(HaveKeyWithValue("greeting", "bonjour"))
	}).Should(Succeed())

	// They go with the Placement.
	deletePlacement(t, &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})
	g.Eventually(func(g Gomega) {
		g.Expect(apierrors.IsNotFound(on(g, member2, &corev1.ConfigMap{}, "web-settings"))).To(BeTrue())
		for _, name := range []string{"web-db", "web-admin", "registry"} {
			g.Expect(apierrors.IsNotFound(on(g, member2, &corev1.Secret{}, name))).To(BeTrue(), name)
		}
		g.Expect(apierrors.IsNotFound(on(g, member2, &corev1.ServiceAccount{}, "web"))).To(BeTrue())
	}).Should(Succeed())
}

// A tenant who may not read a Secret does not place it by naming it in a
// selector (issue 65): the Placement places its other objects and says which
// Secret it left on the hub and why; once a user who may read it writes the
// Placement, the Secret is placed.
func TestSecretsSelectedOnlyByWhoMayReadThem(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	placementsGoAtEnd(t, ns)
	createYAML(t, ns, `apiVersion: v1
kind: Secret
metadata: {name: platform-credentials, labels: {app: shop}}
stringData: {token: not-for-tenants}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: shop, labels: {app: shop}}
data: {k: v}`)
	bob := identity(t, ns, "bob", nil, "lodestar:tenant")
	placement := `apiVersion: placement.lodestar.dev/v1alpha1
kind: Placement
metadata: {name: shop}
spec:
  resourceSelectors:
    - {version: v1, kind: Secret, name: platform-credentials}
    - {version: v1, kind: ConfigMap, labelSelector: {matchLabels: {app: shop}}}
  scheduling: {clusterNames: [member-1]}`
	obj := &unstructured.Unstructured{}
	g.Expect(yaml.Unmarshal([]byte(placement), &obj.Object)).To(Succeed())
	obj.SetNamespace(ns)
	g.Expect(bob.Create(ctx, obj)).To(Succeed(), "the tenant writes the Placement")

	writer := "system:serviceaccount:" + ns + ":bob"
	key := client.ObjectKey{Namespace: ns, Name: "shop"}
	onMember := func(obj client.Object, name string) error {
		return members[member1].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
	}
	g.Eventually(func(g Gomega) {
		g.Expect(onMember(&corev1.ConfigMap{}, "shop")).To(Succeed(), "the rest is placed")
		p := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, key, p)).To(Succeed())
		c := meta.FindStatusCondition(p.Status.Conditions, placementv1alpha1.RenderedCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonInvalidResourceSelector))
		g.Expect(c.Message).To(ContainSubstring("Secret platform-credentials is not placed: " + writer + ", who last changed the Placement, may not get it on the hub"))
	}).Should(Succeed())
	g.Consistently(func() bool { return apierrors.IsNotFound(onMember(&corev1.Secret{}, "platform-credentials")) }, 3*time.Second).Should(BeTrue(),
		"the Secret stays on the hub")

	// A user who may read it writes the Placement: it is placed.
	g.Eventually(func() error {
		return updateOnHub(&placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"}}, func(p *placementv1alpha1.Placement) {
			p.Spec.ResourceSelectors = append(p.Spec.ResourceSelectors, placementv1alpha1.ResourceSelector{Version: "v1", Kind: "ConfigMap", Name: "shop"})
		})
	}).Should(Succeed())
	g.Eventually(func() error { return onMember(&corev1.Secret{}, "platform-credentials") }).Should(Succeed())
}

// A PlacementRevision holds its Secrets without their values: an approver
// (lodestar:approver, who may read revisions and not Secrets) reads the
// revisions and finds no value; the values are in the revision's data
// Secret, which only those who may read the namespace's Secrets read, and a
// selector of every Secret does not place it. The members get the values as
// they were, and an undo gives them the values of the revision it goes back
// to; a data Secret changed by hand is written again before any Work takes
// it.
func TestRevisionsHoldNoSecretValues(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	placementsGoAtEnd(t, ns)
	createYAML(t, ns, `apiVersion: v1
kind: Secret
metadata: {name: db, labels: {app: shop}}
stringData: {password: first-s3cret}
---
apiVersion: placement.lodestar.dev/v1alpha1
kind: Placement
metadata: {name: shop}
spec:
  resourceSelectors:
    - {version: v1, kind: Secret}
  scheduling: {clusterNames: [member-1]}`)
	key := client.ObjectKey{Namespace: ns, Name: "shop"}
	passwordOnMember := func(g Gomega) string {
		secret := &corev1.Secret{}
		g.Expect(members[member1].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, secret)).To(Succeed())
		g.Expect(secret.Annotations).NotTo(HaveKey(placementv1alpha1.SealedDataAnnotation))
		return string(secret.Data["password"])
	}
	g.Eventually(passwordOnMember).Should(Equal("first-s3cret"))
	expectRolledOut(t, key, 1, "", member1)

	g.Eventually(func() error {
		return updateOnHub(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}}, func(s *corev1.Secret) {
			s.Data = map[string][]byte{"password": []byte("second-s3cret")}
		})
	}).Should(Succeed())
	g.Eventually(passwordOnMember).Should(Equal("second-s3cret"))
	expectRolledOut(t, key, 2, "", member1)

	// The approver reads both revisions, and no value.
	carol := identity(t, ns, "carol", nil, "lodestar:approver")
	revs := &placementv1alpha1.PlacementRevisionList{}
	g.Expect(carol.List(ctx, revs, client.InNamespace(ns))).To(Succeed())
	g.Expect(revs.Items).To(HaveLen(2))
	for _, rv := range revs.Items {
		b, err := json.Marshal(rv)
		g.Expect(err).NotTo(HaveOccurred())
		for _, value := range []string{"first-s3cret", "second-s3cret"} {
			g.Expect(string(b)).NotTo(Or(ContainSubstring(value), ContainSubstring(base64.StdEncoding.EncodeToString([]byte(value)))), "revision %d", rv.Spec.Revision)
		}
		g.Expect(string(b)).To(ContainSubstring(placementv1alpha1.SealedDataAnnotation))
	}
	data := &corev1.SecretList{}
	g.Expect(hubCP.Client.List(ctx, data, client.InNamespace(ns), client.MatchingLabels{placementv1alpha1.PlacementNameLabel: "shop"})).To(Succeed())
	g.Expect(data.Items).To(HaveLen(2))
	for _, d := range data.Items {
		g.Expect(d.Type).To(BeEquivalentTo(placementv1alpha1.RevisionDataSecretType))
		err := carol.Get(ctx, client.ObjectKeyFromObject(&d), &corev1.Secret{})
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the approver may not read the values: %v", err)
	}
	// The selector of every Secret placed none of them.
	g.Consistently(func() int {
		list := &corev1.SecretList{}
		if err := members[member1].Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return -1
		}
		n := 0
		for _, s := range list.Items {
			if s.Type == placementv1alpha1.RevisionDataSecretType {
				n++
			}
		}
		return n
	}, 2*time.Second).Should(BeZero())

	// An undo writes the Secret back with the values of the revision it
	// goes back to.
	dataOf := func(number int64) string {
		i := slices.IndexFunc(revs.Items, func(rv placementv1alpha1.PlacementRevision) bool { return rv.Spec.Revision == number })
		return names.RevisionData("shop", revs.Items[i].Spec.Hash)
	}
	_, err := rolloutctl.Undo(ctx, hubCP.Client, hubCP.Typed(), key, 1)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(passwordOnMember).Should(Equal("first-s3cret"))

	// The current revision's data Secret changed by hand is written again.
	forge := func(name string) map[string][]byte {
		var before map[string][]byte
		g.Eventually(func() error {
			return updateOnHub(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, func(s *corev1.Secret) {
				before = maps.Clone(s.Data)
				for k := range s.Data {
					s.Data[k] = []byte(`{"stringData":{"password":"forged"}}`)
				}
			})
		}).Should(Succeed())
		return before
	}
	written := forge(dataOf(1))
	g.Eventually(func(g Gomega) map[string][]byte {
		s := &corev1.Secret{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: dataOf(1)}, s)).To(Succeed())
		return s.Data
	}).Should(Equal(written))
	// An earlier revision's, changed by hand, is refused by an undo, which
	// writes nothing back.
	forge(dataOf(2))
	_, err = rolloutctl.Undo(ctx, hubCP.Client, hubCP.Typed(), key, 2)
	g.Expect(err).To(MatchError(And(ContainSubstring("revision 2: the values of Secret "+ns+"/db"), ContainSubstring("are not those the revision was made with"),
		ContainSubstring("nothing was written back"))))
	hubSecret := &corev1.Secret{}
	g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, hubSecret)).To(Succeed())
	g.Expect(string(hubSecret.Data["password"])).To(Equal("first-s3cret"))
	g.Consistently(passwordOnMember, 2*time.Second).Should(Equal("first-s3cret"))
}

// dependencies: Follow takes a Secret on the word of the Placement's last
// writer, who may read it, only for references there when they wrote the
// spec: a reference another tenant (who may edit the Deployment, not read the
// Secret) adds afterwards is not followed, and says so, until someone who may
// read it writes the Placement's spec again. What was followed before stays.
func TestFollowTakesNoSecretReferencedAfterTheWriter(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	placementsGoAtEnd(t, ns)
	createYAML(t, ns, `apiVersion: v1
kind: Secret
metadata: {name: web-db}
stringData: {password: s3cret}
---
apiVersion: v1
kind: Secret
metadata: {name: platform-token}
stringData: {token: not-for-tenants}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        env:
        - name: DB_PASSWORD
          valueFrom: {secretKeyRef: {name: web-db, key: password}}`)
	alice := identity(t, ns, "alice", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}}, "lodestar:tenant")
	mallory := identity(t, ns, "mallory", []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "update", "patch"}}}, "lodestar:tenant")
	placement := &unstructured.Unstructured{}
	g.Expect(yaml.Unmarshal([]byte(`apiVersion: placement.lodestar.dev/v1alpha1
kind: Placement
metadata: {name: web}
spec:
  resourceSelectors:
  - {group: apps, version: v1, kind: Deployment, name: web}
  dependencies: Follow
  scheduling: {clusterNames: [member-1]}`), &placement.Object)).To(Succeed())
	placement.SetNamespace(ns)
	g.Expect(alice.Create(ctx, placement)).To(Succeed())
	onMember := func(name string) error {
		return members[member1].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{})
	}
	g.Eventually(func() error { return onMember("web-db") }).Should(Succeed())

	// Mallory, who may not read it, references the platform's token.
	g.Eventually(func() error {
		return updateWith(mallory, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}, func(d *appsv1.Deployment) {
			c := &d.Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "platform-token"}, Key: "token"}}})
		})
	}).Should(Succeed())
	key := client.ObjectKey{Namespace: ns, Name: "web"}
	g.Eventually(func(g Gomega) {
		c := placementCondition(g, t, key, placementv1alpha1.DependenciesFollowedCondition)
		g.Expect(c.Message).To(ContainSubstring("Secret/platform-token (referenced by Deployment web): referenced after system:serviceaccount:" + ns +
			":alice last changed the Placement's spec"))
	}).Should(Succeed())
	g.Consistently(func() bool { return apierrors.IsNotFound(onMember("platform-token")) }, 3*time.Second, 500*time.Millisecond).Should(BeTrue())
	g.Expect(onMember("web-db")).To(Succeed(), "what was followed before stays")

	// Alice writes the spec again, having seen the reference: it follows.
	g.Eventually(func() error {
		return updateWith(alice, &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}, func(p *placementv1alpha1.Placement) {
			p.Spec.RevisionHistoryLimit = ptr.To[int32](5)
		})
	}).Should(Succeed())
	g.Eventually(func() error { return onMember("platform-token") }).Should(Succeed())
}
