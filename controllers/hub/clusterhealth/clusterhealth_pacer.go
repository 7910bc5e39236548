package clusterhealth

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
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

// IntervalAnnotation is the value of placementv1alpha1.HeartbeatIntervalAnnotation
// the hub asks of every agent of a fleet of n (HeartbeatInterval, in seconds);
// "" when the agents keep their own pace.
func IntervalAnnotation(n int, budget float64, maxInterval time.Duration) string {
	if d := HeartbeatInterval(n, budget, maxInterval); d > 0 {
		return strconv.Itoa(int(d.Seconds()))
	}
	return ""
}

// Pacer sets the heartbeat interval of every agent's Lease
// (placementv1alpha1.HeartbeatIntervalAnnotation) for the fleet's size, so that
// heartbeats cost the hub a bounded write rate at 10 000 clusters while an agent
// that stops is still found within MaxInterval plus its margin and the grace
// period. The agents read it at their next renewal.
type Pacer struct {
	// Client reads the agents' Leases and the ClusterProfiles from the cache and
	// patches the Leases.
	Client client.Client
	// Informers, when set, tells the Pacer of every Lease the cache sees, so that
	// the Lease of an agent that joins is paced at once instead of at the next
	// count: a fleet that comes up all at once would otherwise renew at the agents'
	// own pace, many times the budget, until then.
	Informers cache.Informers
	// WriteBudget is how many Lease renewals per second the fleet may cost the hub
	// (default DefaultHeartbeatWriteBudget).
	WriteBudget float64
	// MaxInterval is the longest interval asked of an agent (default
	// DefaultMaxHeartbeatInterval).
	MaxInterval time.Duration
	// Every is how often the fleet is counted (default 30 s).
	Every time.Duration

	// want is the interval asked now ("" for the agents' own pace); nil until the
	// fleet is first counted.
	want atomic.Pointer[string]
	// queue holds the Leases seen without the interval asked.
	queue workqueue.TypedInterface[types.NamespacedName]
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
	if p.Informers != nil {
		p.queue = workqueue.NewTyped[types.NamespacedName]()
		defer p.queue.ShutDown()
		inf, err := p.Informers.GetInformer(ctx, &coordinationv1.Lease{})
		if err != nil {
			return fmt.Errorf("watching Leases: %w", err)
		}
		reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    p.notice,
			UpdateFunc: func(_, obj any) { p.notice(obj) },
		})
		if err != nil {
			return fmt.Errorf("watching Leases: %w", err)
		}
		defer func() { _ = inf.RemoveEventHandler(reg) }()
		for range paceWriters {
			go p.paceQueued(ctx, log)
		}
	}
	wait.JitterUntilWithContext(ctx, func(ctx context.Context) {
		if err := p.Pace(ctx); err != nil && ctx.Err() == nil {
			log.Error(err, "Setting the agents' heartbeat interval")
		}
	}, p.Every, 0.1, true)
	return nil
}

// notice queues an agent's Lease that does not carry the interval asked now.
func (p *Pacer) notice(obj any) {
	lease, ok := obj.(*coordinationv1.Lease)
	want := p.want.Load()
	if !ok || want == nil {
		return
	}
	if _, agent := lease.Labels[placementv1alpha1.AgentLeaseLabel]; !agent || lease.Annotations[placementv1alpha1.HeartbeatIntervalAnnotation] == *want {
		return
	}
	p.queue.Add(client.ObjectKeyFromObject(lease))
}

// paceQueued writes the interval on the queued Leases until the queue shuts down.
// A write that fails is tried again at the Lease's next renewal or the next count.
func (p *Pacer) paceQueued(ctx context.Context, log logr.Logger) {
	for {
		key, shutdown := p.queue.Get()
		if shutdown {
			return
		}
		if err := p.patch(ctx, key, *p.want.Load()); err != nil && ctx.Err() == nil {
			log.Error(err, "Setting an agent's heartbeat interval")
		}
		p.queue.Done(key)
	}
}

// Pace counts the fleet, the larger of the agents' Leases (labelled
// placementv1alpha1.AgentLeaseLabel) and the registered clusters (a fleet
// registered at once is paced for its size before its agents come up), and sets
// the interval for it on every Lease that does not carry it yet.
//
// A new interval for a fleet that grew rewrites every Lease: those writes are
// spread within the write budget (at most WriteBudget a second after a first
// paceWriters), so that re-pacing 10 000 agents never lands on the hub as a
// burst in the middle of a fan-out. A running Pacer meanwhile re-paces each
// agent that renews at once (notice), which spreads the rest over one of the
// old intervals; the Leases it wrote are not written again here.
func (p *Pacer) Pace(ctx context.Context) error {
	leases := &coordinationv1.LeaseList{}
	if err := p.Client.List(ctx, leases, client.HasLabels{placementv1alpha1.AgentLeaseLabel}, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	clusters := &cpv1alpha1.ClusterProfileList{}
	if err := p.Client.List(ctx, clusters, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	agents := max(len(leases.Items), len(clusters.Items))
	want := IntervalAnnotation(agents, p.WriteBudget, p.MaxInterval)
	p.want.Store(&want)
	var stale []types.NamespacedName
	for i := range leases.Items {
		if l := &leases.Items[i]; l.Annotations[placementv1alpha1.HeartbeatIntervalAnnotation] != want {
			stale = append(stale, client.ObjectKeyFromObject(l))
		}
	}
	if len(stale) == 0 {
		return nil
	}
	ctrl.LoggerFrom(ctx).Info("Setting the agents' heartbeat interval for the fleet's size", "agents", agents, "intervalSeconds", want, "leases", len(stale))
	limit := rate.Inf
	if p.WriteBudget > 0 {
		limit = rate.Limit(p.WriteBudget)
	}
	spread := rate.NewLimiter(limit, paceWriters)
	var eg errgroup.Group
	eg.SetLimit(paceWriters)
	for _, key := range stale {
		// Paced meanwhile at its renewal (notice), or gone: nothing to write,
		// and nothing taken from the budget.
		l := &coordinationv1.Lease{}
		if err := p.Client.Get(ctx, key, l); err != nil || l.Annotations[placementv1alpha1.HeartbeatIntervalAnnotation] == want {
			if client.IgnoreNotFound(err) != nil {
				return errors.Join(err, eg.Wait())
			}
			continue
		}
		if err := spread.Wait(ctx); err != nil {
			return errors.Join(err, eg.Wait())
		}
		eg.Go(func() error { return p.patch(ctx, key, want) })
	}
	return eg.Wait()
}

// patch sets the interval want on a Lease ("" removes it). A Lease gone meanwhile
// needs none.
func (p *Pacer) patch(ctx context.Context, key types.NamespacedName, want string) error {
	var value any // null removes the annotation
	if want != "" {
		value = want
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{placementv1alpha1.HeartbeatIntervalAnnotation: value}}})
	if err != nil {
		return err
	}
	obj := &coordinationv1.Lease{}
	obj.Namespace, obj.Name = key.Namespace, key.Name
	if err := p.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("setting the heartbeat interval of %s: %w", key, err)
	}
	return nil
}
