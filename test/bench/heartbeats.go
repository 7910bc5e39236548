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
	// Labelled so that no Placement of the scenarios before selects them: H1
	// measures heartbeats, not another fan-out. Their heartbeats start at once, as
	// a fleet's agents would while the hub takes the clusters in.
	if err := f.addClusters(ctx, heartbeatClusters, func(int) map[string]string {
		return map[string]string{"fleet": "edge"}
	}, false); err != nil {
		return err
	}
	say("H1: created in %s; starting %d heartbeats", time.Since(start).Round(time.Second), heartbeatClusters)

	// The members' /readyz, which every heartbeat asks.
	readyz := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer readyz.Close()
	dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: readyz.URL, QPS: -1})
	if err != nil {
		return err
	}
	member := dc.RESTClient()
	hbCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	started := time.Now()
	for i := range heartbeatClusters {
		name := fmt.Sprintf("sim-%05d", i)
		hb := &registration.Heartbeat{Hub: f.admin, Member: member, Namespace: names.ClusterNamespace(name), Cluster: name}
		delay := rand.N(heartbeatRamp) //nolint:gosec // spreading start times, not security
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-hbCtx.Done():
				return
			case <-time.After(delay):
			}
			_ = hb.Start(hbCtx)
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
	say("H1: paced at %s in %s; measuring", want, settled.Round(time.Second))

	// Every paced agent renews once in an interval: over a whole one, the rate is
	// the fleet's own, wherever each agent's renewals fall.
	window := want
	windowStart := time.Now()
	before, after, err := overWindow(ctx, window, f.hubWritesByKind)
	if err != nil {
		return err
	}
	// Every cluster must still be reachable, and none must have changed its
	// reachability in the window (a late heartbeat, or the hub catching up).
	profiles := &cpv1alpha1.ClusterProfileList{}
	if err := f.admin.List(ctx, profiles, client.MatchingLabels{"fleet": "edge"}); err != nil {
		return err
	}
	var unreachable, changed int
	for i := range profiles.Items {
		c := meta.FindStatusCondition(profiles.Items[i].Status.Conditions, placementv1alpha1.AgentReachableCondition)
		if c == nil || c.Status != metav1.ConditionTrue {
			unreachable++
		}
		if c != nil && c.LastTransitionTime.After(windowStart) {
			changed++
		}
	}
	leaseWrites := (after["leases PUT"] - before["leases PUT"] + after["leases PATCH"] - before["leases PATCH"]) / window.Seconds()
	var all float64
	for k, v := range after {
		all += v - before[k]
	}
	r := &Result{Scenario: "H1", Description: fmt.Sprintf("%d clusters with heartbeats (the agent's Lease renewal code, started over %s), paced by the hub; write rates over one whole interval (%s) once paced", heartbeatClusters, heartbeatRamp, window), Members: simulated}
	r.add("heartbeat interval set by the hub", want.Seconds(), "s")
	r.add("from the first heartbeat until every agent took it up", settled.Seconds(), "s")
	r.add("heartbeat writes", leaseWrites, "writes/s")
	r.add("heartbeat writes as a fraction of B_w", leaseWrites/bw, "")
	r.add("all hub writes meanwhile", all/window.Seconds(), "writes/s")
	r.add("an agent that stops is unreachable after at most", (wantDuration + clusterhealth.DefaultGracePeriod).Seconds(), "s")
	r.add("clusters not reachable at the end", float64(unreachable), "")
	r.add("clusters whose reachability changed in the window", float64(changed), "")
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
	say("H1: %.1f heartbeat writes/s (%.3f of B_w), manager RSS %.0f MiB", leaseWrites, leaseWrites/bw, f.managerRSS())
	return record(r)
}
