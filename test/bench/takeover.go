package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lodestar-dev/lodestar/controllers/hub"
)

// Leader election as the hub chart sets it up (its defaults).
const (
	leaderNamespace     = "lodestar-system"
	leaderElectionID    = hub.DefaultLeaderElectionID
	leaderLeaseDuration = 15 * time.Second
	leaderRetryPeriod   = 2 * time.Second
)

// takeover is L1: two hub manager replicas with leader election, as the hub
// chart runs them; the leader is killed (SIGKILL: no hand-over) and at once a
// Placement is created for 100 of the 1000 clusters. It reports how long the
// other replica took to lead, and the Placement's create to Available on all
// 100, which includes that wait.
func (f *fleet) takeover(ctx context.Context, bw float64, record func(*Result) error) error {
	f.stopManager()
	if err := f.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: leaderNamespace}}); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	args := []string{"--leader-elect", "--leader-election-namespace", leaderNamespace, "--leader-election-id", leaderElectionID,
		"--leader-election-lease-duration", leaderLeaseDuration.String(), "--leader-election-retry-period", leaderRetryPeriod.String()}
	// The first replica leads once it holds the Lease; the second stands by.
	leader, err := f.spawnManager(args...)
	if err != nil {
		return err
	}
	defer stopProcess(leader)
	var holder string
	if _, err := waitFor(ctx, time.Minute, 100*time.Millisecond, func() (bool, error) {
		holder, err = f.leaseHolder(ctx)
		return holder != "", err
	}); err != nil {
		return fmt.Errorf("L1: no replica leads: %w", err)
	}
	standby, err := f.spawnManager(args...)
	if err != nil {
		return err
	}
	f.manager = standby // the one left; stopped or restarted by the scenarios after
	ns := "bench-l1"
	if err := f.app(ctx, ns); err != nil {
		return err
	}
	// The standby's caches are filled while it waits (controller-runtime starts
	// them before it campaigns); give it the time a standby pod has had.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(10 * time.Second):
	}

	say("L1: killing the leading hub manager; a Placement for 100 clusters is created at once")
	if err := leader.Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	killed := time.Now()
	took := make(chan time.Duration, 1)
	go func() {
		if _, err := waitFor(ctx, 2*time.Minute, 50*time.Millisecond, func() (bool, error) {
			h, err := f.leaseHolder(ctx)
			return h != "" && h != holder, err
		}); err != nil {
			took <- -1
			return
		}
		took <- time.Since(killed)
	}()
	p := placementFor(ns, "web", map[string]string{"group": "0"})
	placed, err := f.place(ctx, p, 100, 3*time.Minute)
	if err != nil {
		return fmt.Errorf("L1: %w", err)
	}
	takeover := <-took
	if takeover < 0 {
		return errors.New("L1: the standby did not take over")
	}
	if err := f.remove(ctx, client.ObjectKeyFromObject(p), 2*time.Minute); err != nil {
		return err
	}
	r := &Result{Scenario: "L1", Description: fmt.Sprintf("two hub manager replicas with leader election (lease %s, retry %s, the chart's); the leader killed, and at once a Placement created for 100 of the 1000 clusters", leaderLeaseDuration, leaderRetryPeriod), Members: simulated}
	r.add("the standby leads after", takeover.Seconds(), "s")
	r.add("P1 of the Placement created at the kill (create to Available on 100)", placed.Seconds(), "s")
	r.add("  of which after the takeover", (placed - takeover).Seconds(), "s")
	r.FractionOfBw = 100 / placed.Seconds() / bw
	say("L1: took over in %.1fs; the Placement Available in %.1fs", takeover.Seconds(), placed.Seconds())
	return record(r)
}

// leaseHolder is the holder of the hub managers' leader election Lease, "" for none.
func (f *fleet) leaseHolder(ctx context.Context) (string, error) {
	l := &coordinationv1.Lease{}
	if err := f.admin.Get(ctx, client.ObjectKey{Namespace: leaderNamespace, Name: leaderElectionID}, l); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	return ptr.Deref(l.Spec.HolderIdentity, ""), nil
}

// stopProcess ends a process that may have ended already.
func stopProcess(cmd *exec.Cmd) {
	if cmd.ProcessState != nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
}
