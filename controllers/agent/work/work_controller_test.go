package work_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
)

// A Work whose apply strategy the agent cannot read is not applied at all: its
// Applied condition says why, and the agent writes nothing to the member.
func TestAnInvalidStrategyWritesNothing(t *testing.T) {
	f := newFixture(t)
	app := "app-" + rand.String(5)
	w := f.newWork("web", map[string]string{lodestarworkv1alpha1.ApplyStrategyAnnotation: `{"type":"Replace"}`},
		manifest(configMap(app, "settings", nil)))
	f.g.Expect(f.reconcile(w)).To(MatchError(ContainSubstring(`unknown apply strategy type "Replace"`)))
	c := meta.FindStatusCondition(f.read(w).Status.Conditions, lodestarworkv1alpha1.ConditionApplied)
	f.g.Expect(c).NotTo(BeNil())
	f.g.Expect(c.Reason).To(Equal(lodestarworkv1alpha1.ReasonInvalidStrategy))
	f.g.Expect(c.Message).To(HaveSuffix("nothing was applied"))
	err := apiServer.Client.Get(t.Context(), client.ObjectKey{Namespace: app, Name: "settings"}, &corev1.ConfigMap{})
	f.g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
	f.g.Expect(f.applies.count("ConfigMap")).To(BeZero())
}

// The agent holds a Work with its finalizer before it applies anything, and
// releases it once it removed what it created: then the Work goes.
func TestTheAgentHoldsAWorkWhileItsObjectsAreOnTheMember(t *testing.T) {
	f := newFixture(t)
	app := "app-" + rand.String(5)
	w := f.newWork("web", nil, manifest(configMap(app, "settings", map[string]string{"k": "v"})))
	f.g.Expect(f.reconcile(w)).To(Succeed())
	f.g.Expect(f.read(w).Finalizers).To(ConsistOf(lodestarworkv1alpha1.WorkFinalizer))
	created := &corev1.ConfigMap{}
	f.g.Expect(apiServer.Client.Get(t.Context(), client.ObjectKey{Namespace: app, Name: "settings"}, created)).To(Succeed())
	ns := &corev1.Namespace{}
	f.g.Expect(apiServer.Client.Get(t.Context(), client.ObjectKey{Name: app}, ns)).To(Succeed())
	f.g.Expect(ns.Labels).To(HaveKeyWithValue(lodestarworkv1alpha1.CreatedNamespaceLabel, "true"), "a namespace the manifests needed")

	f.g.Expect(apiServer.Client.Delete(t.Context(), w)).To(Succeed())
	f.g.Expect(f.reconcile(w)).To(Succeed())
	err := apiServer.Client.Get(t.Context(), client.ObjectKeyFromObject(w), w)
	f.g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "released and gone: %v", err)
	got := &corev1.ConfigMap{}
	err = apiServer.Client.Get(t.Context(), client.ObjectKeyFromObject(created), got)
	f.g.Expect(apierrors.IsNotFound(err) || err == nil && !got.DeletionTimestamp.IsZero()).To(BeTrue(), "deleted: %v", err)
	f.g.Expect(apiServer.Client.Get(t.Context(), client.ObjectKey{Name: app}, ns)).To(Succeed(), "the namespace it created stays")
	f.g.Expect(ns.DeletionTimestamp).To(BeNil())
}
