package rollout

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/clusterworks"
	"github.com/lodestar-dev/lodestar/internal/message"
)

// Expectation is a write of a cluster's Works that the cache may not show yet:
// the revision written and when.
type Expectation struct {
	Revision string
	Since    time.Time
}

// maxMessage bounds a cluster's message in the gate.
const maxMessage = 512

// ClusterOf is what the gate knows of a selected cluster from its Works (its
// parts, in part order; none when it has none). When expected is set and the
// Works do not hold its revision yet, the write the cache does not show stands
// in: the cluster is at that revision since then, not yet reported.
func ClusterOf(name string, parts []*workv1alpha1.Work, labels map[string]string, expected *Expectation) Cluster {
	c := Cluster{Name: name, Labels: labels, Applied: metav1.ConditionUnknown, Available: metav1.ConditionUnknown}
	rev, _ := clusterworks.Revision(parts)
	if expected != nil && rev != expected.Revision {
		c.Revision, c.Since = expected.Revision, expected.Since
		return c
	}
	if len(parts) == 0 {
		return c
	}
	c.Revision = rev
	c.Applied, c.Available = clusterworks.Applied(parts), clusterworks.Availability(parts)
	for _, w := range clusterworks.Current(parts) {
		c.Since = later(c.Since, ParseTime(w.Annotations[placementv1alpha1.RevisionSinceAnnotation], w.CreationTimestamp.Time))
		if a := meta.FindStatusCondition(w.Status.Conditions, lodestarworkv1alpha1.ConditionAvailable); a != nil && c.Available == metav1.ConditionTrue {
			c.AvailableSince = later(c.AvailableSince, a.LastTransitionTime.Time)
		}
		if a := meta.FindStatusCondition(w.Status.Conditions, lodestarworkv1alpha1.ConditionApplied); a != nil && a.ObservedGeneration == w.Generation &&
			a.Status == metav1.ConditionFalse && c.Message == "" {
			c.Message = message.Truncate(a.Message, maxMessage)
		}
		if d := meta.FindStatusCondition(w.Status.Conditions, lodestarworkv1alpha1.ConditionDegraded); d != nil && d.ObservedGeneration == w.Generation &&
			d.Status == metav1.ConditionTrue && !c.Degraded {
			c.Degraded, c.Message = true, message.Truncate(d.Message, maxMessage)
		}
	}
	return c
}

// LeavingOf is what the gate knows of a cluster the Placement left, from its
// Works: since when it left (the earliest mark, now when none is marked yet),
// whether its copy is Available, and whether the Placement may no longer use
// it at all.
func LeavingOf(name string, parts []*workv1alpha1.Work, revoked bool, now time.Time) Leaving {
	l := Leaving{Name: name, Since: now, Revoked: revoked, Available: clusterworks.Availability(parts) == metav1.ConditionTrue}
	for _, w := range parts {
		if s, ok := w.Annotations[placementv1alpha1.LeavingSinceAnnotation]; ok {
			if t := ParseTime(s, now); t.Before(l.Since) {
				l.Since = t
			}
		}
	}
	return l
}

// ParseTime reads an RFC 3339 time of an annotation, fallback when it is not one.
func ParseTime(s string, fallback time.Time) time.Time {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t
	}
	return fallback
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// ObjectKey names a placed object for Remove: group/kind/namespace/name.
func ObjectKey(id workv1alpha1.ResourceIdentifier) string {
	return id.Group + "/" + id.Kind + "/" + id.Namespace + "/" + id.Name
}

// ObjectsOf reads which objects a cluster's Works (its parts) carry, and which
// of them its agent reports Available at the Work's current generation.
func ObjectsOf(parts []*workv1alpha1.Work) (carried, available map[string]bool) {
	carried, available = map[string]bool{}, map[string]bool{}
	for _, w := range clusterworks.Current(parts) {
		ids := clusterworks.ManifestIDs(w)
		for _, id := range ids {
			if id.Kind != "" {
				carried[ObjectKey(id)] = true
			}
		}
		if !w.DeletionTimestamp.IsZero() {
			continue
		}
		for _, mc := range w.Status.ManifestConditions {
			i := mc.Identifier.Ordinal
			if i < 0 || i >= len(ids) || ids[i].Kind != mc.Identifier.Kind || ids[i].Name != mc.Identifier.Name {
				continue // not a report of this Work's manifest
			}
			applied := meta.FindStatusCondition(mc.Conditions, lodestarworkv1alpha1.ConditionApplied)
			if applied == nil || applied.ObservedGeneration != w.Generation {
				continue
			}
			if meta.IsStatusConditionTrue(mc.Conditions, lodestarworkv1alpha1.ConditionAvailable) {
				available[ObjectKey(ids[i])] = true
			}
		}
	}
	return carried, available
}

// ByObject is the clusters the Placement left and the selected ones as
// Depart sees them (read only when clusters are leaving): with what their
// Works (works, by cluster) carry and have Available, object by object, so
// that a copy the Placement left that serves a Deployment goes only once the
// Deployment is Available elsewhere, whatever the other objects do. A
// selected cluster without Works, or whose Works the cache shows at another
// revision than was written, counts as a whole. While a division surges (a
// share raised is not Available yet) no selected cluster counts as
// Available, so that a cluster left keeps its replicas until the others carry
// theirs (or the progress deadline passes).
func ByObject(leaving []Leaving, selected []Cluster, works map[string][]*workv1alpha1.Work, surging bool) ([]Leaving, []Cluster) {
	if len(leaving) == 0 {
		return leaving, selected
	}
	left := slices.Clone(leaving)
	for i := range left {
		_, left[i].AvailableObjects = ObjectsOf(works[left[i].Name])
	}
	out := slices.Clone(selected)
	for i := range out {
		c := &out[i]
		if surging {
			c.Available = metav1.ConditionUnknown
		}
		parts := works[c.Name]
		if rev, _ := clusterworks.Revision(parts); c.Revision == "" || rev != c.Revision {
			continue
		}
		c.Objects, c.AvailableObjects = ObjectsOf(parts)
		if surging {
			c.AvailableObjects = map[string]bool{}
		}
	}
	return left, out
}
