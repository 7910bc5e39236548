package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/scheme"
)

// reachabilityChange is one change of a ClusterProfile's AgentReachable
// condition as the benchmark saw it, with the agent's Lease read from the API
// server at that moment: a Lease renewed recently when the hub says it expired
// is the hub's cache lagging; an old one is a late heartbeat.
type reachabilityChange struct {
	cluster string
	at      time.Time
	status  metav1.ConditionStatus
	reason  string
	message string
	// renewed and duration are the Lease's, read when the change was seen.
	renewed  time.Time
	duration time.Duration
}

func (c reachabilityChange) String() string {
	return fmt.Sprintf("%s %s at %s (%s: %s); its Lease then: renewed %s before, duration %s",
		c.cluster, c.status, c.at.Format("15:04:05.000"), c.reason, c.message, c.at.Sub(c.renewed).Round(time.Millisecond), c.duration)
}

// reachabilityLog records every change of AgentReachable of the ClusterProfiles
// a selector picks, from a watch of its own.
type reachabilityLog struct {
	mu      sync.Mutex
	changes []reachabilityChange
}

// watchReachability starts recording until ctx ends; it returns once the watch
// has listed the profiles.
func (f *fleet) watchReachability(ctx context.Context, selector map[string]string) (*reachabilityLog, error) {
	c, err := cache.New(f.adminCfg, cache.Options{Scheme: scheme.Hub(), ByObject: map[client.Object]cache.ByObject{
		&cpv1alpha1.ClusterProfile{}: {Label: labels.SelectorFromSet(selector)},
	}})
	if err != nil {
		return nil, err
	}
	inf, err := c.GetInformer(ctx, &cpv1alpha1.ClusterProfile{})
	if err != nil {
		return nil, err
	}
	log := &reachabilityLog{}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(oldObj, newObj any) {
		before, _ := oldObj.(*cpv1alpha1.ClusterProfile)
		after, _ := newObj.(*cpv1alpha1.ClusterProfile)
		if before == nil || after == nil {
			return
		}
		was := meta.FindStatusCondition(before.Status.Conditions, placementv1alpha1.AgentReachableCondition)
		now := meta.FindStatusCondition(after.Status.Conditions, placementv1alpha1.AgentReachableCondition)
		if now == nil || (was != nil && was.Status == now.Status) {
			return
		}
		// When the hub changed it, not when this handler got to it: 10 000
		// clusters taken in at once are a backlog of events here, and a first
		// report made before the window would otherwise land in it.
		at := time.Now()
		if !now.LastTransitionTime.IsZero() {
			at = now.LastTransitionTime.Time
		}
		change := reachabilityChange{cluster: after.Name, at: at, status: now.Status, reason: now.Reason, message: now.Message}
		lease := &coordinationv1.Lease{}
		if err := f.admin.Get(ctx, client.ObjectKey{Namespace: names.ClusterNamespace(after.Name), Name: placementv1alpha1.AgentLeaseName}, lease); err == nil && lease.Spec.RenewTime != nil {
			change.renewed = lease.Spec.RenewTime.Time
			if d := lease.Spec.LeaseDurationSeconds; d != nil {
				change.duration = time.Duration(*d) * time.Second
			}
		}
		log.mu.Lock()
		log.changes = append(log.changes, change)
		log.mu.Unlock()
	}}); err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("watching ClusterProfiles: %w", ctx.Err())
	}
	return log, nil
}

// since returns the changes seen at or after t.
func (l *reachabilityLog) since(t time.Time) []reachabilityChange {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []reachabilityChange
	for _, c := range l.changes {
		if !c.at.Before(t) {
			out = append(out, c)
		}
	}
	return out
}
