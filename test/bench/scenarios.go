package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	"github.com/lodestar-dev/lodestar/api/client/clientset/versioned"
	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/hub/scheduler"
	lodestarfleet "github.com/lodestar-dev/lodestar/internal/fleet"
)

const simulated = "simulated: the real agent code (work.Reconciler), many agents in one process, each applying to an in-memory member"

// waitFor polls cond until it holds, and returns how long that took.
func waitFor(ctx context.Context, timeout, every time.Duration, cond func() (bool, error)) (time.Duration, error) {
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return 0, err
		}
		if ok {
			return time.Since(start), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("not done after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(every):
		}
	}
}

// app creates a namespace bound to the default cluster set with the benchmark's
// application: a 1 KB ConfigMap and a Deployment.
func (f *fleet) app(ctx context.Context, ns string) error {
	labels := map[string]string{"app": "web"}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-config", Namespace: ns, Labels: labels},
			Data: map[string]string{"payload": strings.Repeat("x", 1024)}},
		&appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, Labels: labels},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}}}},
		},
	} {
		if err := f.admin.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return lodestarfleet.BindClusterSet(ctx, f.admin, ns, scheduler.DefaultClusterSetNamespace)
}

func placementFor(ns, name string, selector map[string]string) *placementv1alpha1.Placement {
	return &placementv1alpha1.Placement{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{
				{Version: "v1", Kind: "ConfigMap", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
				{Group: "apps", Version: "v1", Kind: "Deployment", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
			},
			Scheduling: placementv1alpha1.Scheduling{ClusterSelector: &metav1.LabelSelector{MatchLabels: selector}},
		},
	}
}

// withSummaries adds status summaries to a Placement, as a fleet operator watching
// thousands of copies would: the agents report each Deployment's ready replicas
// and image, and the hub sums the ready replicas, per cluster group too, and
// counts the clusters per image.
func withSummaries(p *placementv1alpha1.Placement) *placementv1alpha1.Placement {
	deployment := placementv1alpha1.SummaryResource{Group: "apps", Kind: "Deployment", Name: "web"}
	p.Spec.Reporting.Feedback = []lodestarworkv1alpha1.FeedbackRule{{Group: "apps", Kind: "Deployment", Fields: []lodestarworkv1alpha1.FeedbackField{
		{Name: "ready", JSONPath: ".status.readyReplicas"}, {Name: "image", JSONPath: ".spec.template.spec.containers[0].image"},
	}}}
	p.Spec.Reporting.Summaries = []placementv1alpha1.StatusSummary{
		{Name: "ready", Resource: deployment, Value: "ready", Operation: placementv1alpha1.SummarySum},
		{Name: "ready-per-group", Resource: deployment, Value: "ready", Operation: placementv1alpha1.SummarySum,
			GroupBy: &placementv1alpha1.SummaryGroupBy{ClusterLabel: "group"}},
		{Name: "per-image", Resource: deployment, Operation: placementv1alpha1.SummaryCount, GroupBy: &placementv1alpha1.SummaryGroupBy{Value: "image"}},
	}
	return p
}

// available tells whether the Placement reports its objects available on want clusters.
func (f *fleet) available(ctx context.Context, key client.ObjectKey, want int) (bool, error) {
	p := &placementv1alpha1.Placement{}
	if err := f.admin.Get(ctx, key, p); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return availableOn(p, want), nil
}

// availableOn tells whether the Placement reports its objects available on
// want clusters.
func availableOn(p *placementv1alpha1.Placement, want int) bool {
	return int(ptr.Deref(p.Status.AvailableClusters, 0)) == want && int(ptr.Deref(p.Status.SelectedClusters, 0)) == want &&
		meta.IsStatusConditionTrue(p.Status.Conditions, placementv1alpha1.AvailableCondition)
}

// place creates a Placement and measures the time until it reports its objects
// available on want clusters.
func (f *fleet) place(ctx context.Context, p *placementv1alpha1.Placement, want int, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	if err := f.admin.Create(ctx, p); err != nil {
		return 0, err
	}
	if err := f.untilPlacement(ctx, client.ObjectKeyFromObject(p), timeout, func(p *placementv1alpha1.Placement) bool { return availableOn(p, want) }); err != nil {
		return 0, fmt.Errorf("placing %s on %d clusters: %w", client.ObjectKeyFromObject(p), want, err)
	}
	return time.Since(start), nil
}

// remove deletes a Placement and waits until it is gone, which is when the
// members are clean.
func (f *fleet) remove(ctx context.Context, key client.ObjectKey, timeout time.Duration) error {
	if err := f.admin.Delete(ctx, &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}); err != nil {
		return err
	}
	if _, err := waitFor(ctx, timeout, 50*time.Millisecond, func() (bool, error) {
		err := f.admin.Get(ctx, key, &placementv1alpha1.Placement{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}); err != nil {
		return fmt.Errorf("removing %s: %w", key, err)
	}
	return nil
}

// percentiles returns p50, p90 and max in seconds.
func percentiles(ds []time.Duration) (p50, p90, maxS float64) {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(q float64) float64 {
		i := int(q*float64(len(s))+0.5) - 1
		return s[min(max(i, 0), len(s)-1)].Seconds()
	}
	return at(0.5), at(0.9), s[len(s)-1].Seconds()
}

// workObject is a Work the size of the benchmark's Works: a 1 KB ConfigMap and a
// Deployment.
func workObject(ns, name string) *workv1alpha1.Work {
	cm := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web-config","namespace":"app"},"data":{"payload":%q}}`, strings.Repeat("x", 1024))
	deploy := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"app","labels":{"app":"web"}},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"nginx:1.27"}]}}}}`
	return &workv1alpha1.Work{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: workv1alpha1.WorkSpec{Workload: workv1alpha1.WorkloadTemplate{Manifests: []workv1alpha1.Manifest{
			{RawExtension: runtime.RawExtension{Raw: []byte(cm)}}, {RawExtension: runtime.RawExtension{Raw: []byte(deploy)}},
		}}},
	}
}

// summarized waits until the Placement's "ready" summary counts every cluster,
// so that a run whose summaries do not work fails rather than measuring nothing.
func (f *fleet) summarized(ctx context.Context, key client.ObjectKey, want int) error {
	_, err := waitFor(ctx, time.Minute, 200*time.Millisecond, func() (bool, error) {
		p := &placementv1alpha1.Placement{}
		if err := f.admin.Get(ctx, key, p); err != nil {
			return false, err
		}
		for _, s := range p.Status.Summaries {
			if s.Name == "ready" && int(ptr.Deref(s.Count, 0)) == want && ptr.Deref(s.Stale, 0) == 0 {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("the summaries of %s do not count %d clusters: %w", key, want, err)
	}
	return nil
}

// untilPlacement waits until cond holds for the Placement key, watching it
// (the one object, by name) rather than reading it again and again: a read
// every 20 ms of P2-5000's Placement took 3 % of the hub API server's CPU,
// which the measured hub then did not get.
func (f *fleet) untilPlacement(ctx context.Context, key client.ObjectKey, timeout time.Duration, cond func(*placementv1alpha1.Placement) bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cs, err := versioned.NewForConfig(f.adminCfg)
	if err != nil {
		return err
	}
	placements := cs.PlacementV1alpha1().Placements(key.Namespace)
	byName := fields.OneTermEqualSelector("metadata.name", key.Name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = byName
			return placements.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = byName
			return placements.Watch(ctx, o)
		},
	}
	_, err = watchtools.UntilWithSync(ctx, lw, &placementv1alpha1.Placement{}, nil, func(e watch.Event) (bool, error) {
		p, ok := e.Object.(*placementv1alpha1.Placement)
		return ok && e.Type != watch.Deleted && cond(p), nil
	})
	return err
}
