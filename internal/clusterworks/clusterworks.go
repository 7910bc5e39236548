// Package clusterworks reads the Works that carry a Placement's objects to one
// cluster: one Work, or several parts when the objects do not fit in one
// (render.Split). Part 0 is named and labelled as the only Work would be, part
// i > 0 carries placementv1alpha1.WorkPartLabel, and every part of a split
// revision says how many there are (placementv1alpha1.WorkPartsAnnotation). It
// reads plain values and needs no client.
package clusterworks

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// WorkAvailability is what the agent reported as the Work's Available condition
// for its current generation; Unknown when it has not, or the Work is going.
func WorkAvailability(w *workv1alpha1.Work) metav1.ConditionStatus {
	avail := meta.FindStatusCondition(w.Status.Conditions, lodestarworkv1alpha1.ConditionAvailable)
	if avail == nil || avail.ObservedGeneration != w.Generation || !w.DeletionTimestamp.IsZero() {
		return metav1.ConditionUnknown
	}
	return avail.Status
}

// Part is the part number of a Work of a Placement: 0 without the part label.
func Part(w *workv1alpha1.Work) int {
	n, err := strconv.Atoi(w.Labels[placementv1alpha1.WorkPartLabel])
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// PartsOf is how many Works the Work says its cluster's objects take at its
// revision: 1 without the annotation.
func PartsOf(w *workv1alpha1.Work) int {
	n, err := strconv.Atoi(w.Annotations[placementv1alpha1.WorkPartsAnnotation])
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// ByCluster groups a Placement's Works by cluster, each cluster's in part order.
func ByCluster(works []workv1alpha1.Work) map[string][]*workv1alpha1.Work {
	out := map[string][]*workv1alpha1.Work{}
	for i := range works {
		w := &works[i]
		if cluster, ok := names.ClusterFromNamespace(w.Namespace); ok {
			out[cluster] = append(out[cluster], w)
		}
	}
	for _, parts := range out {
		slices.SortFunc(parts, func(a, b *workv1alpha1.Work) int { return cmp.Compare(Part(a), Part(b)) })
	}
	return out
}

// Revision is the revision (placementv1alpha1.RevisionAnnotation) the parts of
// a cluster hold, that of part 0 when they differ, and whether the parts are
// complete: every part the revision takes is there, at that revision, and none
// is being deleted.
func Revision(parts []*workv1alpha1.Work) (string, bool) {
	if len(parts) == 0 {
		return "", false
	}
	rev := parts[0].Annotations[placementv1alpha1.RevisionAnnotation]
	want := PartsOf(parts[0])
	seen := make([]bool, want)
	for _, w := range parts {
		i := Part(w)
		if w.Annotations[placementv1alpha1.RevisionAnnotation] != rev || PartsOf(w) != want || !w.DeletionTimestamp.IsZero() {
			if i < want {
				return rev, false
			}
			continue // a part beyond the revision's, on its way out
		}
		if i < want {
			seen[i] = true
		}
	}
	return rev, !slices.Contains(seen, false)
}

// Current are the parts of a cluster that its revision takes (those beyond it
// are on their way out).
func Current(parts []*workv1alpha1.Work) []*workv1alpha1.Work {
	if len(parts) == 0 {
		return nil
	}
	want := PartsOf(parts[0])
	return slices.DeleteFunc(slices.Clone(parts), func(w *workv1alpha1.Work) bool { return Part(w) >= want })
}

// Availability is WorkAvailability over a cluster's parts: True when they are
// complete and each reports its objects available, False when one reports
// them not, Unknown otherwise.
func Availability(parts []*workv1alpha1.Work) metav1.ConditionStatus {
	return allParts(parts, WorkAvailability)
}

// Applied is what the agent reported as the Applied condition of every part,
// as Availability says it of Available.
func Applied(parts []*workv1alpha1.Work) metav1.ConditionStatus {
	return allParts(parts, func(w *workv1alpha1.Work) metav1.ConditionStatus {
		c := meta.FindStatusCondition(w.Status.Conditions, lodestarworkv1alpha1.ConditionApplied)
		if c == nil || c.ObservedGeneration != w.Generation || !w.DeletionTimestamp.IsZero() {
			return metav1.ConditionUnknown
		}
		return c.Status
	})
}

func allParts(parts []*workv1alpha1.Work, of func(*workv1alpha1.Work) metav1.ConditionStatus) metav1.ConditionStatus {
	_, complete := Revision(parts)
	out := metav1.ConditionTrue
	if !complete {
		out = metav1.ConditionUnknown
	}
	for _, w := range Current(parts) {
		switch of(w) {
		case metav1.ConditionFalse:
			return metav1.ConditionFalse
		case metav1.ConditionUnknown:
			out = metav1.ConditionUnknown
		}
	}
	return out
}

// ManifestIDs are the identities of a Work's manifests, by ordinal; a manifest
// that does not decode has an empty one, which no report matches.
func ManifestIDs(w *workv1alpha1.Work) []workv1alpha1.ResourceIdentifier {
	ids := make([]workv1alpha1.ResourceIdentifier, len(w.Spec.Workload.Manifests))
	for i, m := range w.Spec.Workload.Manifests {
		var obj struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if json.Unmarshal(m.Raw, &obj) != nil || obj.Kind == "" {
			continue
		}
		group, version, found := strings.Cut(obj.APIVersion, "/")
		if !found {
			group, version = "", obj.APIVersion
		}
		ids[i] = workv1alpha1.ResourceIdentifier{Ordinal: i, Group: group, Version: version, Kind: obj.Kind,
			Namespace: obj.Metadata.Namespace, Name: obj.Metadata.Name}
	}
	return ids
}

// Strategy is the apply strategy a Work carries
// (lodestarworkv1alpha1.ApplyStrategyAnnotation), its defaults filled in; the
// defaults when it carries none.
func Strategy(w *workv1alpha1.Work) (lodestarworkv1alpha1.ApplyStrategy, error) {
	var s lodestarworkv1alpha1.ApplyStrategy
	if a, ok := w.Annotations[lodestarworkv1alpha1.ApplyStrategyAnnotation]; ok {
		if err := json.Unmarshal([]byte(a), &s); err != nil {
			return s, fmt.Errorf("annotation %s is not an apply strategy: %w", lodestarworkv1alpha1.ApplyStrategyAnnotation, err)
		}
	}
	return s.Defaulted(), nil
}
