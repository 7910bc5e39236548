package serviceimport

import (
	"cmp"
	"context"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servicesv1alpha1 "github.com/lodestar-dev/lodestar/api/services/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// Defaults of Sources.
const (
	// DefaultPollPeriod is how often the exports leases are read.
	DefaultPollPeriod = 5 * time.Second
	// DefaultHold is how long a withdrawn cluster's lease must stay live before
	// its endpoints are served again, after one withdrawal; it doubles with each
	// further withdrawal within DefaultFlapWindow, up to DefaultMaxHold.
	DefaultHold = 10 * time.Second
	// DefaultMaxHold bounds the hold.
	DefaultMaxHold = 5 * time.Minute
	// DefaultFlapWindow is how long a withdrawal counts toward the hold.
	DefaultFlapWindow = 10 * time.Minute
)

// Sources tracks which exporting clusters' endpoints are served: a cluster's
// endpoints are withdrawn from every importer when its exports lease
// (servicesv1alpha1.ExportsLease) expires, independently of the paced
// heartbeat, and served again only once the lease has stayed live for a hold
// that grows with each withdrawal (damping: a flapping cluster does not churn
// the importers' slices). A cluster the tracker has not read yet is served, so
// that a restarted hub withdraws nothing it has not seen expire.
type Sources struct {
	// Reader lists the exports leases (the hub's cache holds only the agents'
	// heartbeat leases).
	Reader client.Reader
	// PollPeriod, Hold, MaxHold and FlapWindow default to the Default values.
	PollPeriod, Hold, MaxHold, FlapWindow time.Duration

	mu      sync.Mutex
	state   map[string]*sourceState
	changed func(cluster string)
}

type sourceState struct {
	served bool
	// liveSince is when the lease last became live (zero while it is not).
	liveSince time.Time
	// withdrawals are the recent withdrawals.
	withdrawals []time.Time
}

// Served tells whether cluster's endpoints are served to importers.
func (s *Sources) Served(cluster string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.state[cluster]
	return !ok || st.served
}

// Start reads the leases every PollPeriod until ctx ends.
func (s *Sources) Start(ctx context.Context) error {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := s.poll(ctx, time.Now()); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Reading the exports leases")
		}
	}, cmp.Or(s.PollPeriod, DefaultPollPeriod))
	return nil
}

// NeedLeaderElection is true: only the leader writes imports.
func (s *Sources) NeedLeaderElection() bool { return true }

func (s *Sources) poll(ctx context.Context, now time.Time) error {
	leases := &coordinationv1.LeaseList{}
	// From the API server's watch cache (resourceVersion 0), not a quorum read
	// of every Lease in etcd every poll.
	if err := s.Reader.List(ctx, leases, client.MatchingLabels{servicesv1alpha1.ExportsLeaseLabel: "true"},
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}}); err != nil {
		return err
	}
	live := map[string]bool{}
	for _, l := range leases.Items {
		cluster, ok := names.ClusterFromNamespace(l.Namespace)
		if ok && l.Name == servicesv1alpha1.ExportsLease && l.Spec.RenewTime != nil && l.Spec.LeaseDurationSeconds != nil {
			live[cluster] = now.Before(l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second))
		}
	}
	for _, cluster := range s.update(live, now) {
		if s.changed != nil {
			s.changed(cluster)
		}
	}
	return nil
}

// update applies what the leases say at now and returns the clusters whose
// state changed.
func (s *Sources) update(live map[string]bool, now time.Time) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == nil {
		s.state = map[string]*sourceState{}
	}
	for cluster := range live {
		if s.state[cluster] == nil {
			s.state[cluster] = &sourceState{served: true}
		}
	}
	var changed []string
	window := cmp.Or(s.FlapWindow, DefaultFlapWindow)
	for cluster, st := range s.state {
		for len(st.withdrawals) > 0 && now.Sub(st.withdrawals[0]) > window {
			st.withdrawals = st.withdrawals[1:]
		}
		if !live[cluster] {
			st.liveSince = time.Time{}
			if st.served {
				st.served = false
				st.withdrawals = append(st.withdrawals, now)
				changed = append(changed, cluster)
			}
			continue
		}
		if st.liveSince.IsZero() {
			st.liveSince = now
		}
		if !st.served && now.Sub(st.liveSince) >= s.hold(len(st.withdrawals)) {
			st.served = true
			changed = append(changed, cluster)
		}
	}
	return changed
}

// hold is how long a lease must stay live to be served again after n recent
// withdrawals.
func (s *Sources) hold(n int) time.Duration {
	if n == 0 {
		return 0
	}
	h, maxHold := cmp.Or(s.Hold, DefaultHold), cmp.Or(s.MaxHold, DefaultMaxHold)
	for i := 1; i < n && h < maxHold; i++ {
		h *= 2
	}
	return min(h, maxHold)
}
