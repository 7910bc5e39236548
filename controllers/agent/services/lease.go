package services

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servicesv1alpha1 "github.com/lodestar-dev/lodestar/api/services/v1alpha1"
)

// Defaults of the exports lease: renewed every 10 s, it expires 30 s after
// the last renewal, so one missed renewal withdraws nothing, and a cluster
// that stopped is withdrawn within the duration and the hub's poll period.
const (
	DefaultLeaseDuration = 30 * time.Second
	DefaultLeaseRenew    = 10 * time.Second
)

// ExportsLease keeps the cluster's exports lease on the hub live while the
// cluster reports any export.
type ExportsLease struct {
	// Hub is the agent's client of its cluster namespace on the hub.
	Hub client.Client
	// Namespace is the cluster's namespace on the hub.
	Namespace string
	// Cluster is the cluster's name (the lease's holder).
	Cluster string
	// Duration and Renew default to DefaultLeaseDuration and DefaultLeaseRenew.
	Duration, Renew time.Duration

	mu   sync.Mutex
	last *coordinationv1.Lease
}

// Start renews the lease every Renew while the cluster has reports on the
// hub; without any, the lease is left to expire.
func (l *ExportsLease) Start(ctx context.Context) error {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		list := &servicesv1alpha1.ExportedServiceList{}
		if err := l.Hub.List(ctx, list, client.InNamespace(l.Namespace)); err != nil || len(list.Items) == 0 {
			return
		}
		if err := l.renew(ctx, true); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Renewing the exports lease")
		}
	}, cmp.Or(l.Renew, DefaultLeaseRenew))
	return nil
}

// Ensure makes the lease live before a report, renewing it unless it was
// renewed within the renewal period.
func (l *ExportsLease) Ensure(ctx context.Context) error { return l.renew(ctx, false) }

func (l *ExportsLease) renew(ctx context.Context, always bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := metav1.NowMicro()
	if !always && l.last != nil && l.last.Spec.RenewTime != nil && now.Sub(l.last.Spec.RenewTime.Time) < cmp.Or(l.Renew, DefaultLeaseRenew) {
		return nil
	}
	duration := ptr.To(int32(cmp.Or(l.Duration, DefaultLeaseDuration) / time.Second))
	if l.last == nil {
		lease := &coordinationv1.Lease{}
		err := l.Hub.Get(ctx, client.ObjectKey{Namespace: l.Namespace, Name: servicesv1alpha1.ExportsLease}, lease)
		if apierrors.IsNotFound(err) {
			lease = &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Namespace: l.Namespace, Name: servicesv1alpha1.ExportsLease,
					Labels: map[string]string{servicesv1alpha1.ExportsLeaseLabel: "true"}},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(l.Cluster), LeaseDurationSeconds: duration, AcquireTime: &now, RenewTime: &now},
			}
			if err := l.Hub.Create(ctx, lease); err != nil {
				return fmt.Errorf("creating the exports lease: %w", err)
			}
			l.last = lease
			return nil
		}
		if err != nil {
			return err
		}
		l.last = lease
	}
	lease := l.last.DeepCopy()
	lease.Spec.RenewTime, lease.Spec.LeaseDurationSeconds = &now, duration
	if err := l.Hub.Update(ctx, lease); err != nil {
		l.last = nil // read it again next time
		return fmt.Errorf("renewing the exports lease: %w", err)
	}
	l.last = lease
	return nil
}
