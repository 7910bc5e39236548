package placementstatus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/division"
	"github.com/lodestar-dev/lodestar/internal/interpretation"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/patch"
	"github.com/lodestar-dev/lodestar/internal/reflection"
)

// The status the hub manager may write, for reflection: the workload kinds it
// sums and the built-in kinds with a status a one-cluster Placement commonly
// reflects. Others (custom resources) are a platform admin's choice: the hub
// chart's reflection.statusResources adds them; without it their reflection is
// ReflectionFailed, naming the refusal.
// +kubebuilder:rbac:groups=apps,resources=deployments/status;statefulsets/status;daemonsets/status;replicasets/status,verbs=get;patch
// +kubebuilder:rbac:groups=batch,resources=jobs/status;cronjobs/status,verbs=get;patch
// +kubebuilder:rbac:groups="",resources=services/status;persistentvolumeclaims/status,verbs=get;patch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses/status,verbs=get;patch
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers/status,verbs=get;patch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets/status,verbs=get;patch

// reflected is one placed object of the hub and its copies on the clusters.
type reflected struct {
	gvk    schema.GroupVersionKind
	name   string
	copies []clusterObject
}

// clusterObject is one cluster's report of a placed object.
type clusterObject struct {
	cluster string
	object  objectView
}

// rank orders object states from best to worst: the worst copy's conditions are
// the ones the hub object shows.
var rank = map[placementv1alpha1.ObjectState]int{
	placementv1alpha1.ObjectAvailable: 0, placementv1alpha1.ObjectUnknown: 1, placementv1alpha1.ObjectProgressing: 2,
	placementv1alpha1.ObjectNotApplied: 3, placementv1alpha1.ObjectDegraded: 4,
}

// reflect writes the status of the Placement's placed objects on the hub from
// their copies on the decided clusters (spec.reporting.reflection: Aggregate), and returns
// the StatusReflected condition. An object whose status something else writes
// on the hub is left to that writer.
func (r *Reconciler) reflect(ctx context.Context, placement *placementv1alpha1.Placement, decided []string, vs map[string]*view) *metav1.Condition {
	objects, keys := reflectedObjects(placement, decided, vs)
	interps, err := lookup.Interpretations(ctx, r.Client, r.Interpretations)
	if err != nil {
		c := condition(placementv1alpha1.StatusReflectedCondition, metav1.ConditionFalse, placementv1alpha1.ReasonReflectionFailed, "%v", err)
		return &c
	}

	var written int
	var others, failed []string
	for _, k := range keys {
		ro := objects[k]
		what := fmt.Sprintf("%s %s/%s", ro.gvk.Kind, placement.Namespace, ro.name)
		selected, divided := carriers(placement, ro, decided, vs, interps)
		err := r.reflectOne(ctx, placement.Namespace, ro, selected, divided, interps.For(ro.gvk.GroupKind()))
		var other *otherWriterError
		switch {
		case err == nil:
			written++
		case errors.As(err, &other):
			others = append(others, fmt.Sprintf("%s by %s", what, other.manager))
		case errors.Is(err, errNothingToReflect):
		default:
			ctrl.LoggerFrom(ctx).Error(err, "Cannot reflect status on the hub", "object", what)
			failed = append(failed, fmt.Sprintf("%s: %v", what, err))
		}
	}
	c := condition(placementv1alpha1.StatusReflectedCondition, metav1.ConditionTrue, placementv1alpha1.ReasonStatusReflected,
		"the status of %s on the hub is written from their clusters", message.Count(written, "placed object"))
	switch {
	case len(others) > 0:
		c = condition(placementv1alpha1.StatusReflectedCondition, metav1.ConditionFalse, placementv1alpha1.ReasonOtherStatusWriter,
			"something else writes the status of %s on the hub, so Lodestar does not (a hub that runs workload controllers; see docs/hub.md): %s",
			message.Count(len(others), "placed object"), message.List(others, maxNamedFailures, "; "))
	case len(failed) > 0:
		c = condition(placementv1alpha1.StatusReflectedCondition, metav1.ConditionFalse, placementv1alpha1.ReasonReflectionFailed,
			"the status of %s could not be written on the hub: %s", message.Count(len(failed), "placed object"), message.List(failed, maxNamedFailures, "; "))
	}
	c.Message = message.Truncate(c.Message, 4096)
	return &c
}

// reflectedObjects are the Placement's placed objects of its namespace with
// their copies on the decided clusters, by key, and the keys sorted.
func reflectedObjects(placement *placementv1alpha1.Placement, decided []string, vs map[string]*view) (map[string]*reflected, []string) {
	objects := map[string]*reflected{}
	for _, c := range decided {
		v := vs[c]
		if v == nil {
			continue
		}
		for _, o := range v.objects {
			if o.id.Namespace != placement.Namespace || o.id.Kind == "" {
				continue
			}
			gvk := schema.GroupVersionKind{Group: o.id.Group, Version: o.id.Version, Kind: o.id.Kind}
			key := gvk.String() + "/" + o.id.Name
			ro := objects[key]
			if ro == nil {
				ro = &reflected{gvk: gvk, name: o.id.Name}
				objects[key] = ro
			}
			ro.copies = append(ro.copies, clusterObject{cluster: c, object: o})
		}
	}
	keys := make([]string, 0, len(objects))
	for k := range objects {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return objects, keys
}

// carriers is how many of the decided clusters an object's status is made of:
// every one, except for a workload whose replicas the Placement divides (true),
// which only the clusters whose Works carry it (a share above 0) run.
func carriers(placement *placementv1alpha1.Placement, ro *reflected, decided []string, vs map[string]*view, kinds division.Kinds) (int, bool) {
	if placement.Spec.Scheduling.Replicas == nil || !division.Divisible(ro.gvk.GroupKind(), kinds) {
		return len(decided), false
	}
	id := workv1alpha1.ResourceIdentifier{Group: ro.gvk.Group, Kind: ro.gvk.Kind, Namespace: placement.Namespace, Name: ro.name}
	n := 0
	for _, c := range decided {
		if v := vs[c]; v != nil && v.carries(id) {
			n++
		}
	}
	return n, true
}

var errNothingToReflect = errors.New("nothing to reflect")

type otherWriterError struct{ manager string }

func (e *otherWriterError) Error() string { return "status written by " + e.manager }

// reflectOne writes one hub object's status from its copies, when it changes:
// as its kind's interpretation aggregates them (in), when it says how.
func (r *Reconciler) reflectOne(ctx context.Context, namespace string, ro *reflected, selected int, divided bool, in *interpretation.Interpretation) error {
	hub := &unstructured.Unstructured{}
	hub.SetGroupVersionKind(ro.gvk)
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ro.name}, hub); err != nil {
		if apierrors.IsNotFound(err) {
			return errNothingToReflect
		}
		return err
	}
	if m := otherStatusWriter(hub); m != "" {
		return &otherWriterError{manager: m}
	}
	copies := make([]reflection.Copy, 0, len(ro.copies))
	for _, c := range ro.copies {
		if cp := reflection.NewCopy(c.cluster, c.object.values, c.object.current, hub.GetGeneration(), rank[c.object.state]); cp.Status != nil {
			copies = append(copies, cp) // a copy whose status is not reported (yet) is none
		}
	}
	previous, _, _ := unstructured.NestedInt64(hub.Object, "status", "observedGeneration")
	if len(copies) < selected && previous > 0 && previous == hub.GetGeneration() {
		// A cluster whose Work changed for another object (its manifests
		// renumbered) has not reported this one again yet: what the hub shows
		// for this generation stands until it does, rather than dropping.
		return nil
	}
	replicas, found, _ := unstructured.NestedInt64(hub.Object, "spec", "replicas")
	if !found {
		replicas = 1
	}
	st, ok := reflection.Status(ro.gvk.GroupKind(), copies, reflection.Hub{
		Selected: selected, Generation: hub.GetGeneration(), ObservedGeneration: previous, Replicas: replicas, Divided: divided,
	})
	if in != nil && in.HasAggregate() && len(copies) > 0 {
		var err error
		if st, err = in.Aggregate(hub.Object, statuses(copies)); err != nil {
			return err
		}
		ok = true
	}
	if !ok {
		return errNothingToReflect
	}
	if sameJSON(hub.Object["status"], st) {
		return nil
	}
	desired := &unstructured.Unstructured{Object: map[string]any{"status": st}}
	desired.SetGroupVersionKind(ro.gvk)
	desired.SetNamespace(namespace)
	desired.SetName(ro.name)
	return patch.ApplyStatus(ctx, r.Client, desired, reflection.FieldOwner)
}

// statuses are the copies' statuses as an aggregate expression reads them,
// by cluster name.
func statuses(copies []reflection.Copy) []interpretation.ClusterStatus {
	out := make([]interpretation.ClusterStatus, 0, len(copies))
	for _, c := range copies {
		out = append(out, interpretation.ClusterStatus{Name: c.Cluster, Status: c.Status})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// otherStatusWriter names a field manager other than the status aggregator that
// wrote the object's status, or "".
func otherStatusWriter(obj *unstructured.Unstructured) string {
	for _, mf := range obj.GetManagedFields() {
		if mf.Subresource == "status" && mf.Manager != reflection.FieldOwner {
			return mf.Manager
		}
	}
	return ""
}

// sameJSON compares two JSON values by their encoding.
func sameJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	if errA != nil || errB != nil {
		return false
	}
	var va, vb any
	if json.Unmarshal(ja, &va) != nil || json.Unmarshal(jb, &vb) != nil {
		return false
	}
	return equality.Semantic.DeepEqual(va, vb)
}

// Reflection retries: the first after reflectRetryFirst, doubling up to
// reflectRetryMost, so that a right granted later (helm upgrade with
// reflection.statusResources) is used within a minute.
const (
	reflectRetryFirst = time.Second
	reflectRetryMost  = 30 * time.Second
)

// reflectRetries are the Placements whose reflection failed, with their
// back-off.
type reflectRetries struct {
	once    sync.Once
	limiter workqueue.TypedRateLimiter[types.NamespacedName]
}

// after is when to look again at a Placement whose StatusReflected
// condition is c: 0 when the reflection did not fail (its back-off starts
// over), else the next step of its back-off.
func (rr *reflectRetries) after(key types.NamespacedName, c *metav1.Condition) time.Duration {
	rr.once.Do(func() {
		rr.limiter = workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](reflectRetryFirst, reflectRetryMost)
	})
	if c == nil || c.Reason != placementv1alpha1.ReasonReflectionFailed {
		rr.limiter.Forget(key)
		return 0
	}
	return rr.limiter.When(key)
}

// forget drops a deleted Placement's back-off.
func (rr *reflectRetries) forget(key types.NamespacedName) { rr.after(key, nil) }
