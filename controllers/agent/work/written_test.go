package work_test

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
)

// writtenFixture is a Work of a Deployment and a ConfigMap, applied once.
type writtenFixture struct {
	*fixture
	app string
	w   *workv1alpha1.Work
}

func newWrittenFixture(t *testing.T) *writtenFixture {
	f := &writtenFixture{fixture: newFixture(t), app: "app-" + rand.String(5)}
	f.w = f.newWork("web", nil, manifest(deployment(f.app, 2)), manifest(configMap(f.app, "settings", map[string]string{"mode": "safe"})))
	f.reconcileWork()
	f.expectApplies(1, 1, "created")
	return f
}

// reconcileWork reconciles the Work once and returns its Deployment on the member.
func (f *writtenFixture) reconcileWork() *appsv1.Deployment {
	f.t.Helper()
	f.g.Expect(f.reconcile(f.w)).To(Succeed())
	d := &appsv1.Deployment{}
	f.g.Expect(apiServer.Client.Get(f.t.Context(), client.ObjectKey{Namespace: f.app, Name: "web"}, d)).To(Succeed())
	return d
}

func (f *writtenFixture) expectApplies(deployments, configMaps int, why string) {
	f.t.Helper()
	f.g.Expect(f.applies.count("Deployment")).To(Equal(deployments), "Deployment applies: %s", why)
	f.g.Expect(f.applies.count("ConfigMap")).To(Equal(configMaps), "ConfigMap applies: %s", why)
}

// An object that did not change since the agent applied it, or whose status
// alone did, is read, not written, when its Work is reconciled again: a status
// change on the member (a Deployment's replicas becoming available) costs a
// read for its readiness.
func TestUnchangedObjectsAreReadNotWritten(t *testing.T) {
	f := newWrittenFixture(t)
	written := f.read(f.w).ResourceVersion
	d := f.reconcileWork()
	f.expectApplies(1, 1, "nothing changed")
	f.g.Expect(f.read(f.w).ResourceVersion).To(Equal(written), "the Work's status is as the creating reconcile wrote it")

	// Its pods become available on the member: a status write.
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
	f.g.Expect(apiServer.Client.Status().Update(t.Context(), d)).To(Succeed())
	f.reconcileWork()
	f.expectApplies(1, 1, "a status change")
	got := f.read(f.w)
	f.g.Expect(meta.IsStatusConditionTrue(got.Status.ManifestConditions[0].Conditions, lodestarworkv1alpha1.ConditionAvailable)).To(BeTrue(),
		"the status read: %v", got.Status.ManifestConditions[0].Conditions)
}

// A change of an object's spec or of its metadata on the member, or of the
// manifest on the hub, is applied; so is any change of an object of a kind
// without a generation.
func TestChangedObjectsAreWritten(t *testing.T) {
	f := newWrittenFixture(t)
	d := f.reconcileWork()

	// Its spec changed on the member: set back.
	d.Spec.Replicas = ptr.To[int32](5)
	f.g.Expect(apiServer.Client.Update(t.Context(), d)).To(Succeed())
	d = f.reconcileWork()
	f.expectApplies(2, 1, "the spec changed on the member")
	f.g.Expect(*d.Spec.Replicas).To(BeEquivalentTo(2))

	// A label it sets changed on the member (metadata: no new generation): set back.
	d.Labels["app"] = "changed"
	f.g.Expect(apiServer.Client.Update(t.Context(), d)).To(Succeed())
	d = f.reconcileWork()
	f.expectApplies(3, 1, "a label changed on the member")
	f.g.Expect(d.Labels).To(HaveKeyWithValue("app", "web"))
	f.reconcileWork()
	f.expectApplies(3, 1, "nothing changed since it was set back")

	// A ConfigMap has no generation: any change on the member is applied over.
	settings := &corev1.ConfigMap{}
	f.g.Expect(apiServer.Client.Get(t.Context(), client.ObjectKey{Namespace: f.app, Name: "settings"}, settings)).To(Succeed())
	settings.Annotations = map[string]string{"noted": "on the member"}
	f.g.Expect(apiServer.Client.Update(t.Context(), settings)).To(Succeed())
	f.reconcileWork()
	f.expectApplies(3, 2, "the ConfigMap changed on the member")
	f.reconcileWork()
	f.expectApplies(3, 2, "nothing changed since")

	// The manifest changed on the hub.
	w := f.read(f.w)
	w.Spec.Workload.Manifests[0] = manifest(deployment(f.app, 3))
	f.g.Expect(apiServer.Client.Update(t.Context(), w)).To(Succeed())
	d = f.reconcileWork()
	f.expectApplies(4, 2, "the manifest changed on the hub")
	f.g.Expect(*d.Spec.Replicas).To(BeEquivalentTo(3))
}
