// Fixtures: what the tests set up and change on the shared fleet (main_test.go):
// tenants and their namespaces, the objects and Placements they place, CRDs,
// further members and cluster sets, and what members and agents are made to do.
// The tests themselves sit in a file per feature; what they read back and
// expect of the fleet is in actuals_test.go.

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	aboutv1alpha1 "sigs.k8s.io/about-api/pkg/apis/v1alpha1"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"
	"sigs.k8s.io/yaml"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/agent"
	"github.com/lodestar-dev/lodestar/controllers/hub/scheduler"
	"github.com/lodestar-dev/lodestar/internal/fleet"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/scheme"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

var (
	extraOnce   sync.Once
	extraErr    error
	extraAgents = map[string]func(){} // cluster → stop its agent
	extraHub    = map[string]*rest.Config{}
	extraMu     sync.Mutex
)

// Two more members for the rollout tests, joined in the aux cluster set: member-3
// runs workloads (like member-1), member-4 is an API server alone.
const (
	member3 = "member-3"
	member4 = "member-4"
)

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

func manifest(t *testing.T, obj map[string]any) workv1alpha1.Manifest {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: b}}
}

func configMapManifest(t *testing.T, ns, name string, meta map[string]any) workv1alpha1.Manifest {
	md := map[string]any{"namespace": ns}
	if name != "" {
		md["name"] = name
	}
	for k, v := range meta {
		md[k] = v
	}
	return manifest(t, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": map[string]any{"from": "work"}})
}

const holdFinalizer = "example.com/hold"

// hold puts a member controller's finalizer on a ConfigMap, and takes it away
// when the test ends.
func hold(t *testing.T, cluster string, key client.ObjectKey) {
	t.Helper()
	editOnMember(t, cluster, key, func(cm *corev1.ConfigMap) { cm.Finalizers = append(cm.Finalizers, holdFinalizer) })
	t.Cleanup(func() { release(t, cluster, key) })
}

// release takes the finalizer away (the object may be gone already).
func release(t *testing.T, cluster string, key client.ObjectKey) {
	ctx := context.Background() // Also when the test has ended.
	NewWithT(t).Eventually(func() error {
		cm := &corev1.ConfigMap{}
		if err := members[cluster].Client.Get(ctx, key, cm); err != nil {
			return client.IgnoreNotFound(err)
		}
		cm.Finalizers = slices.DeleteFunc(cm.Finalizers, func(f string) bool { return f == holdFinalizer })
		return client.IgnoreNotFound(members[cluster].Client.Update(ctx, cm))
	}).Should(Succeed())
}

// auxSet is a cluster set no Placement of these tests uses: clusters joined by the
// lifecycle tests live there, so they never take part in other tests' scheduling.
const auxSet = "lodestar-test-aux"

// joinAux joins a cluster named after prefix into auxSet.
func joinAux(t *testing.T, prefix string, ttl time.Duration) (string, *rest.Config) {
	t.Helper()
	name := prefix + "-" + rand.String(5)
	cfg, err := fleet.Join(t.Context(), hubCP.Config, hubCP.Client, fleet.JoinOptions{Name: name, ClusterSet: auxSet, TokenTTL: ttl})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return name, cfg
}

// auxAgent are the options of an agent for an aux cluster on a member's API
// server, with a short lease so that tests see it come and go in seconds.
func auxAgent(name string, hub *rest.Config, member string) agent.Options {
	return agent.Options{ClusterName: name, ClusterSet: auxSet, Hub: hub, Member: members[member].Config, LeaseDuration: 2 * time.Second}
}

// startAgent runs an agent for cluster on member until the returned stop is called
// (or the test ends).
func startAgent(t *testing.T, opts agent.Options) (stop func()) {
	t.Helper()
	opts.Manager = ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"}
	a, err := agent.NewManager(opts)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := a.Start(ctx); err != nil {
			t.Errorf("agent %s: %v", opts.ClusterName, err)
		}
	}()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// placeOnAux hand-writes a Work with one ConfigMap for an aux cluster and waits
// until the agent applied it on member-2.
func placeOnAux(t *testing.T, cluster string) (string, *corev1.ConfigMap) {
	t.Helper()
	g := NewWithT(t)
	ns := newNamespace(t)
	w := &workv1alpha1.Work{
		ObjectMeta: metav1.ObjectMeta{Name: "leaving", Namespace: names.ClusterNamespace(cluster)},
		Spec:       workv1alpha1.WorkSpec{Workload: workv1alpha1.WorkloadTemplate{Manifests: []workv1alpha1.Manifest{cmManifest(t, ns, "left-behind", map[string]any{"k": "v"})}}},
	}
	g.Expect(hubCP.Client.Create(t.Context(), w)).To(Succeed())
	eventuallyManifest(t, w, 0, metav1.ConditionTrue, "Applied")
	return ns, memberConfigMap(t, member2, ns, "left-behind")
}

// widgetCRD creates, on member, a CRD of kind Widget in a group of its own, with
// the given versions (the first one stored), and deletes it when the test ends.
func widgetCRD(t *testing.T, cluster string, versions ...string) (string, *unstructured.Unstructured) {
	t.Helper()
	group := "g" + rand.String(6) + ".example.com"
	return group, createWidgetCRD(t, members[cluster].Client, group, apiextensionsv1.NamespaceScoped, versions...)
}

// createWidgetCRD creates the CRD of kind Widget in group through any client, of
// either scope, and deletes it when the test ends.
func createWidgetCRD(t *testing.T, c client.Client, group string, scope apiextensionsv1.ResourceScope, versions ...string) *unstructured.Unstructured {
	t.Helper()
	g := NewWithT(t)
	def := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: scope,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
		},
	}
	for i, v := range versions {
		def.Spec.Versions = append(def.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: v, Served: true, Storage: i == 0,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object", XPreserveUnknownFields: ptr.To(true)}}})
	}
	// The clients know no apiextensions types: the CRD goes as unstructured.
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(def)
	g.Expect(err).NotTo(HaveOccurred())
	crd := &unstructured.Unstructured{Object: content}
	crd.SetAPIVersion(apiextensionsv1.SchemeGroupVersion.String())
	crd.SetKind("CustomResourceDefinition")
	g.Expect(c.Create(t.Context(), crd)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), crd) })
	return crd
}

// gadgetCRD is a CRD of a kind the agents' configuration has a readiness rule for,
// with a plural unique to the test.
func gadgetCRD(t *testing.T, plural string) workv1alpha1.Manifest {
	return manifest(t, map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": plural + "." + gadgetGroup},
		"spec": map[string]any{
			"group": gadgetGroup, "scope": "Namespaced",
			"names": map[string]any{"plural": plural, "singular": strings.TrimSuffix(plural, "s"), "kind": "Gadget", "listKind": "GadgetList"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
			}},
		},
	})
}

// editOnMember changes a ConfigMap on a member as someone other than Lodestar
// would (an update, retried on conflict).
func editOnMember(t *testing.T, cluster string, key client.ObjectKey, mutate func(*corev1.ConfigMap)) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		cm := &corev1.ConfigMap{}
		if err := members[cluster].Client.Get(t.Context(), key, cm); err != nil {
			return err
		}
		mutate(cm)
		return members[cluster].Client.Update(t.Context(), cm)
	}).Should(Succeed())
}

// memberAccessSA is member-1's member-access ServiceAccount: it may list
// namespaces on member-1, nothing more.
var memberAccessSA = types.NamespacedName{Namespace: "lodestar-system", Name: "lodestar-member-access"}

// memberAccessAccount creates it on the member, as the agent chart does.
func memberAccessAccount(ctx context.Context, member *testenv.ControlPlane) error {
	c := member.Client
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: memberAccessSA.Namespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: memberAccessSA.Name, Namespace: memberAccessSA.Namespace}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "lodestar-member-access"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "lodestar-member-access"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "lodestar-member-access"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: memberAccessSA.Name, Namespace: memberAccessSA.Namespace}}},
	} {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// consumerKubeconfig writes the kubeconfig of a platform team's controller in
// ns: a ServiceAccount that may read the Secrets of its namespace and the
// ClusterProfiles of the default set, nothing else. Its context's namespace is
// ns, which is where the secretreader plugin looks.
func consumerKubeconfig(t *testing.T, ns string) string {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	role := func(namespace string, rule rbacv1.PolicyRule) {
		g.Expect(hubCP.Client.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "consumer-" + ns, Namespace: namespace}, Rules: []rbacv1.PolicyRule{rule}})).To(Succeed())
		g.Expect(hubCP.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "consumer-" + ns, Namespace: namespace},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "consumer-" + ns},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "consumer", Namespace: ns}}})).To(Succeed())
	}
	g.Expect(hubCP.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "consumer", Namespace: ns}})).To(Succeed())
	role(ns, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})
	role(placementv1alpha1.DefaultClusterSet, rbacv1.PolicyRule{APIGroups: []string{cpv1alpha1.GroupVersion.Group}, Resources: []string{"clusterprofiles"}, Verbs: []string{"get"}})
	cfg, err := testenv.ServiceAccountConfig(ctx, hubCP.Config, ns, "consumer", time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	kc := clientcmdapi.NewConfig()
	kc.Clusters["hub"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["consumer"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["consumer"] = &clientcmdapi.Context{Cluster: "hub", AuthInfo: "consumer", Namespace: ns}
	kc.CurrentContext = "consumer"
	path := filepath.Join(t.TempDir(), "consumer.kubeconfig")
	g.Expect(clientcmd.WriteToFile(*kc, path)).To(Succeed())
	return path
}

// providersFile writes the consumer's access-provider configuration: the
// upstream secretreader plugin, built from sigs.k8s.io/cluster-inventory-api by
// make build, reading the hub as the consumer.
func providersFile(t *testing.T, kubeconfig string) string {
	t.Helper()
	g := NewWithT(t)
	plugin, err := testenv.Binary("secretreader-plugin")
	g.Expect(err).NotTo(HaveOccurred())
	b, err := json.Marshal(map[string]any{"providers": []any{map[string]any{
		"name": placementv1alpha1.SecretReaderProvider,
		"execConfig": map[string]any{
			"apiVersion": "client.authentication.k8s.io/v1", "command": plugin, "provideClusterInfo": true,
			"env": []any{map[string]any{"name": "KUBECONFIG", "value": kubeconfig}},
		},
	}}})
	g.Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(t.TempDir(), "providers.json")
	g.Expect(os.WriteFile(path, b, 0o600)).To(Succeed())
	return path
}

// forceRemove removes a Work from the hub without its agent: its finalizer taken
// away by hand, as an operator (or a lost hub) would.
func forceRemove(t *testing.T, w *workv1alpha1.Work) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(updateOnHub(w, func(w *workv1alpha1.Work) { w.Finalizers = nil })).To(Succeed())
	g.Expect(client.IgnoreNotFound(hubCP.Client.Delete(t.Context(), w))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(hubCP.Client.Get(t.Context(), client.ObjectKeyFromObject(w), &workv1alpha1.Work{}))
	}).Should(BeTrue())
}

// setProperty writes a ClusterProperty on a member, as its admin does, and
// removes it when the test ends.
func setProperty(t *testing.T, cluster, name, value string) {
	t.Helper()
	prop := &aboutv1alpha1.ClusterProperty{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: aboutv1alpha1.ClusterPropertySpec{Value: value}}
	NewWithT(t).Expect(members[cluster].Client.Create(t.Context(), prop)).To(Succeed())
	t.Cleanup(func() { _ = members[cluster].Client.Delete(context.Background(), prop) })
}

// bigCRD is a CustomResourceDefinition whose schema has fields properties, each
// with a long description, as an operator's CRDs have: about 330 bytes a field.
// It is unstructured: the hub's scheme has no apiextensions types.
func bigCRD(g Gomega, group, plural string, fields int) *unstructured.Unstructured {
	props := map[string]apiextensionsv1.JSONSchemaProps{}
	for i := range fields {
		props[fmt.Sprintf("field%04d", i)] = apiextensionsv1.JSONSchemaProps{Type: "string",
			Description: fmt.Sprintf("field%04d configures one aspect of the operand; ", i) + strings.Repeat("it is described at length, as generated API references are. ", 4)}
	}
	kind := strings.ToUpper(plural[:1]) + plural[1:len(plural)-1]
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group, Labels: map[string]string{"lodestar-test": group}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: plural[:len(plural)-1], Kind: kind, ListKind: kind + "List"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object", Properties: props}}}}}},
		},
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	g.Expect(err).NotTo(HaveOccurred())
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	return u
}

// crdOf is an empty CRD object to read one into.
func crdOf() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	return u
}

func webObjects(ns string) (*corev1.ConfigMap, *appsv1.Deployment, *corev1.ConfigMap) {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "web-config", Namespace: ns},
		Data:       map[string]string{"greeting": "hello"},
	}
	labels := map[string]string{"app": "web"}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
			},
		},
	}
	unselected := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "not-placed", Namespace: ns}, Data: map[string]string{"k": "v"}}
	return cm, deploy, unselected
}

// createWebApp creates the web ConfigMap (changed by edit, when given) and
// Deployment of webObjects on the hub.
func createWebApp(t *testing.T, ns string, edit func(*corev1.ConfigMap)) {
	t.Helper()
	g := NewWithT(t)
	cm, deploy, _ := webObjects(ns)
	if edit != nil {
		edit(cm)
	}
	g.Expect(hubCP.Client.Create(t.Context(), cm)).To(Succeed())
	g.Expect(hubCP.Client.Create(t.Context(), deploy)).To(Succeed())
}

func webPlacement(ns string) *placementv1alpha1.Placement {
	return &placementv1alpha1.Placement{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{
				{Version: "v1", Kind: "ConfigMap", Name: "web-config"},
				{Group: "apps", Version: "v1", Kind: "Deployment", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
			},
			Scheduling: placementv1alpha1.Scheduling{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "production"}}},
		},
	}
}

// configMapPlacement creates a namespace of its own with the web ConfigMap on the
// hub, and returns a Placement (not created) that places only the ConfigMap.
func configMapPlacement(t *testing.T) (string, *corev1.ConfigMap, *placementv1alpha1.Placement) {
	t.Helper()
	ns := newNamespace(t)
	cm, _, _ := webObjects(ns)
	NewWithT(t).Expect(hubCP.Client.Create(t.Context(), cm)).To(Succeed())
	p := webPlacement(ns)
	p.Spec.ResourceSelectors = p.Spec.ResourceSelectors[:1]
	return ns, cm, p
}

// onOneThenEither creates p (numberOfClusters 1) on the production member first,
// waits until its objects are available there, then widens it to either member:
// it stays on member-1, which the test then drains.
func onOneThenEither(t *testing.T, p *placementv1alpha1.Placement) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	p.Spec.Scheduling.NumberOfClusters = ptr.To[int32](1)
	p.Spec.Scheduling.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "production"}}
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		w := workOf(g, p, member1)
		g.Expect(w).NotTo(BeNil())
		g.Expect(workAvailable(w)).To(BeTrue())
	}).Should(Succeed())
	g.Expect(updateOnHub(p, func(p *placementv1alpha1.Placement) {
		p.Spec.Scheduling.ClusterSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"production", "staging"}},
		}}
	})).To(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(workOf(g, p, member2)).To(BeNil(), "one cluster is enough: the Placement stays where it is")
	}).Should(Succeed())

	g.Expect(fleet.Drain(ctx, hubCP.Client, "", member1, time.Now(), fleet.DrainOptions{})).To(Succeed())
	t.Cleanup(func() { _ = fleet.Uncordon(context.Background(), hubCP.Client, "", member1) })
}

// extraMembers starts member-3 and member-4 with their agents, once for the
// package; stopFleet stops them.
func extraMembers(t *testing.T) {
	t.Helper()
	extraOnce.Do(func() {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, m := range []struct {
			name  string
			start func(string, *runtime.Scheme) (*testenv.ControlPlane, error)
		}{{member3, testenv.StartFullMember}, {member4, testenv.StartMember}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cp, err := m.start(m.name, scheme.Agent())
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					extraErr = err
					return
				}
				members[m.name] = cp
			}()
		}
		wg.Wait()
		if extraErr != nil {
			return
		}
		for _, name := range []string{member3, member4} {
			if extraErr = members[name].InstallDebugRoles(context.Background()); extraErr != nil {
				return
			}
			cfg, err := fleet.Join(context.Background(), hubCP.Config, hubCP.Client, fleet.JoinOptions{
				Name: name, ClusterSet: auxSet, Labels: map[string]string{"rollout-test": "true"}, TokenTTL: 48 * time.Hour})
			if err != nil {
				extraErr = err
				return
			}
			extraHub[name] = cfg
			if extraErr = startExtraAgent(name); extraErr != nil {
				return
			}
		}
	})
	g := NewWithT(t)
	g.Expect(extraErr).NotTo(HaveOccurred())
	for _, name := range []string{member3, member4} {
		g.Eventually(func(g Gomega) {
			g.Expect(meta.IsStatusConditionTrue(getProfile(g, auxSet, name).Status.Conditions, placementv1alpha1.AgentReachableCondition)).To(BeTrue())
		}).Should(Succeed())
	}
}

// startExtraAgent runs the agent of an extra member until stopExtraAgent.
func startExtraAgent(name string) error {
	a, err := agent.NewManager(agent.Options{
		ClusterName: name, ClusterSet: auxSet, Hub: extraHub[name], Member: members[name].Config, Debug: debugOptions,
		Manager:        ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"},
		Config:         agentConfig,
		AgentNamespace: "lodestar-system",
		LeaseDuration:  2 * time.Second,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := a.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "agent stopped:", name, err)
		}
	}()
	extraMu.Lock()
	extraAgents[name] = func() { cancel(); <-done }
	extraMu.Unlock()
	return nil
}

func stopExtraAgent(name string) {
	extraMu.Lock()
	stop := extraAgents[name]
	delete(extraAgents, name)
	extraMu.Unlock()
	if stop != nil {
		stop()
	}
}

// stopExtraMembers stops what extraMembers started.
func stopExtraMembers() {
	for _, name := range []string{member3, member4} {
		stopExtraAgent(name)
		if cp := members[name]; cp != nil {
			if err := cp.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "stopping a control plane:", err)
			}
		}
	}
}

// sample calls probe every interval until the returned stop, which returns once
// the last probe is done.
func sample(every time.Duration, probe func()) (stop func()) {
	done, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-done:
				return
			case <-time.After(every):
			}
			probe()
		}
	}()
	return func() { close(done); <-sampled }
}

// rolloutNamespace creates a namespace whose Placements may use the default and
// the aux cluster sets, with the web ConfigMap (greeting v1) in it.
func rolloutNamespace(t *testing.T) string {
	t.Helper()
	g := NewWithT(t)
	ns := newTenant(t, placementv1alpha1.DefaultClusterSet, auxSet)
	cm, _, _ := webObjects(ns)
	cm.Data["greeting"] = "v1"
	g.Expect(hubCP.Client.Create(t.Context(), cm)).To(Succeed())
	return ns
}

// greetingPlacement is a Placement of the web ConfigMap on the named clusters.
func greetingPlacement(ns string, clusters []string, strategy placementv1alpha1.RolloutStrategy) *placementv1alpha1.Placement {
	return &placementv1alpha1.Placement{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{{Version: "v1", Kind: "ConfigMap", Name: "web-config"}},
			Scheduling:        placementv1alpha1.Scheduling{ClusterNames: clusters},
			Strategy:          strategy,
		},
	}
}

func setGreeting(t *testing.T, ns, greeting string) {
	t.Helper()
	NewWithT(t).Expect(updateOnHub(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-config"}},
		func(cm *corev1.ConfigMap) { cm.Data["greeting"] = greeting })).To(Succeed())
}

// sliceFleet creates a cluster set (one of sliceSets, which the hub manages) of n
// managed, healthy ClusterProfiles named c-001..c-<n> (with their hub namespaces)
// and a tenant namespace bound to it, and removes the profiles when the test ends.
func sliceFleet(t *testing.T, n int) (set, tenant string) {
	t.Helper()
	g := NewWithT(t)
	i := int(nextSliceSet.Add(1)) - 1
	g.Expect(i).To(BeNumerically("<", len(sliceSets)), "more slice fleets than the hub manages cluster sets for")
	set = sliceSets[i]
	// The hub manager made the namespace when it marked the set as its own.
	g.Expect(hubCP.Client.Get(t.Context(), client.ObjectKey{Name: set}, &corev1.Namespace{})).To(Succeed())
	tenant = newTenant(t, set)
	for i := 1; i <= n; i++ {
		addSliceCluster(t, set, fmt.Sprintf("c-%03d", i))
	}
	return set, tenant
}

// addSliceCluster adds one healthy cluster to set, labelled slice=yes.
func addSliceCluster(t *testing.T, set, name string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	name = set + "-" + name // cluster names are unique across sets
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names.ClusterNamespace(name)}}
	g.Expect(client.IgnoreAlreadyExists(hubCP.Client.Create(ctx, ns))).To(Succeed())
	p := &cpv1alpha1.ClusterProfile{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: set, Labels: map[string]string{"slice": "yes"}},
		Spec:       cpv1alpha1.ClusterProfileSpec{ClusterManager: cpv1alpha1.ClusterManager{Name: scheduler.ClusterManagerName}},
	}
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	// A heartbeat as an agent's, good for the test's length: the cluster health
	// controller reports the cluster reachable and healthy.
	g.Expect(client.IgnoreAlreadyExists(hubCP.Client.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: placementv1alpha1.AgentLeaseName, Namespace: ns.Name,
			Labels:      map[string]string{placementv1alpha1.AgentLeaseLabel: "true"},
			Annotations: map[string]string{placementv1alpha1.MemberReadyAnnotation: "true"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](3600), RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}))).To(Succeed())
	t.Cleanup(func() {
		_ = hubCP.Client.Delete(context.Background(), p)
	})
}

// runAux joins an aux cluster named after prefix and runs its agent on member-2,
// with its options changed by mutate; it returns the cluster's name, the options
// and how to stop the agent.
func runAux(t *testing.T, prefix string, mutate func(*agent.Options)) (string, agent.Options, func()) {
	t.Helper()
	name, cfg := joinAux(t, prefix, 0)
	opts := auxAgent(name, cfg, member2)
	mutate(&opts)
	return name, opts, startAgent(t, opts)
}

// setServedVersions rewrites which versions of a CRD on a member are served, and
// which one is stored.
func setServedVersions(t *testing.T, cluster string, crd *unstructured.Unstructured, served map[string]bool, storage string) {
	t.Helper()
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(crd.GroupVersionKind())
	obj.SetName(crd.GetName())
	NewWithT(t).Expect(updateWith(members[cluster].Client, obj, func(o *unstructured.Unstructured) {
		versions, _, _ := unstructured.NestedSlice(o.Object, "spec", "versions")
		for _, v := range versions {
			m := v.(map[string]any)
			m["served"] = served[m["name"].(string)]
			m["storage"] = m["name"] == storage
		}
		_ = unstructured.SetNestedSlice(o.Object, versions, "spec", "versions")
	})).To(Succeed())
}

// createLabelled creates the YAML documents in ns, each labelled app=shop, with
// GROUP replaced by group and NAMESPACE by ns.
func createLabelled(t *testing.T, ns, group, docs string) []*unstructured.Unstructured {
	t.Helper()
	g := NewWithT(t)
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(strings.NewReplacer("GROUP", group, "NAMESPACE", ns).Replace(docs), "\n---\n") {
		obj := &unstructured.Unstructured{}
		g.Expect(yaml.Unmarshal([]byte(doc), &obj.Object)).To(Succeed())
		obj.SetNamespace(ns)
		obj.SetLabels(map[string]string{"app": "shop"})
		g.Expect(hubCP.Client.Create(t.Context(), obj)).To(Succeed(), "creating %s %s", obj.GetKind(), obj.GetName())
		out = append(out, obj)
	}
	return out
}

// deletePlacement deletes p and waits until its Works are gone from the hub.
func deletePlacement(t *testing.T, p *placementv1alpha1.Placement) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(client.IgnoreNotFound(hubCP.Client.Delete(context.Background(), p))).To(Succeed())
	g.Eventually(func() error {
		return hubCP.Client.Get(context.Background(), client.ObjectKeyFromObject(p), &placementv1alpha1.Placement{})
	}).Should(Satisfy(apierrors.IsNotFound))
}

// setDeploymentStatus writes a Deployment's status on member-2, which runs no
// deployment controller, as that controller would: ready replicas of its spec,
// observed at its generation.
func setDeploymentStatus(t *testing.T, ns, name string, ready int32) {
	t.Helper()
	setDeploymentStatusOn(t, member2, ns, name, ready)
}

// setDeploymentStatusOn is setDeploymentStatus on another member without
// controllers.
func setDeploymentStatusOn(t *testing.T, cluster, ns, name string, ready int32) {
	t.Helper()
	standIn(t, cluster, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, func(d *appsv1.Deployment) {
		want := ptr.Deref(d.Spec.Replicas, 1)
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration: d.Generation, Replicas: want, UpdatedReplicas: want, ReadyReplicas: ready, AvailableReplicas: ready,
			UnavailableReplicas: want - ready,
		}
	})
}

// standIn writes an object's status on a member as its controller would
// (set), once the object is there, again on a conflict.
func standIn[T client.Object](t *testing.T, cluster string, obj T, set func(T)) {
	t.Helper()
	c := members[cluster].Client
	NewWithT(t).Eventually(func() error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
				return err
			}
			set(obj)
			return c.Status().Update(context.Background(), obj)
		})
	}).Should(Succeed())
}

// newWork returns a hand-written Work for cluster with the given strategy and
// manifests; it is deleted when the test ends.
func newWork(t *testing.T, cluster, name string, strategy *lodestarworkv1alpha1.ApplyStrategy, manifests ...workv1alpha1.Manifest) *workv1alpha1.Work {
	t.Helper()
	w := &workv1alpha1.Work{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: names.ClusterNamespace(cluster), Annotations: map[string]string{}},
		Spec:       workv1alpha1.WorkSpec{Workload: workv1alpha1.WorkloadTemplate{Manifests: manifests}},
	}
	if strategy != nil {
		b, err := json.Marshal(strategy)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		w.Annotations[lodestarworkv1alpha1.ApplyStrategyAnnotation] = string(b)
	}
	NewWithT(t).Expect(hubCP.Client.Create(t.Context(), w)).To(Succeed())
	t.Cleanup(func() { _ = hubCP.Client.Delete(context.Background(), w) })
	return w
}

// createOnMember creates a namespace and a ConfigMap on a member, as someone other
// than Lodestar would.
func createOnMember(t *testing.T, cluster, ns, name string, data map[string]string) {
	t.Helper()
	g := NewWithT(t)
	c := members[cluster].Client
	if err := c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(c.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: data})).To(Succeed())
}

func cmManifest(t *testing.T, ns, name string, data map[string]any) workv1alpha1.Manifest {
	return manifest(t, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name, "namespace": ns}, "data": data})
}

// configMaps are the rules the standard edit role gives a tenant for its
// ConfigMaps (the test hub runs no controller that aggregates roles).
var configMaps = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"}}}

// identity creates a ServiceAccount in ns bound there to the ClusterRoles roles
// (and, with extra, to a Role of those rules too), and returns a hub client that uses its
// token: a person with exactly that access.
func identity(t *testing.T, ns, name string, extra []rbacv1.PolicyRule, roles ...string) client.Client {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	g.Expect(hubCP.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})).To(Succeed())
	refs := make([]rbacv1.RoleRef, 0, len(roles)+1)
	for _, role := range roles {
		refs = append(refs, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role})
	}
	if extra != nil {
		g.Expect(hubCP.Client.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: extra})).To(Succeed())
		refs = append(refs, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name})
	}
	for _, ref := range refs {
		g.Expect(hubCP.Client.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-" + rand.String(5), Namespace: ns},
			RoleRef:    ref,
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
		})).To(Succeed())
	}
	cfg, err := testenv.ServiceAccountConfig(ctx, hubCP.Config, ns, name, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	c, err := client.New(cfg, client.Options{Scheme: scheme.Hub()})
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

func newBinding(ns, set string) *placementv1alpha1.ClusterSetBinding {
	return &placementv1alpha1.ClusterSetBinding{
		ObjectMeta: metav1.ObjectMeta{Name: set, Namespace: ns},
		Spec:       placementv1alpha1.ClusterSetBindingSpec{ClusterSet: set},
	}
}

// externalDecision is a PlacementDecision as an external scheduler writes it for
// p (created): owned by p, for p's scheduler, naming refs.
func externalDecision(p *placementv1alpha1.Placement, name string, refs ...cpv1alpha1.ClusterProfileReference) *cpv1alpha1.PlacementDecision {
	pd := &cpv1alpha1.PlacementDecision{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: p.Namespace, Labels: map[string]string{cpv1alpha1.PlacementKeyLabel: p.Name},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: placementv1alpha1.GroupVersion.String(), Kind: "Placement", Name: p.Name, UID: p.UID,
			}},
		},
		SchedulerName: p.Spec.Scheduling.SchedulerName,
	}
	for _, ref := range refs {
		pd.Decisions = append(pd.Decisions, cpv1alpha1.ClusterDecision{ClusterProfileRef: ref, Reason: "acme says so"})
	}
	return pd
}

// examples are the n example files of docs/examples/<feature>/ and the text
// of docs/<feature>.md, which shows them.
func examples(t *testing.T, feature string, n int) ([]string, []byte) {
	t.Helper()
	return examplesOn(t, feature, feature, n)
}

// examplesOn are the n example files of docs/examples/<dir>/ and the text of
// docs/<page>.md, which shows them.
func examplesOn(t *testing.T, dir, page string, n int) ([]string, []byte) {
	t.Helper()
	g := NewWithT(t)
	files, err := filepath.Glob(filepath.Join("..", "..", "docs", "examples", dir, "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).To(HaveLen(n))
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", page+".md"))
	g.Expect(err).NotTo(HaveOccurred())
	return files, doc
}

// applyExamples applies each example of docs/examples/<feature> (n files)
// to a namespace of its own bound to the default cluster set, and runs its
// check, keyed by file name.
func applyExamples(t *testing.T, feature string, n int, checks map[string]func(t *testing.T, ns string)) {
	t.Helper()
	files, doc := examples(t, feature, n)
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			g := NewWithT(t)
			check, ok := checks[filepath.Base(file)]
			g.Expect(ok).To(BeTrue(), "a check for %s", filepath.Base(file))
			ns := newNamespace(t)
			for _, obj := range exampleObjects(t, file, doc, ns) {
				g.Expect(hubCP.Client.Create(t.Context(), obj)).To(Succeed(), "%s %s", obj.GetKind(), obj.GetName())
			}
			check(t, ns)
		})
	}
}

// exampleObjects reads an example file of docs/examples (its documents
// separated by "---"), checks that doc shows it as it is, and returns its
// objects in namespace ns.
func exampleObjects(t *testing.T, file string, doc []byte, ns string) []*unstructured.Unstructured {
	t.Helper()
	g := NewWithT(t)
	b, err := os.ReadFile(file)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(doc)).To(ContainSubstring(string(b)), "the page shows %s as it is", filepath.Base(file))
	var out []*unstructured.Unstructured
	for _, part := range strings.Split(string(b), "\n---\n") {
		obj := &unstructured.Unstructured{}
		g.Expect(yaml.Unmarshal([]byte(part), &obj.Object)).To(Succeed())
		obj.SetNamespace(ns)
		out = append(out, obj)
	}
	return out
}

// restartExtraAgent starts the agent of an extra member that stopExtraAgent
// stopped (nothing when it runs).
func restartExtraAgent(t *testing.T, name string) {
	t.Helper()
	extraMu.Lock()
	_, running := extraAgents[name]
	extraMu.Unlock()
	if running {
		return
	}
	if err := startExtraAgent(name); err != nil {
		t.Errorf("restarting the agent of %s: %v", name, err)
	}
}

// hubKubectl runs the kubectl the tests are built with against the hub, as its
// administrator (a kubeconfig written once per test), and returns its combined
// output.
func hubKubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return hubTool(t, testenv.EventuallyTimeout, filepath.Join(os.Getenv(testenv.AssetsEnv), "kubectl"), args...)
}

// createYAML creates the objects of a YAML text (documents separated by
// "---") in namespace ns as a user's kubectl does: as they are written, with
// nothing the Go types would add.
func createYAML(t *testing.T, ns, text string) {
	t.Helper()
	NewWithT(t).Expect(testenv.CreateYAML(t.Context(), hubCP.Client, ns, text)).To(Succeed())
}

// placementsGoAtEnd deletes, when the test ends, the Placements of ns and
// waits until they are gone, so that what they run on the members (pods that
// take the fake nodes' capacity) does not outlive the test.
func placementsGoAtEnd(t *testing.T, ns string) {
	t.Helper()
	t.Cleanup(func() {
		g := NewWithT(t)
		ctx := context.Background()
		g.Expect(hubCP.Client.DeleteAllOf(ctx, &placementv1alpha1.Placement{}, client.InNamespace(ns))).To(Succeed())
		g.Eventually(func(g Gomega) {
			list := &placementv1alpha1.PlacementList{}
			g.Expect(hubCP.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			g.Expect(list.Items).To(BeEmpty())
		}).Should(Succeed())
	})
}

// migrateJob is a Job that runs once, as a user writes it (YAML).
const migrateJob = `
apiVersion: batch/v1
kind: Job
metadata: {name: migrate}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: migrate, image: busybox:1.36, command: [sh, -c, "echo done"]}]
`
