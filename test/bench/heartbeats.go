package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/agent/registration"
	"github.com/lodestar-dev/lodestar/controllers/hub/clusterhealth"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// heartbeatClusters is how many clusters H1 registers.
const heartbeatClusters = 10000

// heartbeatRamp is the time over which H1's agents come up: 83 agents a second,
// each creating its Lease (a read and a write) and taking up the hub's interval
// (the pacer's write, a read and a write), about a third of the hub API
// server's create rate on this machine. Started over 10 s, they asked twice that
// rate and it timed out. The
// write rate is measured over one whole interval once every agent is paced, so
// that it is the fleet's steady rate however the renewals fall in it.
const heartbeatRamp = 2 * time.Minute

// heartbeats runs H1: heartbeatClusters simulated clusters, each renewing its
// Lease with the agent's own heartbeat code (registration.Heartbeat, at the
// agent's default lease duration), started over heartbeatRamp as a fleet's
// agents would be; once the hub has paced them, the hub's write rate they cost,
// the hub manager's memory, and the longest an agent that stops would go
// unnoticed.
func (f *fleet) heartbeats(ctx context.Context, bw float64, record func(*Result) error) error {
	say("H1: registering %d simulated clusters", heartbeatClusters)
	start := time.Now()
	firstEdge := f.clusters
	// Labelled so that no Placement of the scenarios before selects them: H1
	// measures heartbeats, not another fan-out. Their heartbeats start at once, as
	// a fleet's agents would while the hub takes the clusters in.
	if err := f.addClusters(ctx, heartbeatClusters, func(int) map[string]string {
		return map[string]string{"fleet": "edge"}
	}, false); err != nil {
		return err
	}
	say("H1: created in %s; starting %d heartbeats", time.Since(start).Round(time.Second), heartbeatClusters)
	changes, err := f.watchReachability(ctx, map[string]string{"fleet": "edge"})
	if err != nil {
		return err
	}

	// The members' /readyz, which every heartbeat asks.
	readyz := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: readyz.URL, QPS: -1})
	if err != nil {
		readyz.Close()
		return err
	}
	member := dc.RESTClient()
	hbCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	// The heartbeats go on after H1, as a fleet's would: P4 runs on a hub whose
	// 10 000 clusters stay reachable (stopped, they would all turn unreachable
	// within 290 s, a status write each, while P4 measures).
	f.stopHeartbeats = func() { stop(); wg.Wait(); readyz.Close() }
	started := time.Now()
	// The agents of the first stoppedAgents edge clusters are stopped when the
	// window starts, to measure how soon the hub notices.
	stopAgent := make(map[string]context.CancelFunc, stoppedAgents)
	for i := range heartbeatClusters {
		name := fmt.Sprintf("sim-%05d", i)
		hb := &registration.Heartbeat{Hub: f.admin, Member: member, Namespace: names.ClusterNamespace(name), Cluster: name}
		delay := rand.N(heartbeatRamp) //nolint:gosec // spreading start times, not security
		agentCtx := hbCtx
		if i >= firstEdge && i < firstEdge+stoppedAgents {
			agentCtx, stopAgent[name] = context.WithCancel(hbCtx)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-agentCtx.Done():
				return
			case <-time.After(delay):
			}
			_ = hb.Start(agentCtx)
		}()
	}

	// Paced: every Lease carries the hub's interval, and its agent renewed at it.
	want := clusterhealth.HeartbeatInterval(heartbeatClusters, clusterhealth.DefaultHeartbeatWriteBudget, clusterhealth.DefaultMaxHeartbeatInterval)
	_, wantDuration := registration.Pace(registration.DefaultLeaseDuration, map[string]string{
		placementv1alpha1.HeartbeatIntervalAnnotation: fmt.Sprint(int(want.Seconds()))})
	if _, err := waitFor(ctx, 6*time.Minute, 5*time.Second, func() (bool, error) {
		leases := &coordinationv1.LeaseList{}
		if err := f.admin.List(ctx, leases, client.HasLabels{placementv1alpha1.AgentLeaseLabel}); err != nil {
			return false, err
		}
		paced := 0
		for i := range leases.Items {
			if int(ptr.Deref(leases.Items[i].Spec.LeaseDurationSeconds, 0)) == int(wantDuration.Seconds()) {
				paced++
			}
		}
		return paced >= heartbeatClusters, nil
	}); err != nil {
		return fmt.Errorf("H1: the agents did not take up the hub's heartbeat interval of %s: %w", want, err)
	}
	settled := time.Since(started)
	say("H1: paced at %s in %s; waiting until the hub reports every cluster reachable", want, settled.Round(time.Second))
	// The window starts once the hub has taken every cluster in: 10 000 joining
	// at once cost the hub manager several writes each (its finalizer, the
	// health condition before and after the first heartbeat, the pace), which
	// its client rate spreads over minutes. A first report landing in the window
	// is the hub catching up, not a cluster changing its reachability.
	if _, err := waitFor(ctx, 10*time.Minute, 5*time.Second, func() (bool, error) {
		profiles := &cpv1alpha1.ClusterProfileList{}
		if err := f.admin.List(ctx, profiles, client.MatchingLabels{"fleet": "edge"}); err != nil {
			return false, err
		}
		for i := range profiles.Items {
			if !meta.IsStatusConditionTrue(profiles.Items[i].Status.Conditions, placementv1alpha1.AgentReachableCondition) {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return fmt.Errorf("H1: the hub did not report every cluster reachable: %w", err)
	}
	takenIn := time.Since(started)
	say("H1: every cluster reachable %s after the first heartbeat; measuring", takenIn.Round(time.Second))

	// Every paced agent renews once in an interval: over a whole one, the rate is
	// the fleet's own, wherever each agent's renewals fall.
	window := want
	windowStart := time.Now()
	for _, cancel := range stopAgent {
		cancel()
	}
	before, after, err := overWindow(ctx, window, f.hubWritesByKind)
	if err != nil {
		return err
	}
	// Every other cluster must still be reachable, and none must have changed
	// its reachability in the window (a late heartbeat, or the hub's cache
	// lagging behind the renewals).
	profiles := &cpv1alpha1.ClusterProfileList{}
	if err := f.admin.List(ctx, profiles, client.MatchingLabels{"fleet": "edge"}); err != nil {
		return err
	}
	var unreachable int
	for i := range profiles.Items {
		c := meta.FindStatusCondition(profiles.Items[i].Status.Conditions, placementv1alpha1.AgentReachableCondition)
		if _, stopped := stopAgent[profiles.Items[i].Name]; !stopped && (c == nil || c.Status != metav1.ConditionTrue) {
			unreachable++
		}
	}
	changed := map[string]bool{}
	for _, c := range changes.since(windowStart) {
		if _, stopped := stopAgent[c.cluster]; stopped {
			continue
		}
		if !changed[c.cluster] && len(changed) < 5 {
			say("H1: reachability changed: %s", c)
		}
		changed[c.cluster] = true
	}
	noticed, err := f.stoppedNoticed(ctx, changes, windowStart, stopAgent, wantDuration+clusterhealth.DefaultGracePeriod)
	if err != nil {
		return err
	}
	leaseWrites := (after["leases PUT"] - before["leases PUT"] + after["leases PATCH"] - before["leases PATCH"]) / window.Seconds()
	var all float64
	for k, v := range after {
		all += v - before[k]
	}
	r := &Result{Scenario: "H1", Description: fmt.Sprintf("%d clusters with heartbeats (the agent's Lease renewal code, started over %s), paced by the hub; write rates over one whole interval (%s) once paced", heartbeatClusters, heartbeatRamp, window), Members: simulated}
	r.add("heartbeat interval set by the hub", want.Seconds(), "s")
	r.add("from the first heartbeat until every agent took it up", settled.Seconds(), "s")
	r.add("from the first heartbeat until the hub reported every cluster reachable", takenIn.Seconds(), "s")
	r.add("heartbeat writes", leaseWrites, "writes/s")
	r.add("heartbeat writes as a fraction of B_w", leaseWrites/bw, "")
	r.add("all hub writes meanwhile", all/window.Seconds(), "writes/s")
	r.add("an agent that stops is unreachable after at most (the bound)", (wantDuration + clusterhealth.DefaultGracePeriod).Seconds(), "s")
	r.add(fmt.Sprintf("%d agents stopped: found unreachable after their last renewal, at most", stoppedAgents), noticed.Seconds(), "s")
	r.add("other clusters not reachable at the end", float64(unreachable), "")
	r.add("other clusters whose reachability changed in the window", float64(len(changed)), "")
	kinds := make([]string, 0, len(after))
	for k, v := range after {
		if (v-before[k])/window.Seconds() >= 1 {
			kinds = append(kinds, k)
		}
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		r.add("  of which "+k, (after[k]-before[k])/window.Seconds(), "writes/s")
	}
	r.add("hub manager RSS", f.managerRSS(), "MiB")
	say("H1: %.1f heartbeat writes/s (%.3f of B_w), manager RSS %.0f MiB; %d reachability changes; stopped agents found after %s",
		leaseWrites, leaseWrites/bw, f.managerRSS(), len(changed), noticed.Round(time.Second))
	return record(r)
}

// stoppedAgents is how many of H1's agents stop when its window starts.
const stoppedAgents = 10

// stoppedNoticed waits until the hub reports every stopped agent unreachable
// and returns the longest time from an agent's last renewal to that report; it
// fails when one goes unnoticed past the bound.
func (f *fleet) stoppedNoticed(ctx context.Context, changes *reachabilityLog, stoppedAt time.Time, stopped map[string]context.CancelFunc, bound time.Duration) (time.Duration, error) {
	var longest time.Duration
	_, err := waitFor(ctx, bound+time.Minute, 5*time.Second, func() (bool, error) {
		longest = 0
		seen := map[string]bool{}
		for _, c := range changes.since(stoppedAt) {
			if _, ok := stopped[c.cluster]; ok && c.status == metav1.ConditionFalse && !seen[c.cluster] {
				seen[c.cluster] = true
				longest = max(longest, c.at.Sub(c.renewed))
			}
		}
		return len(seen) == len(stopped), nil
	})
	if err != nil {
		return 0, fmt.Errorf("the hub did not report every stopped agent unreachable: %w", err)
	}
	// The hub decides at the bound; writing the condition and this watch seeing
	// it take a little more, never a second.
	if longest > bound+time.Second {
		return 0, fmt.Errorf("a stopped agent was reported unreachable %s after its last renewal, more than the bound of %s (and a second to report it)", longest, bound)
	}
	return longest, nil
}
