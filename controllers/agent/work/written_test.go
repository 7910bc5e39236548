package work_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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

// The package's Gomega defaults, sized for a busy CI machine (testenv).
func init() {
	testenv.SetGomegaDefaults()
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

// An object that did not change since the agent applied it, or whose status
// alone did, is read, not written, when its Work is reconciled again: a status
// change on the member (a Deployment's replicas becoming available) costs a
// read for its readiness. A change of its spec or of its metadata on the
// member, or of the manifest on the hub, is applied; so is any change of an
// object of a kind without a generation. One API server is both hub and member
// here.
func TestUnchangedObjectsAreReadNotWritten(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	scheme := scheme.Agent()
	g.Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	cp, err := testenv.StartHub(scheme)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = cp.Stop() })
	crds, err := config.MemberCRDs()
	g.Expect(err).NotTo(HaveOccurred())
	for _, crd := range crds {
		g.Expect(cp.Client.Create(ctx, crd)).To(Succeed())
	}
	g.Eventually(func() error { return cp.Client.List(ctx, &lodestarworkv1alpha1.AppliedWorkList{}) }).Should(Succeed())

	base, err := client.NewWithWatch(cp.Config, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	applies := &applyCounter{byKind: map[string]int{}}
	checker, err := readiness.NewChecker(nil)
	g.Expect(err).NotTo(HaveOccurred())
	r := &work.Reconciler{Hub: cp.Client, Member: applies.client(base), Readiness: checker, HubID: "hub-test"}

	g.Expect(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cluster-a"}})).To(Succeed())
	deploy := func(replicas int32) workv1alpha1.Manifest {
		labels := map[string]string{"app": "web"}
		d := &appsv1.Deployment{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "app", Labels: labels},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}}}},
		}
		b, err := json.Marshal(d)
		g.Expect(err).NotTo(HaveOccurred())
		return workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: b}}
	}
	cm, err := json.Marshal(&corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "app"}, Data: map[string]string{"mode": "safe"}})
	g.Expect(err).NotTo(HaveOccurred())
	w := &workv1alpha1.Work{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "cluster-a"},
		Spec: workv1alpha1.WorkSpec{Workload: workv1alpha1.WorkloadTemplate{Manifests: []workv1alpha1.Manifest{
			deploy(2), {RawExtension: runtime.RawExtension{Raw: cm}}}}},
	}
	g.Expect(cp.Client.Create(ctx, w)).To(Succeed())

	// reconcile reconciles the Work once and returns its Deployment on the member.
	reconcileWork := func() *appsv1.Deployment {
		t.Helper()
		_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)})
		g.Expect(err).NotTo(HaveOccurred())
		d := &appsv1.Deployment{}
		g.Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: "app", Name: "web"}, d)).To(Succeed())
		return d
	}
	expectApplies := func(deployments, configMaps int, why string) {
		t.Helper()
		g.Expect(applies.count("Deployment")).To(Equal(deployments), "Deployment applies: %s", why)
		g.Expect(applies.count("ConfigMap")).To(Equal(configMaps), "ConfigMap applies: %s", why)
	}

	workVersion := func() string {
		t.Helper()
		got := &workv1alpha1.Work{}
		g.Expect(cp.Client.Get(ctx, client.ObjectKeyFromObject(w), got)).To(Succeed())
		return got.ResourceVersion
	}
	reconcileWork()
	expectApplies(1, 1, "created")
	written := workVersion()
	d := reconcileWork()
	expectApplies(1, 1, "nothing changed")
	g.Expect(workVersion()).To(Equal(written), "the Work's status is as the creating reconcile wrote it")

	// Its pods become available on the member: a status write.
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
	g.Expect(cp.Client.Status().Update(ctx, d)).To(Succeed())
	reconcileWork()
	expectApplies(1, 1, "a status change")
	got := &workv1alpha1.Work{}
	g.Expect(cp.Client.Get(ctx, client.ObjectKeyFromObject(w), got)).To(Succeed())
	g.Expect(meta.IsStatusConditionTrue(got.Status.ManifestConditions[0].Conditions, lodestarworkv1alpha1.ConditionAvailable)).To(BeTrue(),
		"the status read: %v", got.Status.ManifestConditions[0].Conditions)

	// Its spec changed on the member: set back.
	d.Spec.Replicas = ptr.To[int32](5)
	g.Expect(cp.Client.Update(ctx, d)).To(Succeed())
	d = reconcileWork()
	expectApplies(2, 1, "the spec changed on the member")
	g.Expect(*d.Spec.Replicas).To(BeEquivalentTo(2))

	// A label it sets changed on the member (metadata: no new generation): set back.
	d.Labels["app"] = "changed"
	g.Expect(cp.Client.Update(ctx, d)).To(Succeed())
	d = reconcileWork()
	expectApplies(3, 1, "a label changed on the member")
	g.Expect(d.Labels).To(HaveKeyWithValue("app", "web"))
	reconcileWork()
	expectApplies(3, 1, "nothing changed since it was set back")

	// A ConfigMap has no generation: any change on the member is applied over.
	settings := &corev1.ConfigMap{}
	g.Expect(cp.Client.Get(ctx, client.ObjectKey{Namespace: "app", Name: "settings"}, settings)).To(Succeed())
	settings.Annotations = map[string]string{"noted": "on the member"}
	g.Expect(cp.Client.Update(ctx, settings)).To(Succeed())
	reconcileWork()
	expectApplies(3, 2, "the ConfigMap changed on the member")
	reconcileWork()
	expectApplies(3, 2, "nothing changed since")

	// The manifest changed on the hub.
	g.Expect(cp.Client.Get(ctx, client.ObjectKeyFromObject(w), w)).To(Succeed())
	w.Spec.Workload.Manifests[0] = deploy(3)
	g.Expect(cp.Client.Update(ctx, w)).To(Succeed())
	d = reconcileWork()
	expectApplies(4, 2, "the manifest changed on the hub")
	g.Expect(*d.Spec.Replicas).To(BeEquivalentTo(3))
}
