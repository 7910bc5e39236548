package consumeraccess

import (
	"encoding/json"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
)

func grant() *placementv1alpha1.ConsumerAccessGrant {
	return &placementv1alpha1.ConsumerAccessGrant{ObjectMeta: metav1.ObjectMeta{Name: "reporter"}, Spec: placementv1alpha1.ConsumerAccessGrantSpec{
		Consumers:  []placementv1alpha1.ConsumerRef{{Namespace: "tools", Name: "a"}, {Namespace: "tools", Name: "b"}},
		ClusterSet: "fleet",
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list"}}},
	}}
}

// The hub role names exactly the granted clusters; with none, it grants
// nothing (a rule without names would grant every cluster).
func TestHubRoleNamesTheClusters(t *testing.T) {
	g := NewWithT(t)
	role := HubRole("reporter", []string{"b", "a"})
	g.Expect(role.Rules).To(HaveLen(1))
	g.Expect(role.Rules[0].ResourceNames).To(Equal([]string{"a", "b"}))
	g.Expect(role.Rules[0].Resources).To(Equal([]string{"clusters/proxy"}))
	g.Expect(HubRole("reporter", nil).Rules).To(BeEmpty())
	b := HubBinding(grant())
	g.Expect(b.Subjects).To(ConsistOf(
		rbacv1.Subject{Kind: "ServiceAccount", Namespace: "tools", Name: "a"},
		rbacv1.Subject{Kind: "ServiceAccount", Namespace: "tools", Name: "b"}))
}

// The Work carries the grant's rules, bound to each consumer's member user,
// and is named without a dot (never a Placement's Work).
func TestWorkCarriesTheRulesToTheConsumers(t *testing.T) {
	g := NewWithT(t)
	w, err := Work(grant(), "edge-1", "hub-a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(w.Name).NotTo(ContainSubstring("."))
	g.Expect(w.Namespace).To(Equal("lodestar-cluster-edge-1"))
	g.Expect(w.Labels).To(HaveKeyWithValue(placementv1alpha1.HubManagerLabel, "hub-a"))
	g.Expect(w.Spec.Workload.Manifests).To(HaveLen(2))
	role, binding := &rbacv1.ClusterRole{}, &rbacv1.ClusterRoleBinding{}
	g.Expect(json.Unmarshal(w.Spec.Workload.Manifests[0].Raw, role)).To(Succeed())
	g.Expect(json.Unmarshal(w.Spec.Workload.Manifests[1].Raw, binding)).To(Succeed())
	g.Expect(role.Rules).To(Equal(grant().Spec.Rules))
	g.Expect(binding.RoleRef.Name).To(Equal(role.Name))
	g.Expect(binding.Subjects).To(ConsistOf(
		HaveField("Name", "lodestar:consumer:tools:a"), HaveField("Name", "lodestar:consumer:tools:b")))
}

func TestAppliedIsForTheWorksGeneration(t *testing.T) {
	g := NewWithT(t)
	w := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
	ok, failure := Applied(w)
	g.Expect(ok).To(BeFalse())
	g.Expect(failure).To(BeEmpty())
	w.Status.Conditions = []metav1.Condition{{Type: lodestarworkv1alpha1.ConditionApplied, Status: metav1.ConditionTrue, ObservedGeneration: 1}}
	ok, _ = Applied(w)
	g.Expect(ok).To(BeFalse(), "an earlier generation's")
	w.Status.Conditions[0].ObservedGeneration = 2
	ok, _ = Applied(w)
	g.Expect(ok).To(BeTrue())
	w.Status.Conditions[0].Status, w.Status.Conditions[0].Message = metav1.ConditionFalse, "forbidden"
	ok, failure = Applied(w)
	g.Expect(ok).To(BeFalse())
	g.Expect(failure).To(Equal("forbidden"))
}

func TestReady(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Ready(errors.New("bad"), nil, nil).Reason).To(Equal(placementv1alpha1.ReasonInvalidGrantSelector))
	c := Ready(nil, map[string]string{"b": "forbidden", "a": "no"}, []string{"c"})
	g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonRulesFailed))
	g.Expect(c.Message).To(ContainSubstring("a: no; b: forbidden"))
	g.Expect(Ready(nil, nil, []string{"c", "a"}).Message).To(HaveSuffix("a, c"))
	c = Ready(nil, nil, nil)
	g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonRulesApplied))
}

// A Work is current while the hub's carries the same rules for the same
// manager, and not once it is being deleted.
func TestCurrent(t *testing.T) {
	g := NewWithT(t)
	have, err := Work(grant(), "edge-1", "hub-a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(Current(have, have)).To(BeTrue())
	changed := grant()
	changed.Spec.Rules[0].Verbs = []string{"list", "watch"}
	want, err := Work(changed, "edge-1", "hub-a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(Current(have, want)).To(BeFalse(), "other rules")
	want, err = Work(grant(), "edge-1", "hub-b")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(Current(have, want)).To(BeFalse(), "another manager")
	now := metav1.Now()
	have.DeletionTimestamp = &now
	g.Expect(Current(have, have)).To(BeFalse(), "being deleted")
}
