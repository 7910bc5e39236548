package fleetview

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func deployment(image string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "d-1", Generation: 1,
			Annotations: map[string]string{"meta.helm.sh/release-name": "shop", corev1.LastAppliedConfigAnnotation: "{}"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: image}}},
			},
		},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2},
	}
}

// stored is what the plan's ReplicaSets are once written: the ReplicaSets
// the next plan starts from.
func stored(p Plan, keep []appsv1.ReplicaSet) []appsv1.ReplicaSet {
	byName := map[string]appsv1.ReplicaSet{}
	for _, rs := range keep {
		byName[rs.Name] = rs
	}
	for _, rs := range p.Delete {
		delete(byName, rs.Name)
	}
	for _, rs := range p.Apply {
		byName[rs.Name] = *rs
	}
	var out []appsv1.ReplicaSet
	for _, rs := range byName {
		out = append(out, rs)
	}
	return out
}

func TestTheNewReplicaSetIsTheCurrentTemplates(t *testing.T) {
	g := NewWithT(t)
	dep := deployment("nginx:1.27")
	p := For(dep, nil)
	g.Expect(p.Apply).To(HaveLen(1))
	rs := p.Apply[0]
	hash := Hash(&dep.Spec.Template)
	g.Expect(rs.Name).To(Equal("web-" + hash))
	g.Expect(rs.Annotations).To(Equal(map[string]string{"meta.helm.sh/release-name": "shop", RevisionAnnotation: "1"}),
		"the Deployment's annotations, as kubectl rollout undo restores them, and the revision")
	g.Expect(rs.Labels).To(Equal(map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: hash, Label: "web"}))
	g.Expect(rs.Spec.Selector.MatchLabels).To(Equal(map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: hash}))
	g.Expect(rs.Spec.Replicas).To(HaveValue(BeZero()), "it asks for no pod")
	g.Expect(SameTemplate(&rs.Spec.Template, &dep.Spec.Template)).To(BeTrue())
	g.Expect(*rs.OwnerReferences[0].Controller).To(BeTrue())
	g.Expect(rs.OwnerReferences[0].UID).To(BeEquivalentTo("d-1"))
	g.Expect(p.Status[rs.Name]).To(Equal(appsv1.ReplicaSetStatus{Replicas: 2, FullyLabeledReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}))
	g.Expect(dep.Spec.Template.Labels).NotTo(HaveKey(appsv1.DefaultDeploymentUniqueLabelKey), "the Deployment is not changed")
}

func TestRevisionsFollowTheTemplates(t *testing.T) {
	g := NewWithT(t)
	v1 := deployment("nginx:1.27")
	rs := stored(For(v1, nil), nil)
	v2 := deployment("nginx:1.28")
	v2.Generation, v2.Status.ObservedGeneration = 2, 1
	p := For(v2, rs)
	g.Expect(p.Apply).To(HaveLen(1))
	g.Expect(p.Apply[0].Annotations).To(HaveKeyWithValue(RevisionAnnotation, "2"))
	g.Expect(p.Status[p.Apply[0].Name]).To(BeZero(), "no cluster runs generation 2 yet: its counts are of revision 1")
	g.Expect(p.Status).To(HaveKeyWithValue("web-"+Hash(&v1.Spec.Template), BeZero()), "the earlier ReplicaSet shows no pod")
	rs = stored(p, rs)
	g.Expect(rs).To(HaveLen(2))

	// kubectl rollout undo: the first template comes back as revision 3.
	back := deployment("nginx:1.27")
	back.Generation = 3
	back.Status.ObservedGeneration = 3
	p = For(back, rs)
	g.Expect(p.Apply[0].Name).To(Equal("web-" + Hash(&v1.Spec.Template)))
	g.Expect(p.Apply[0].Annotations).To(HaveKeyWithValue(RevisionAnnotation, "3"))
	g.Expect(p.Apply[0].Annotations).To(HaveKeyWithValue(RevisionHistoryAnnotation, "1"))
	g.Expect(p.Delete).To(BeEmpty())

	// The history limit: one earlier ReplicaSet kept.
	rs = stored(p, rs)
	v4 := deployment("nginx:1.29")
	v4.Spec.RevisionHistoryLimit = ptr.To[int32](1)
	p = For(v4, rs)
	g.Expect(p.Apply[0].Annotations).To(HaveKeyWithValue(RevisionAnnotation, "4"))
	g.Expect(p.Delete).To(ConsistOf(HaveField("Name", "web-"+Hash(&v2.Spec.Template))), "the oldest revision (2) goes")
}

func TestTheCurrentTemplatesShareOfTheFleet(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   appsv1.DeploymentStatus
		want appsv1.ReplicaSetStatus
	}{
		{"all updated and ready", appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2},
			appsv1.ReplicaSetStatus{Replicas: 2, FullyLabeledReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}},
		{"a surge: one old pod ready, one new not yet", appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 1, ReadyReplicas: 2, AvailableReplicas: 2},
			appsv1.ReplicaSetStatus{Replicas: 1, FullyLabeledReplicas: 1, ReadyReplicas: 0, AvailableReplicas: 0}},
		{"never more ready than updated", appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 1, ReadyReplicas: 2, AvailableReplicas: 2},
			appsv1.ReplicaSetStatus{Replicas: 1, FullyLabeledReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dep := deployment("nginx:1.27")
			dep.Status = tc.st
			p := For(dep, nil)
			NewWithT(t).Expect(p.Status[p.Apply[0].Name]).To(Equal(tc.want))
		})
	}
}
