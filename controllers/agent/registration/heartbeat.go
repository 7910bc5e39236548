package registration

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/metrics"
)

// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=create
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;update,resourceNames=lodestar-agent

// DefaultLeaseDuration is how long the agent's Lease lasts without renewal.
const DefaultLeaseDuration = 40 * time.Second

// Heartbeat renews the agent's Lease in its cluster's namespace on the hub, with
// the member's readiness in the Lease's annotations
// (placementv1alpha1.MemberReadyAnnotation and its message). It renews every
// quarter of the lease duration, or less often when the hub asks it to
// (placementv1alpha1.HeartbeatIntervalAnnotation, set for the fleet's size), and
// then stretches the lease by the same margin.
type Heartbeat struct {
	// Hub is the agent's client of the hub.
	Hub client.Client
	// Member checks the member API server's /readyz.
	Member rest.Interface
	// Namespace is the cluster's namespace on the hub; Cluster its name.
	Namespace, Cluster string
	// Duration is the lease duration when the hub asks for no slower pace.
	Duration time.Duration
	// OnReconnect, when set, is called when a renewal succeeds after one failed:
	// the hub is back, and what could not be reported meanwhile can be.
	OnReconnect func(context.Context)

	// last is the Lease as the last renewal wrote it: the next renewal updates it
	// without reading it first, and reads it again only when the hub changed it.
	last *coordinationv1.Lease
}

// Start renews the Lease until ctx ends.
func (h *Heartbeat) Start(ctx context.Context) error {
	if h.Duration == 0 {
		h.Duration = DefaultLeaseDuration
	}
	log := ctrl.LoggerFrom(ctx).WithName("heartbeat")
	failures := 0
	for {
		every, err := h.renew(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Error(err, "Renewing the agent's Lease on the hub")
		case err == nil && failures > 0:
			log.Info("The hub is reachable again")
			if h.OnReconnect != nil {
				h.OnReconnect(ctx)
			}
		}
		if err != nil {
			failures++
			own, _ := Pace(h.Duration, nil)
			every = RetryAfter(own, failures)
		} else {
			failures = 0
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

// Pace is how often the agent renews its Lease and the lease duration it writes,
// for the agent's own lease duration d and the Lease's annotations: every quarter
// of d, or the hub's slower interval with the same margin after it.
func Pace(d time.Duration, annotations map[string]string) (every, duration time.Duration) {
	every = max(d/4, 100*time.Millisecond)
	margin := max(d-every, 0)
	if s, err := strconv.Atoi(annotations[placementv1alpha1.HeartbeatIntervalAnnotation]); err == nil {
		if hub := time.Duration(s) * time.Second; hub > every {
			return hub, hub + margin
		}
	}
	return every, max(d, every)
}

// MaxRetryInterval is the longest an agent waits between two renewals that fail.
const MaxRetryInterval = time.Minute

// RetryAfter is how long an agent whose own pace is own waits after its n-th
// failed renewal in a row: its own pace at first, so that a short hiccup goes
// unnoticed, then twice as long with each failure up to MaxRetryInterval, and
// up to a fifth more at random. When a hub returns after an outage, its agents
// come back spread over a minute rather than all within their own pace (10 000
// agents every 10 s would be 1 000 writes a second), and the hub's return is
// still noticed within a minute.
func RetryAfter(own time.Duration, n int) time.Duration {
	d := own
	for i := 1; i < n && d < MaxRetryInterval; i++ {
		d *= 2
	}
	return wait.Jitter(min(d, max(own, MaxRetryInterval)), 0.2)
}

// NeedLeaderElection is false: the agent runs one replica per member.
func (h *Heartbeat) NeedLeaderElection() bool { return false }

// memberReady asks the member's API server whether it is ready.
func (h *Heartbeat) memberReady(ctx context.Context) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	body, err := h.Member.Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		msg := strings.TrimSpace(string(body))
		if msg == "" {
			msg = err.Error()
		}
		return false, message.Truncate("the member API server is not ready: "+msg, 1024)
	}
	return true, "the member API server is ready"
}

// renew writes the Lease and returns when to renew it next. A Lease the hub
// changed since the last renewal is read and written again at once.
func (h *Heartbeat) renew(ctx context.Context) (time.Duration, error) {
	every, err := h.write(ctx)
	if apierrors.IsConflict(err) {
		return h.write(ctx)
	}
	return every, err
}

func (h *Heartbeat) write(ctx context.Context) (time.Duration, error) {
	ready, msg := h.memberReady(ctx)
	now := metav1.NowMicro()
	if h.last == nil {
		lease := &coordinationv1.Lease{}
		err := h.Hub.Get(ctx, client.ObjectKey{Namespace: h.Namespace, Name: placementv1alpha1.AgentLeaseName}, lease)
		if apierrors.IsNotFound(err) {
			lease = &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: placementv1alpha1.AgentLeaseName, Namespace: h.Namespace,
					Labels: map[string]string{placementv1alpha1.AgentLeaseLabel: "true"}},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(h.Cluster), AcquireTime: &now},
			}
			every, d := Pace(h.Duration, nil)
			setReadiness(lease, ready, msg, now, d)
			if err := h.Hub.Create(ctx, lease); err != nil {
				return 0, err
			}
			h.last = lease
			metrics.Heartbeat(now.Time)
			return every, nil
		}
		if err != nil {
			return 0, fmt.Errorf("reading the Lease: %w", err)
		}
		h.last = lease
	}
	lease := h.last.DeepCopy()
	every, d := Pace(h.Duration, lease.Annotations)
	setReadiness(lease, ready, msg, now, d)
	if err := h.Hub.Update(ctx, lease); err != nil {
		// Read it again next time: the hub may have set a new pace on it.
		h.last = nil
		return 0, err
	}
	h.last = lease
	metrics.Heartbeat(now.Time)
	return every, nil
}

func setReadiness(lease *coordinationv1.Lease, ready bool, msg string, now metav1.MicroTime, d time.Duration) {
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Annotations[placementv1alpha1.MemberReadyAnnotation] = fmt.Sprint(ready)
	lease.Annotations[placementv1alpha1.MemberReadyMessageAnnotation] = msg
	lease.Spec.RenewTime = &now
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(max(math.Ceil(d.Seconds()), 1)))
}
