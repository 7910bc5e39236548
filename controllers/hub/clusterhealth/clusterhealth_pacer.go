package clusterhealth

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// Heartbeat pacing defaults: at most DefaultHeartbeatWriteBudget Lease renewals per
// second over the whole fleet, and agents renewing at least every
// DefaultMaxHeartbeatInterval. With the agent's default 30 s margin and the
// default grace period, an agent that stops is found unreachable at most
// 240 + 30 + 20 = 290 s after its last renewal, at any fleet size.
const (
	DefaultHeartbeatWriteBudget = 40.0
	DefaultMaxHeartbeatInterval = 240 * time.Second
	// agentInterval is how often an agent renews at its default lease duration.
	agentInterval = 10 * time.Second
	// paceEvery is how often the Pacer counts the fleet.
	paceEvery = 30 * time.Second
	// paceWriters is how many Leases the Pacer writes at once.
	paceWriters = 8
)

// HeartbeatInterval is how often each of n agents should renew its Lease so that
// their renewals cost the hub at most budget writes per second: 0 (the agents'
// own pace) while they fit at the agents' default pace, otherwise the smallest
// doubling of that pace that fits, and never more than maxInterval. Doubling
// steps keep a fleet that grows or shrinks by a few clusters from rewriting
// every Lease.
func HeartbeatInterval(n int, budget float64, maxInterval time.Duration) time.Duration {
	if budget <= 0 || n == 0 {
		return 0
	}
	need := time.Duration(float64(n) / budget * float64(time.Second))
	if need <= agentInterval {
		return 0
	}
	d := agentInterval
	for d < need && d < maxInterval {
		d *= 2
	}
	return min(d, maxInterval)
}

// Pacer sets the heartbeat interval of every agent's Lease
// (placementv1alpha1.HeartbeatIntervalAnnotation) for the fleet's size, so that
// heartbeats cost the hub a bounded write rate at 10 000 clusters while an agent
// that stops is still found within MaxInterval plus its margin and the grace
// period. The agents read it at their next renewal.
type Pacer struct {
	// Client reads the agents' Leases from the cache and patches them.
	Client client.Client
	// WriteBudget is how many Lease renewals per second the fleet may cost the hub
	// (default DefaultHeartbeatWriteBudget).
	WriteBudget float64
	// MaxInterval is the longest interval asked of an agent (default
	// DefaultMaxHeartbeatInterval).
	MaxInterval time.Duration
	// Every is how often the fleet is counted (default 30 s).
	Every time.Duration
}

// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=patch

// Start paces the fleet until ctx ends.
func (p *Pacer) Start(ctx context.Context) error {
	if p.WriteBudget == 0 {
		p.WriteBudget = DefaultHeartbeatWriteBudget
	}
	if p.MaxInterval == 0 {
		p.MaxInterval = DefaultMaxHeartbeatInterval
	}
	if p.Every == 0 {
		p.Every = paceEvery
	}
	log := ctrl.LoggerFrom(ctx).WithName("heartbeat-pacer")
	wait.JitterUntilWithContext(ctx, func(ctx context.Context) {
		if err := p.Pace(ctx); err != nil && ctx.Err() == nil {
			log.Error(err, "Setting the agents' heartbeat interval")
		}
	}, p.Every, 0.1, true)
	return nil
}

// Pace sets the interval for the fleet as it is now (the Leases labelled
// placementv1alpha1.AgentLeaseLabel, one per agent) on every Lease that does not
// carry it yet.
func (p *Pacer) Pace(ctx context.Context) error {
	leases := &coordinationv1.LeaseList{}
	if err := p.Client.List(ctx, leases, client.HasLabels{placementv1alpha1.AgentLeaseLabel}, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	agents := len(leases.Items)
	want := ""
	if d := HeartbeatInterval(agents, p.WriteBudget, p.MaxInterval); d > 0 {
		want = strconv.Itoa(int(d.Seconds()))
	}
	// An interval removed is a JSON null in the merge patch.
	var value any
	if want != "" {
		value = want
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{placementv1alpha1.HeartbeatIntervalAnnotation: value}}})
	if err != nil {
		return err
	}
	var eg errgroup.Group
	eg.SetLimit(paceWriters)
	changed := 0
	for i := range leases.Items {
		l := &leases.Items[i]
		if l.Annotations[placementv1alpha1.HeartbeatIntervalAnnotation] == want {
			continue
		}
		changed++
		key := client.ObjectKeyFromObject(l)
		eg.Go(func() error {
			obj := &coordinationv1.Lease{}
			obj.Namespace, obj.Name = key.Namespace, key.Name
			if err := p.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("setting the heartbeat interval of %s: %w", key, err)
			}
			return nil
		})
	}
	if changed > 0 {
		ctrl.LoggerFrom(ctx).Info("Setting the agents' heartbeat interval for the fleet's size", "agents", agents, "intervalSeconds", want, "leases", changed)
	}
	return eg.Wait()
}
