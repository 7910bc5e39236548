package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/division"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// divided runs D1: one Deployment of 3000 replicas divided evenly over the
// 1000 simulated clusters (3 each), then divided anew by a weight change
// (groups 0-4 weigh 2, the others 1: 4 and 2 each), surge first: the time
// from the change until every cluster's Work carries its new share and the
// rollout is complete, and the hub's writes meanwhile. The Placement is
// removed afterwards.
func (f *fleet) divided(ctx context.Context, bw float64, record func(*Result) error) error {
	ns := "bench-d1"
	if err := f.app(ctx, ns); err != nil {
		return err
	}
	if err := f.scaleApp(ctx, ns, 3000); err != nil {
		return err
	}
	p := placementFor(ns, "divided", map[string]string{"fleet": "sim"})
	p.Spec.Scheduling.Replicas = &placementv1alpha1.ReplicaDivision{Method: placementv1alpha1.DivisionEven}
	key := client.ObjectKeyFromObject(p)
	placed, err := f.place(ctx, p, 1000, 5*time.Minute)
	if err != nil {
		return err
	}
	if err := f.shares(ctx, p, func(string) int64 { return 3 }, 5*time.Minute); err != nil {
		return fmt.Errorf("D1, even: %w", err)
	}

	before, err := f.hubWritesByKind(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	heavy := []string{"0", "1", "2", "3", "4"}
	if err := f.update(ctx, key, func(p *placementv1alpha1.Placement) {
		p.Spec.Scheduling.Replicas = &placementv1alpha1.ReplicaDivision{Method: placementv1alpha1.DivisionWeighted, Weights: []placementv1alpha1.ReplicaWeight{
			{ClusterSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "group", Operator: metav1.LabelSelectorOpIn, Values: heavy}}}, Weight: ptrTo[int32](2)},
			{ClusterSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "group", Operator: metav1.LabelSelectorOpNotIn, Values: heavy}}}, Weight: ptrTo[int32](1)},
		}}
	}); err != nil {
		return err
	}
	groupOf := map[string]string{}
	for i := range 1000 {
		groupOf[fmt.Sprintf("sim-%05d", i)] = fmt.Sprint(i % 10)
	}
	want := func(cluster string) int64 {
		if strings.Contains("01234", groupOf[cluster]) {
			return 4
		}
		return 2
	}
	if err := f.shares(ctx, p, want, 10*time.Minute); err != nil {
		return fmt.Errorf("D1, weighted: %w", err)
	}
	if err := f.rolledOut(ctx, key); err != nil {
		return fmt.Errorf("D1, the rollout of the new division: %w", err)
	}
	d := time.Since(start)
	after, err := f.hubWritesByKind(ctx)
	if err != nil {
		return err
	}
	r := &Result{Scenario: "D1", Description: "a Deployment of 3000 replicas divided over 1000 clusters (3 each), divided anew by a weight change (4 and 2 each), surge first: change to every Work carrying its share and the rollout complete", Members: simulated}
	r.add("placing, divided evenly, to Available on 1000", placed.Seconds(), "s")
	r.add("weight change to complete", d.Seconds(), "s")
	r.add("clusters re-divided per second", 1000/d.Seconds(), "clusters/s")
	writesPerWork(r, before, after, 1000)
	r.FractionOfBw = 1000 / d.Seconds() / bw
	r.FractionOfBwork = 1000 / d.Seconds() / f.bwork
	say("D1: 1000 clusters divided anew in %.2fs", d.Seconds())
	if err := record(r); err != nil {
		return err
	}
	return f.remove(ctx, key, 5*time.Minute)
}

// update changes a Placement, again on a conflict.
func (f *fleet) update(ctx context.Context, key client.ObjectKey, mutate func(*placementv1alpha1.Placement)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := &placementv1alpha1.Placement{}
		if err := f.admin.Get(ctx, key, p); err != nil {
			return err
		}
		mutate(p)
		return f.admin.Update(ctx, p)
	})
}

// shares waits until every Work of the Placement carries the share want gives
// its cluster, by its shares annotation.
func (f *fleet) shares(ctx context.Context, p *placementv1alpha1.Placement, want func(cluster string) int64, timeout time.Duration) error {
	_, err := waitFor(ctx, timeout, time.Second, func() (bool, error) {
		works := &workv1alpha1.WorkList{}
		if err := f.admin.List(ctx, works, client.MatchingLabels(lookup.WorkLabels(p))); err != nil {
			return false, err
		}
		if len(works.Items) < 1000 {
			return false, nil
		}
		for _, w := range works.Items {
			s, ok := division.ParseShares(w.Annotations[placementv1alpha1.SharesAnnotation])
			cluster, _ := names.ClusterFromNamespace(w.Namespace)
			if !ok || s.Workloads["Deployment/web"].Replicas != want(cluster) {
				return false, nil
			}
		}
		return true, nil
	})
	return err
}

// dividedScaled runs D1': one Deployment of 10000 replicas divided evenly over
// the 1000 simulated clusters (10 each), then scaled on the hub to 15000 (15
// each): the time from the scale until every cluster's Work carries its new
// share and the Placement's rollout is complete, the hub manager's CPU for it,
// and the hub's writes meanwhile. The Placement is removed afterwards.
func (f *fleet) dividedScaled(ctx context.Context, record func(*Result) error) error {
	const clusters, from, to = 1000, 10000, 15000
	ns := "bench-d1-scaled"
	if err := f.app(ctx, ns); err != nil {
		return err
	}
	if err := f.scaleApp(ctx, ns, from); err != nil {
		return err
	}
	p := placementFor(ns, "divided", map[string]string{"fleet": "sim"})
	p.Spec.Scheduling.Replicas = &placementv1alpha1.ReplicaDivision{Method: placementv1alpha1.DivisionEven}
	key := client.ObjectKeyFromObject(p)
	cpu0 := cpuSeconds()
	placed, err := f.place(ctx, p, clusters, 5*time.Minute)
	if err != nil {
		return err
	}
	if err := f.shares(ctx, p, func(string) int64 { return from / clusters }, 5*time.Minute); err != nil {
		return fmt.Errorf("D1', even: %w", err)
	}
	cpu1 := cpuSeconds()
	before, err := f.hubWritesByKind(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := f.scaleApp(ctx, ns, to); err != nil {
		return err
	}
	if err := f.shares(ctx, p, func(string) int64 { return to / clusters }, 10*time.Minute); err != nil {
		return fmt.Errorf("D1', scaled: %w", err)
	}
	written := time.Since(start)
	if err := f.rolledOut(ctx, key); err != nil {
		return fmt.Errorf("D1', the rollout of the scale: %w", err)
	}
	complete := time.Since(start)
	cpu2 := cpuSeconds()
	after, err := f.hubWritesByKind(ctx)
	if err != nil {
		return err
	}
	r := &Result{Scenario: "D1'", Members: simulated,
		Description: fmt.Sprintf("a Deployment of %d replicas divided evenly over %d clusters (%d each), then scaled on the hub to %d (%d each): scale to every Work carrying its share, and to the rollout complete", from, clusters, from/clusters, to, to/clusters)}
	r.add("placing, divided, to Available on 1000", placed.Seconds(), "s")
	r.add("hub manager CPU placing", cpu1["lodestar-hub"]-cpu0["lodestar-hub"], "s")
	r.add("scale to every share written", written.Seconds(), "s")
	r.add("scale to complete", complete.Seconds(), "s")
	r.add("hub manager CPU for the scale", cpu2["lodestar-hub"]-cpu1["lodestar-hub"], "s")
	writesPerWork(r, before, after, clusters)
	r.FractionOfBwork = clusters / written.Seconds() / f.bwork
	say("D1': %d clusters' shares written in %.2fs, complete in %.2fs", clusters, written.Seconds(), complete.Seconds())
	if err := record(r); err != nil {
		return err
	}
	return f.remove(ctx, key, 5*time.Minute)
}

// scaleApp sets the replicas of the bench's Deployment in ns, on the hub.
func (f *fleet) scaleApp(ctx context.Context, ns string, replicas int32) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		deploy := &appsv1.Deployment{}
		if err := f.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, deploy); err != nil {
			return err
		}
		deploy.Spec.Replicas = ptrTo(replicas)
		return f.admin.Update(ctx, deploy)
	})
}

// rolledOut waits until the Placement's rollout of its newest generation is
// complete (no surge left).
func (f *fleet) rolledOut(ctx context.Context, key client.ObjectKey) error {
	_, err := waitFor(ctx, 5*time.Minute, 100*time.Millisecond, func() (bool, error) {
		got := &placementv1alpha1.Placement{}
		if err := f.admin.Get(ctx, key, got); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, placementv1alpha1.ProgressingCondition)
		return c != nil && c.ObservedGeneration == got.Generation && c.Reason == placementv1alpha1.ReasonRolloutComplete &&
			!strings.Contains(c.Message, "surge first"), nil
	})
	return err
}
