// Package workshape says what a cluster's Works of a Placement are: their
// names, labels and annotations, the manifests split into parts, and how an
// existing Work is brought to them touching only what the work generator
// owns. Pure: the work generator writes what it says.
package workshape

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/feedback"
	"github.com/lodestar-dev/lodestar/internal/interpretation"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/percluster"
	"github.com/lodestar-dev/lodestar/internal/reflection"
	"github.com/lodestar-dev/lodestar/internal/render"
)

// ManagedAnnotations are the Work annotations the work generator sets, and
// removes when a Work should not carry them.
var ManagedAnnotations = []string{
	lodestarworkv1alpha1.ApplyStrategyAnnotation, lodestarworkv1alpha1.StatusFeedbackAnnotation, lodestarworkv1alpha1.HealthRulesAnnotation,
	placementv1alpha1.WorkPartsAnnotation, placementv1alpha1.LeavingSinceAnnotation, placementv1alpha1.SharesAnnotation,
	placementv1alpha1.ServicesWithdrawnAnnotation, placementv1alpha1.ServicesWithdrawnAtAnnotation,
}

// Desired are the Works that carry c to cluster: one, or as many parts as
// its manifests need (render.Split), each labelled with its Placement, cluster
// and part and the hub manager that writes it, and annotated with its revision,
// since when it holds it, and how the agent applies it.
func Desired(placement *placementv1alpha1.Placement, cluster string, c percluster.Content, since string, annotations map[string]string, manager string) []*workv1alpha1.Work {
	split := render.Split(c.Manifests)
	out := make([]*workv1alpha1.Work, 0, len(split))
	for i, manifests := range split {
		w := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{
			Name: names.WorkPart(placement.Namespace, placement.Name, i), Namespace: names.ClusterNamespace(cluster),
			Labels:      lookup.WorkLabels(placement),
			Annotations: map[string]string{placementv1alpha1.RevisionAnnotation: c.Hash, placementv1alpha1.RevisionSinceAnnotation: since},
			Finalizers:  []string{lodestarworkv1alpha1.WorkFinalizer},
		}}
		w.Labels[placementv1alpha1.ClusterLabel] = names.LabelValue(cluster)
		w.Labels[placementv1alpha1.HubManagerLabel] = manager
		if i > 0 {
			w.Labels[placementv1alpha1.WorkPartLabel] = strconv.Itoa(i)
		}
		if len(split) > 1 {
			w.Annotations[placementv1alpha1.WorkPartsAnnotation] = strconv.Itoa(len(split))
		}
		for k, v := range annotations {
			w.Annotations[k] = v
		}
		if i == 0 && c.Shares != "" {
			w.Annotations[placementv1alpha1.SharesAnnotation] = c.Shares
		}
		w.Spec.Workload.Manifests = make([]workv1alpha1.Manifest, 0, len(manifests))
		for _, m := range manifests {
			w.Spec.Workload.Manifests = append(w.Spec.Workload.Manifests, workv1alpha1.Manifest{RawExtension: m})
		}
		out = append(out, w)
	}
	return out
}

// Merged is existing (a read-only cache object) as desired makes it: its
// labels, the annotations the work generator manages and the manifests;
// everything else, others' labels and annotations and the finalizers included,
// stays. The agent writes the Work finalizer (Desired only creates Works
// with it).
func Merged(existing, desired *workv1alpha1.Work) *workv1alpha1.Work {
	out := existing.DeepCopy()
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	delete(out.Labels, placementv1alpha1.WorkPartLabel)
	for k, v := range desired.Labels {
		out.Labels[k] = v
	}
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	for _, k := range ManagedAnnotations {
		delete(out.Annotations, k)
	}
	for k, v := range desired.Annotations {
		out.Annotations[k] = v
	}
	out.Spec = *desired.Spec.DeepCopy()
	return out
}

// Holds tells whether existing is already what Merged would make it of desired:
// desired's labels (the part label only when desired has it), the managed
// annotations as desired has them, and the manifests byte for byte. It reads,
// where a deep comparison of merged with existing (status included, manifests
// byte by byte through reflection) took most of the hub manager's CPU in a
// fan-out to thousands of clusters.
func Holds(existing, desired *workv1alpha1.Work) bool {
	if _, ok := existing.Labels[placementv1alpha1.WorkPartLabel]; ok != (desired.Labels[placementv1alpha1.WorkPartLabel] != "") {
		return false
	}
	for k, v := range desired.Labels {
		if got, ok := existing.Labels[k]; !ok || got != v {
			return false
		}
	}
	for _, k := range ManagedAnnotations {
		got, ok := existing.Annotations[k]
		want, wanted := desired.Annotations[k]
		if ok != wanted || got != want {
			return false
		}
	}
	for k, v := range desired.Annotations {
		if got, ok := existing.Annotations[k]; !ok || got != v {
			return false
		}
	}
	have, want := existing.Spec.Workload.Manifests, desired.Spec.Workload.Manifests
	return len(have) == len(want) && slices.EqualFunc(have, want, func(a, b workv1alpha1.Manifest) bool {
		return a.Object == nil && b.Object == nil && bytes.Equal(a.Raw, b.Raw)
	})
}

// Annotations returns the Work annotations that carry the Placement's apply
// strategy and status feedback rules to the agents: its own rules, and with
// status reflection those that report the status of the placed objects, of the
// kinds of manifests; and the health rules of those kinds interps interprets.
func Annotations(placement *placementv1alpha1.Placement, manifests []runtime.RawExtension, interps *interpretation.Set) (map[string]string, error) {
	out := map[string]string{}
	if interps.Len() > 0 {
		if rules := interps.HealthRules(render.Kinds(manifests)); len(rules) > 0 {
			b, err := json.Marshal(rules)
			if err != nil {
				return nil, err
			}
			out[lodestarworkv1alpha1.HealthRulesAnnotation] = string(b)
		}
	}
	if s := placement.Spec.ApplyStrategy; s != nil {
		b, err := json.Marshal(s.Defaulted())
		if err != nil {
			return nil, err
		}
		out[lodestarworkv1alpha1.ApplyStrategyAnnotation] = string(b)
	}
	reflects := placement.Spec.Reporting.Reflection == placementv1alpha1.ReflectionAggregate
	if rules := placement.Spec.Reporting.Feedback; len(rules) > 0 || reflects {
		if _, err := feedback.Compile(rules); err != nil {
			return nil, err
		}
		if reflects {
			rules = reflection.Rules(rules, render.Kinds(manifests))
		}
		b, err := json.Marshal(rules)
		if err != nil {
			return nil, err
		}
		out[lodestarworkv1alpha1.StatusFeedbackAnnotation] = string(b)
	}
	return out, nil
}
