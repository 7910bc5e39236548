// Package fleetview computes the ReplicaSets a hub Deployment shows the tools
// that read a Deployment's rollout through them: helm's wait looks for the
// Deployment's new ReplicaSet and counts its ready replicas, and kubectl
// rollout history and undo read (and restore) the templates of its earlier
// ReplicaSets. On a hub without a deployment controller nothing else makes
// them. One ReplicaSet per template the Deployment has had, as the deployment
// controller names and numbers them; the current one's status is the fleet's
// (from the Deployment's reflected status), the earlier ones' zero. None of
// them asks for a pod (spec.replicas 0), and each carries Label, so Lodestar
// never takes one for the tenant's own: it is controlled by the Deployment,
// which is never selected, placed or counted. It is pure: the fleetview
// controller reads and writes.
package fleetview

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
)

// Label marks the ReplicaSets Lodestar writes for a Deployment, with the
// Deployment's name as its value.
const Label = "placement.lodestar.dev/fleet-view-of"

// The annotations the deployment controller and kubectl share.
const (
	// RevisionAnnotation numbers a Deployment's templates, on its ReplicaSets.
	RevisionAnnotation = "deployment.kubernetes.io/revision"
	// RevisionHistoryAnnotation lists the earlier numbers of a template that
	// came back (kubectl rollout undo).
	RevisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
)

// notCopied are the Deployment's annotations a ReplicaSet does not take (those
// the deployment controller skips, and kubectl rollout undo keeps from the
// Deployment).
var notCopied = map[string]bool{
	corev1.LastAppliedConfigAnnotation:          true,
	RevisionAnnotation:                          true,
	RevisionHistoryAnnotation:                   true,
	"deployment.kubernetes.io/desired-replicas": true,
	"deployment.kubernetes.io/max-replicas":     true,
	"deprecated.deployment.rollback.to":         true,
}

// DefaultHistory is how many earlier ReplicaSets a Deployment without
// spec.revisionHistoryLimit keeps (the API's default).
const DefaultHistory = 10

// Plan is what a Deployment's ReplicaSets become.
type Plan struct {
	// Apply are the ReplicaSets to write (their metadata and spec), with the
	// status each shows in Status, by name.
	Apply  []*appsv1.ReplicaSet
	Status map[string]appsv1.ReplicaSetStatus
	// Delete are the earlier ones beyond the Deployment's history limit.
	Delete []*appsv1.ReplicaSet
}

// Hash names a template, as pod-template-hash does: the same template always
// gets the same hash, and the hash label is left out of it.
func Hash(t *corev1.PodTemplateSpec) string {
	c := t.DeepCopy()
	delete(c.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	b, _ := json.Marshal(c)
	h := fnv.New32a()
	_, _ = h.Write(b)
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// SameTemplate tells whether two templates are the same but for the hash
// label, as the tools compare a ReplicaSet with its Deployment.
func SameTemplate(a, b *corev1.PodTemplateSpec) bool {
	ac, bc := a.DeepCopy(), b.DeepCopy()
	delete(ac.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	delete(bc.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	if len(ac.Labels) == 0 {
		ac.Labels = nil
	}
	if len(bc.Labels) == 0 {
		bc.Labels = nil
	}
	return equality.Semantic.DeepEqual(ac, bc)
}

// Revision is a ReplicaSet's revision number, 0 when it has none.
func Revision(rs *appsv1.ReplicaSet) int64 {
	n, _ := strconv.ParseInt(rs.Annotations[RevisionAnnotation], 10, 64)
	return n
}

// For plans the ReplicaSets of dep (whose status the fleet's reflection
// writes) from those it has now (owned: the ones with Label for it).
func For(dep *appsv1.Deployment, owned []appsv1.ReplicaSet) Plan {
	sorted := make([]*appsv1.ReplicaSet, 0, len(owned))
	for i := range owned {
		sorted = append(sorted, &owned[i])
	}
	slices.SortFunc(sorted, func(a, b *appsv1.ReplicaSet) int { return int(Revision(a) - Revision(b)) })
	var latest int64
	var current *appsv1.ReplicaSet
	for _, rs := range sorted {
		latest = max(latest, Revision(rs))
		if current == nil && SameTemplate(&rs.Spec.Template, &dep.Spec.Template) {
			current = rs
		}
	}
	plan := Plan{Status: map[string]appsv1.ReplicaSetStatus{}}
	next := newReplicaSet(dep, current)
	switch {
	case current == nil:
		next.Annotations[RevisionAnnotation] = strconv.FormatInt(latest+1, 10)
	case Revision(current) < latest:
		// A template that came back (an undo): the newest revision again, its
		// earlier numbers kept, as the deployment controller does.
		next.Annotations[RevisionAnnotation] = strconv.FormatInt(latest+1, 10)
		history := current.Annotations[RevisionHistoryAnnotation]
		if history != "" {
			history += ","
		}
		next.Annotations[RevisionHistoryAnnotation] = history + strconv.FormatInt(Revision(current), 10)
	default:
		next.Annotations[RevisionAnnotation] = current.Annotations[RevisionAnnotation]
		if h := current.Annotations[RevisionHistoryAnnotation]; h != "" {
			next.Annotations[RevisionHistoryAnnotation] = h
		}
	}
	plan.Apply = append(plan.Apply, next)
	plan.Status[next.Name] = fleetStatus(dep)
	var earlier []*appsv1.ReplicaSet
	for _, rs := range sorted {
		if rs != current {
			earlier = append(earlier, rs)
		}
	}
	limit := int(ptr.Deref(dep.Spec.RevisionHistoryLimit, DefaultHistory))
	for i, rs := range earlier {
		if i < len(earlier)-limit {
			plan.Delete = append(plan.Delete, rs)
			continue
		}
		plan.Status[rs.Name] = appsv1.ReplicaSetStatus{}
	}
	return plan
}

// newReplicaSet is the ReplicaSet of dep's current template: current's name
// when it has one, the Deployment's annotations, its template with the hash
// label, no replicas.
func newReplicaSet(dep *appsv1.Deployment, current *appsv1.ReplicaSet) *appsv1.ReplicaSet {
	hash := Hash(&dep.Spec.Template)
	name := dep.Name + "-" + hash
	if current != nil {
		name = current.Name
		if h := current.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; h != "" {
			hash = h
		}
	}
	template := dep.Spec.Template.DeepCopy()
	template.Labels = maps.Clone(template.Labels)
	if template.Labels == nil {
		template.Labels = map[string]string{}
	}
	template.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	selector := dep.Spec.Selector.DeepCopy()
	if selector == nil {
		selector = &metav1.LabelSelector{}
	}
	selector.MatchLabels = maps.Clone(selector.MatchLabels)
	if selector.MatchLabels == nil {
		selector.MatchLabels = map[string]string{}
	}
	selector.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	labels := maps.Clone(template.Labels)
	labels[Label] = dep.Name
	annotations := map[string]string{}
	for k, v := range dep.Annotations {
		if !notCopied[k] {
			annotations[k] = v
		}
	}
	return &appsv1.ReplicaSet{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: dep.Namespace, Labels: labels, Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "Deployment", Name: dep.Name, UID: dep.UID, Controller: ptr.To(true),
			}},
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](0), MinReadySeconds: dep.Spec.MinReadySeconds, Selector: selector, Template: *template,
		},
	}
}

// fleetStatus is the current template's share of the Deployment's reflected
// status: the pods updated to it, and of those the ready and available ones
// (the ready pods less those still of an earlier template, at the least).
// Until every cluster runs the current generation, the counts are of an
// earlier template, and it shows none.
func fleetStatus(dep *appsv1.Deployment) appsv1.ReplicaSetStatus {
	st := dep.Status
	if st.ObservedGeneration < dep.Generation {
		return appsv1.ReplicaSetStatus{}
	}
	older := max(0, st.Replicas-st.UpdatedReplicas)
	return appsv1.ReplicaSetStatus{
		Replicas:             st.UpdatedReplicas,
		FullyLabeledReplicas: st.UpdatedReplicas,
		ReadyReplicas:        max(0, min(st.UpdatedReplicas, st.ReadyReplicas-older)),
		AvailableReplicas:    max(0, min(st.UpdatedReplicas, st.AvailableReplicas-older)),
	}
}
