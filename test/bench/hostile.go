package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lodestar-dev/lodestar/controllers/hub/scheduler"
	lodestarfleet "github.com/lodestar-dev/lodestar/internal/fleet"
	"github.com/lodestar-dev/lodestar/internal/testenv/hostile"
)

// What T1, the hostile-tenant soak, holds to (docs/tenancy.md).
const (
	hostileP99Goal       = 5 * time.Second
	hostileRSSGrowthGoal = 100.0 // MiB
	hostileEvery         = 500 * time.Millisecond
	hostileBystanderPace = 3 * time.Second
)

// hostile runs T1 on a hub of its own with real members (the soak's fleet:
// API servers, the hub manager and agent processes): one tenant runs every
// attack of the threat model at random for duration while a bystander's
// ConfigMap changes every few seconds. It reports how soon the bystander's
// changes reach its member, the hub manager's memory growth, and any of the
// bystander's objects deleted.
func (f *fleet) hostile(ctx context.Context, duration time.Duration, record func(*Result) error) error {
	s, err := f.startSoakFleet(ctx, "T1")
	if err != nil {
		return err
	}
	defer s.stop()
	tenantNS, byNS := "hostile", "bystander"
	for _, ns := range []string{tenantNS, byNS} {
		if err := s.hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
		if err := lodestarfleet.BindClusterSet(ctx, s.hub.Client, ns, scheduler.DefaultClusterSetNamespace); err != nil {
			return err
		}
	}
	memberClients := make([]client.Client, 0, len(s.members))
	for _, m := range s.members {
		memberClients = append(memberClients, m.cp.Client)
	}
	if err := hostile.InstallInterpreted(ctx, s.hub.Client, memberClients...); err != nil {
		return fmt.Errorf("T1: %w", err)
	}
	tenant, err := hostile.NewTenant(ctx, s.hub.Client, s.hub.Config, tenantNS, "tenant")
	if err != nil {
		return fmt.Errorf("T1: %w", err)
	}
	target := s.members[0]
	if err := hostile.PlaceBystander(ctx, s.hub.Client, byNS, "bystander", target.name); err != nil {
		return fmt.Errorf("T1: %w", err)
	}
	clusters := make([]string, 0, len(s.members))
	for _, m := range s.members {
		clusters = append(clusters, m.name)
	}
	by := &hostile.Bystander{Hub: s.hub.Client, Member: target.cp.Client, Namespace: byNS, Name: "bystander",
		Every: hostileBystanderPace, Within: time.Minute}
	// Settled first: the bystander's first change lands before the attacks and
	// the memory baseline.
	if err := by.Settle(ctx); err != nil {
		return fmt.Errorf("T1: %w", err)
	}
	baseRSS := rssMiB(s.manager.Process.Pid, "VmRSS")

	say("T1: %s of attacks, a bystander's change every %s", duration, hostileBystanderPace)
	attacker := &hostile.Tenant{Client: tenant, Namespace: tenantNS, Clusters: clusters, Rand: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 48)), Every: hostileEvery}
	run, stopRun := context.WithTimeout(ctx, duration)
	defer stopRun()
	var wg sync.WaitGroup
	var attackErr, byErr error
	var mu sync.Mutex
	peakRSS := baseRSS
	wg.Go(func() { attackErr = attacker.Run(run) })
	wg.Go(func() { byErr = by.Run(run) })
	wg.Go(func() {
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-run.Done():
				return
			case <-tick.C:
				mu.Lock()
				peakRSS = max(peakRSS, rssMiB(s.manager.Process.Pid, "VmRSS"))
				mu.Unlock()
			}
		}
	})
	wg.Wait()
	if err := errors.Join(attackErr, byErr); err != nil {
		return fmt.Errorf("T1: %w", err)
	}

	runs, refused := attacker.Counts()
	latencies, missed := by.Results()
	r := &Result{Scenario: "T1", Description: fmt.Sprintf("the hostile-tenant soak: %s of one tenant's attacks at random, one every %s (%s), while another tenant's ConfigMap changes every %s; goals: p99 ≤ %s, hub manager RSS growth ≤ %.0f MiB, nothing of the other tenant's deleted",
		duration, hostileEvery, strings.Join(hostile.Attacks, ", "), hostileBystanderPace, hostileP99Goal, hostileRSSGrowthGoal),
		Members: "real: kube-apiserver and etcd each, the lodestar-agent binary reaching the hub through a TCP proxy"}
	total, refusedTotal := 0, 0
	for _, a := range hostile.Attacks {
		total += runs[a]
		refusedTotal += refused[a]
	}
	r.add("attacks run", float64(total), "")
	for _, a := range hostile.Attacks {
		r.add("  "+a, float64(runs[a]), "")
	}
	r.add("  of them refused at admission", float64(refusedTotal), "")
	r.add("the other tenant's changes", float64(len(latencies)+len(missed)), "")
	r.add("  landed on its member, p50", hostile.Quantile(latencies, 0.5).Seconds(), "s")
	r.add("  p99", hostile.Quantile(latencies, 0.99).Seconds(), "s")
	r.add("  not landed within a minute", float64(len(missed)), "")
	r.add("  its objects deleted", float64(by.Deleted()), "")
	r.add("hub manager RSS before", baseRSS, "MiB")
	r.add("hub manager RSS growth (peak)", peakRSS-baseRSS, "MiB")
	var failed []string
	if p99 := hostile.Quantile(latencies, 0.99); p99 > hostileP99Goal {
		failed = append(failed, fmt.Sprintf("p99 %s > %s", p99, hostileP99Goal))
	}
	if peakRSS-baseRSS > hostileRSSGrowthGoal {
		failed = append(failed, fmt.Sprintf("RSS growth %.0f MiB > %.0f", peakRSS-baseRSS, hostileRSSGrowthGoal))
	}
	if len(missed) > 0 || by.Deleted() > 0 {
		failed = append(failed, fmt.Sprintf("%d changes missed, %d deletions", len(missed), by.Deleted()))
	}
	r.add("goals met", float64(boolInt(len(failed) == 0)), "")
	say("T1: %d attacks; the other tenant's changes p50 %s, p99 %s; hub manager RSS %.0f → peak %.0f MiB", total,
		hostile.Quantile(latencies, 0.5), hostile.Quantile(latencies, 0.99), baseRSS, peakRSS)
	if err := record(r); err != nil {
		return err
	}
	if len(failed) > 0 {
		slices.Sort(failed)
		return fmt.Errorf("T1: goals not met: %s", strings.Join(failed, "; "))
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
