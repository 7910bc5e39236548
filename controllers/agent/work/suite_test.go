package work_test

import (
	"context"
	"encoding/json"
	"os"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/config"
	"github.com/lodestar-dev/lodestar/controllers/agent/work"
	"github.com/lodestar-dev/lodestar/internal/readiness"
	"github.com/lodestar-dev/lodestar/internal/scheme"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// The work reconciler's suite: one API server is both the hub and the member,
// and each test reconciles its Works by calling the reconciler, as its watch
// events would, and looks at the member and at the Works' status.

var (
	apiServer *testenv.ControlPlane
	// s is the scheme of the agent, with the CRDs' own types.
	s = scheme.Agent()
)

func TestMain(m *testing.M) {
	testenv.SetGomegaDefaults()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		panic(err)
	}
	os.Exit(testenv.RunWithHub(m, s, func(cp *testenv.ControlPlane) (func(), error) {
		apiServer = cp
		crds, err := config.MemberCRDs()
		if err != nil {
			return nil, err
		}
		for _, crd := range crds {
			// The hub serves the Multicluster Services CRDs too.
			if err := cp.Client.Create(context.Background(), crd); err != nil && !apierrors.IsAlreadyExists(err) {
				return nil, err
			}
		}
		return nil, nil
	}))
}

// fixture is one test's agent: a work reconciler whose member writes are
// counted, and a hub namespace of its own for its Works.
type fixture struct {
	t       *testing.T
	g       Gomega
	ns      string
	r       *work.Reconciler
	applies *applyCounter
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	g := NewWithT(t)
	f := &fixture{t: t, g: g, ns: "cluster-" + rand.String(6), applies: &applyCounter{byKind: map[string]int{}}}
	g.Eventually(func() error { return apiServer.Client.List(t.Context(), &lodestarworkv1alpha1.AppliedWorkList{}) }).Should(Succeed())
	base, err := client.NewWithWatch(apiServer.Config, client.Options{Scheme: s})
	g.Expect(err).NotTo(HaveOccurred())
	checker, err := readiness.NewChecker(nil)
	g.Expect(err).NotTo(HaveOccurred())
	f.r = &work.Reconciler{Hub: apiServer.Client, Member: f.applies.client(base), Readiness: checker, HubID: "hub-" + f.ns}
	g.Expect(apiServer.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}})).To(Succeed())
	return f
}

// newWork creates a Work of the manifests in the fixture's hub namespace.
func (f *fixture) newWork(name string, annotations map[string]string, manifests ...workv1alpha1.Manifest) *workv1alpha1.Work {
	f.t.Helper()
	w := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns, Annotations: annotations},
		Spec: workv1alpha1.WorkSpec{Workload: workv1alpha1.WorkloadTemplate{Manifests: manifests}}}
	f.g.Expect(apiServer.Client.Create(f.t.Context(), w)).To(Succeed())
	return w
}

// reconcile reconciles the Work once, as an event of it would, and returns the
// error.
func (f *fixture) reconcile(w *workv1alpha1.Work) error {
	f.t.Helper()
	_, err := f.r.Reconcile(f.t.Context(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)})
	return err
}

// read reads the Work from the hub.
func (f *fixture) read(w *workv1alpha1.Work) *workv1alpha1.Work {
	f.t.Helper()
	got := &workv1alpha1.Work{}
	f.g.Expect(apiServer.Client.Get(f.t.Context(), client.ObjectKeyFromObject(w), got)).To(Succeed())
	return got
}

// manifest is the JSON of obj as a Work carries it.
func manifest(obj runtime.Object) workv1alpha1.Manifest {
	b, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: b}}
}

// deployment is a Deployment web in namespace ns with replicas.
func deployment(ns string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": "web"}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}}}},
	}
}

// configMap is a ConfigMap name in namespace ns with data.
func configMap(ns, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: data}
}

// applyCounter counts the applies (not dry runs) the agent sends, by kind.
type applyCounter struct {
	mu     sync.Mutex
	byKind map[string]int
}

func (a *applyCounter) count(kind string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.byKind[kind]
}

func (a *applyCounter) client(c client.WithWatch) client.WithWatch {
	return interceptor.NewClient(c, interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			o := &client.ApplyOptions{}
			o.ApplyOptions(opts)
			if k, ok := obj.(interface{ GetKind() string }); ok && len(o.DryRun) == 0 {
				a.mu.Lock()
				a.byKind[k.GetKind()]++
				a.mu.Unlock()
			}
			return c.Apply(ctx, obj, opts...)
		},
	})
}
