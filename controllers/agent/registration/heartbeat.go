package registration

import (
	"context"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/metrics"
)

// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=create
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;update,resourceNames=lodestar-agent

// DefaultLeaseDuration is how long the agent's Lease lasts without renewal.
const DefaultLeaseDuration = 40 * time.Second

// Heartbeat renews the agent's Lease in its cluster's namespace on the hub every
// quarter of the lease duration, with the member's readiness in the Lease's
// annotations (placementv1alpha1.MemberReadyAnnotation and its message).
type Heartbeat struct {
	// Hub is the agent's client of the hub.
	Hub client.Client
	// Member checks the member API server's /readyz.
	Member rest.Interface
	// Namespace is the cluster's namespace on the hub; Cluster its name.
	Namespace, Cluster string
	// Duration is the lease duration.
	Duration time.Duration
	// OnReconnect, when set, is called when a renewal succeeds after one failed:
	// the hub is back, and what could not be reported meanwhile can be.
	OnReconnect func(context.Context)
}

// Start renews the Lease until ctx ends.
func (h *Heartbeat) Start(ctx context.Context) error {
	if h.Duration == 0 {
		h.Duration = DefaultLeaseDuration
	}
	log := ctrl.LoggerFrom(ctx).WithName("heartbeat")
	every := max(h.Duration/4, 100*time.Millisecond)
	failing := false
	for {
		err := h.renew(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Error(err, "Renewing the agent's Lease on the hub")
			failing = true
		case err == nil && failing:
			log.Info("The hub is reachable again")
			failing = false
			if h.OnReconnect != nil {
				h.OnReconnect(ctx)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
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
		return false, truncate("the member API server is not ready: "+msg, 1024)
	}
	return true, "the member API server is ready"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

func (h *Heartbeat) renew(ctx context.Context) error {
	ready, msg := h.memberReady(ctx)
	now := metav1.NowMicro()
	lease := &coordinationv1.Lease{}
	err := h.Hub.Get(ctx, client.ObjectKey{Namespace: h.Namespace, Name: placementv1alpha1.AgentLeaseName}, lease)
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: placementv1alpha1.AgentLeaseName, Namespace: h.Namespace,
				Labels: map[string]string{placementv1alpha1.AgentLeaseLabel: "true"}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(h.Cluster), AcquireTime: &now},
		}
		setReadiness(lease, ready, msg, now, h.Duration)
		if err := h.Hub.Create(ctx, lease); err != nil {
			return err
		}
		metrics.Heartbeat(now.Time)
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the Lease: %w", err)
	}
	setReadiness(lease, ready, msg, now, h.Duration)
	if err := h.Hub.Update(ctx, lease); err != nil {
		return err
	}
	metrics.Heartbeat(now.Time)
	return nil
}

func setReadiness(lease *coordinationv1.Lease, ready bool, msg string, now metav1.MicroTime, d time.Duration) {
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Annotations[placementv1alpha1.MemberReadyAnnotation] = fmt.Sprint(ready)
	lease.Annotations[placementv1alpha1.MemberReadyMessageAnnotation] = msg
	lease.Spec.RenewTime = &now
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(max(d.Seconds(), 1)))
}
