package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/lookup"
)

// stageNames are the steps of a Placement's way to its clusters, as the hub's
// own watch events show them, in order; each is measured from the end of the one
// before (the first from the Placement's creation).
var stageNames = []string{
	"scheduler (create to PlacementDecision naming every cluster)",
	"work generator, first Work (decision to the first Work written)",
	"work generator, the rest (first to last Work written)",
	"agents (last Work written to the last Work reporting Applied)",
	"readiness (last Applied to the last Work reporting Available)",
	"status aggregator (last Work Available to the Placement Available)",
}

// stageClock records when a Placement's decision, Works, their Applied and
// Available reports and the Placement's own Available status are first seen on
// the hub's watches.
type stageClock struct {
	want  int
	start time.Time
	mu    sync.Mutex
	// decided is when the decisions first named want clusters; placed when the
	// Placement first reported Available on want clusters.
	decided, placed time.Time
	// written, applied and available are, per Work, when it was first seen so.
	written, applied, available map[string]time.Time
}

// watchStages starts watching the hub for placement p (not yet created) on want
// clusters; the watches end with ctx.
func (f *fleet) watchStages(ctx context.Context, p *placementv1alpha1.Placement, want int) (*stageClock, error) {
	c := &stageClock{want: want, written: map[string]time.Time{}, applied: map[string]time.Time{}, available: map[string]time.Time{}}
	decisions, err := f.watcher.Watch(ctx, &cpv1alpha1.PlacementDecisionList{}, client.InNamespace(p.Namespace))
	if err != nil {
		return nil, err
	}
	works, err := f.watcher.Watch(ctx, &workv1alpha1.WorkList{}, client.MatchingLabels(lookup.WorkLabels(p)))
	if err != nil {
		decisions.Stop()
		return nil, err
	}
	placements, err := f.watcher.Watch(ctx, &placementv1alpha1.PlacementList{}, client.InNamespace(p.Namespace))
	if err != nil {
		decisions.Stop()
		works.Stop()
		return nil, err
	}
	perSlice := map[string]int{}
	go c.follow(ctx, decisions, func(obj any, now time.Time) {
		d, ok := obj.(*cpv1alpha1.PlacementDecision)
		if !ok {
			return
		}
		perSlice[d.Name] = len(d.Decisions)
		total := 0
		for _, n := range perSlice {
			total += n
		}
		if total >= want && c.decided.IsZero() {
			c.decided = now
		}
	})
	go c.follow(ctx, works, func(obj any, now time.Time) {
		w, ok := obj.(*workv1alpha1.Work)
		if !ok {
			return
		}
		key := w.Namespace + "/" + w.Name
		first := func(m map[string]time.Time) {
			if _, seen := m[key]; !seen {
				m[key] = now
			}
		}
		first(c.written)
		if at(w, lodestarworkv1alpha1.ConditionApplied) {
			first(c.applied)
		}
		if at(w, lodestarworkv1alpha1.ConditionAvailable) {
			first(c.available)
		}
	})
	go c.follow(ctx, placements, func(obj any, now time.Time) {
		pl, ok := obj.(*placementv1alpha1.Placement)
		if !ok || pl.Name != p.Name {
			return
		}
		if int(ptr.Deref(pl.Status.AvailableClusters, 0)) == want && meta.IsStatusConditionTrue(pl.Status.Conditions, placementv1alpha1.AvailableCondition) && c.placed.IsZero() {
			c.placed = now
		}
	})
	c.start = time.Now()
	return c, nil
}

// at tells whether the Work reports the condition True for its generation.
func at(w *workv1alpha1.Work, t string) bool {
	cond := meta.FindStatusCondition(w.Status.Conditions, t)
	return cond != nil && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == w.Generation
}

func (c *stageClock) follow(ctx context.Context, w watch.Interface, seen func(obj any, now time.Time)) {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			c.mu.Lock()
			seen(ev.Object, time.Now())
			c.mu.Unlock()
		}
	}
}

// stages returns how long each of stageNames took.
func (c *stageClock) stages() ([]time.Duration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	first := func(m map[string]time.Time) time.Time {
		var t time.Time
		for _, v := range m {
			if t.IsZero() || v.Before(t) {
				t = v
			}
		}
		return t
	}
	last := func(m map[string]time.Time) time.Time {
		var t time.Time
		for _, v := range m {
			if v.After(t) {
				t = v
			}
		}
		return t
	}
	if c.decided.IsZero() || len(c.written) < c.want || len(c.applied) < c.want || len(c.available) < c.want || c.placed.IsZero() {
		return nil, fmt.Errorf("the watches saw %d of %d Works written, %d applied, %d available (decided %t, Placement available %t)",
			len(c.written), c.want, len(c.applied), len(c.available), !c.decided.IsZero(), !c.placed.IsZero())
	}
	marks := []time.Time{c.start, c.decided, first(c.written), last(c.written), last(c.applied), last(c.available), c.placed}
	out := make([]time.Duration, 0, len(stageNames))
	for i := 1; i < len(marks); i++ {
		out = append(out, max(marks[i].Sub(marks[i-1]), 0))
	}
	return out, nil
}

// timedStages is one run's time end to end and per stage.
type timedStages struct {
	total time.Duration
	each  []time.Duration
}

// timeStages runs place (which creates p and waits until it is available on want
// clusters) under the stage watches.
func (f *fleet) timeStages(ctx context.Context, p *placementv1alpha1.Placement, want int, place func() (time.Duration, error)) (timedStages, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	clock, err := f.watchStages(ctx, p, want)
	if err != nil {
		return timedStages{}, err
	}
	total, err := place()
	if err != nil {
		return timedStages{}, err
	}
	var each []time.Duration
	// The watches may be a moment behind the poll that saw the Placement available.
	if _, err := waitFor(ctx, 30*time.Second, 10*time.Millisecond, func() (bool, error) {
		var err error
		each, err = clock.stages()
		return err == nil, nil
	}); err != nil {
		_, err = clock.stages()
		return timedStages{}, fmt.Errorf("timing the stages of %s: %w", client.ObjectKeyFromObject(p), err)
	}
	return timedStages{total: total, each: each}, nil
}
