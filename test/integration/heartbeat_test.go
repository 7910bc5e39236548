package integration

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/agent/registration"
	"github.com/lodestar-dev/lodestar/controllers/hub/clusterhealth"
	"github.com/lodestar-dev/lodestar/internal/scheme"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// TestHeartbeatPacing: the hub sets the agents' heartbeat interval for the fleet's
// size, an agent renews at the interval asked (and stretches its lease by its
// margin), and goes back to its own pace when the hub no longer asks; the hub's
// change of the Lease never counts as an outage. It runs on a hub API server of
// its own, whose only pacer is the test's: the shared hub's manager paces the
// shared fleet.
func TestHeartbeatPacing(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ownHub, err := testenv.StartHub(scheme.Hub(), testenv.QuickShutdown)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = ownHub.Stop() })
	hubClient := ownHub.Client
	ns := "lodestar-cluster-pace-" + rand.String(5)
	g.Expect(hubClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	// Two more agents' Leases in the same namespace, as far as the Pacer counts.
	for _, name := range []string{"other-a", "other-b"} {
		g.Expect(hubClient.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{placementv1alpha1.AgentLeaseLabel: "true"}},
			Spec:       coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: time.Now()}, LeaseDurationSeconds: ptr.To[int32](40)},
		})).To(Succeed())
	}

	dc, err := discovery.NewDiscoveryClientForConfig(members[member2].Config)
	g.Expect(err).NotTo(HaveOccurred())
	var reconnects atomic.Int32
	hb := &registration.Heartbeat{Hub: hubClient, Member: dc.RESTClient(), Namespace: ns, Cluster: "pace",
		Duration: 2 * time.Second, OnReconnect: func(context.Context) { reconnects.Add(1) }}
	hbCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = hb.Start(hbCtx) }()
	defer func() { stop(); <-done }()

	key := client.ObjectKey{Namespace: ns, Name: placementv1alpha1.AgentLeaseName}
	// renewals gathers the next n renew times of the agent's Lease.
	renewals := func(n int) []time.Time {
		var seen []time.Time
		g.Eventually(func(g Gomega) {
			lease := &coordinationv1.Lease{}
			g.Expect(hubClient.Get(ctx, key, lease)).To(Succeed())
			g.Expect(lease.Spec.RenewTime).NotTo(BeNil())
			if at := lease.Spec.RenewTime.Time; len(seen) == 0 || at.After(seen[len(seen)-1]) {
				seen = append(seen, at)
			}
			g.Expect(len(seen)).To(BeNumerically(">", n), "renewals seen")
		}).WithPolling(20 * time.Millisecond).Should(Succeed())
		return seen[1:] // the first is whatever was there when we started looking
	}
	leaseDuration := func() int32 {
		lease := &coordinationv1.Lease{}
		g.Expect(hubClient.Get(ctx, key, lease)).To(Succeed())
		return ptr.Deref(lease.Spec.LeaseDurationSeconds, 0)
	}
	shortestGap := func(ts []time.Time) time.Duration {
		gap := time.Hour
		for i := 1; i < len(ts); i++ {
			gap = min(gap, ts[i].Sub(ts[i-1]))
		}
		return gap
	}

	// At its own pace: every quarter of its 2 s lease.
	renewals(2)
	g.Expect(leaseDuration()).To(BeEquivalentTo(2))

	// Three agents for a budget of 0.1 renewals per second would need 30 s; the
	// hub asks for its maximum, here 3 s.
	pacer := &clusterhealth.Pacer{Client: hubClient, WriteBudget: 0.1, MaxInterval: 3 * time.Second}
	g.Expect(pacer.Pace(ctx)).To(Succeed())
	for _, name := range []string{placementv1alpha1.AgentLeaseName, "other-a", "other-b"} {
		lease := &coordinationv1.Lease{}
		g.Expect(hubClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, lease)).To(Succeed())
		g.Expect(lease.Annotations).To(HaveKeyWithValue(placementv1alpha1.HeartbeatIntervalAnnotation, "3"), name)
	}
	// The renewal after the next one is at the hub's pace, with the lease
	// stretched by the agent's margin (1.5 s).
	renewals(1)
	g.Expect(shortestGap(renewals(3))).To(BeNumerically(">=", 3*time.Second))
	g.Expect(leaseDuration()).To(BeEquivalentTo(5), "3 s + 1.5 s margin, rounded up")

	// A fleet that fits the budget at the agents' own pace: the interval goes.
	pacer.WriteBudget = -1
	g.Expect(pacer.Pace(ctx)).To(Succeed())
	lease := &coordinationv1.Lease{}
	g.Expect(hubClient.Get(ctx, key, lease)).To(Succeed())
	g.Expect(lease.Annotations).NotTo(HaveKey(placementv1alpha1.HeartbeatIntervalAnnotation))
	renewals(1)
	g.Expect(shortestGap(renewals(3))).To(BeNumerically("<", 2*time.Second))
	g.Expect(leaseDuration()).To(BeEquivalentTo(2))

	g.Expect(reconnects.Load()).To(BeZero(), "the hub's writes to the Lease are not an outage")

	// A fleet that grew: re-pacing every Lease is spread within the write
	// budget (here 1 a second, after a first 8 at once), never a burst.
	for i := range 10 {
		g.Expect(hubClient.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("grown-%d", i), Namespace: ns, Labels: map[string]string{placementv1alpha1.AgentLeaseLabel: "true"}},
			Spec:       coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: time.Now()}, LeaseDurationSeconds: ptr.To[int32](40)},
		})).To(Succeed())
	}
	var mu sync.Mutex
	var patched []time.Time
	direct, err := client.NewWithWatch(ownHub.Config, client.Options{Scheme: hubClient.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	recording := interceptor.NewClient(direct, interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
		mu.Lock()
		patched = append(patched, time.Now())
		mu.Unlock()
		return c.Patch(ctx, obj, p, opts...)
	}})
	spread := &clusterhealth.Pacer{Client: recording, WriteBudget: 1, MaxInterval: 3 * time.Second}
	g.Expect(spread.Pace(ctx)).To(Succeed())
	leases := &coordinationv1.LeaseList{}
	g.Expect(hubClient.List(ctx, leases, client.InNamespace(ns))).To(Succeed())
	g.Expect(leases.Items).To(HaveLen(13))
	for _, l := range leases.Items {
		g.Expect(l.Annotations).To(HaveKeyWithValue(placementv1alpha1.HeartbeatIntervalAnnotation, "3"), l.Name)
	}
	g.Expect(patched).To(HaveLen(13), "every Lease written once")
	g.Expect(patched[12].Sub(patched[0])).To(BeNumerically(">=", 4*time.Second), "13 writes at 1 a second after a burst of 8")

	// A running Pacer paces the Lease of an agent that joins as soon as its cache
	// sees it, not at its next count (an hour away here).
	hubCache, err := cache.New(ownHub.Config, cache.Options{Scheme: hubClient.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	cacheCtx, stopCache := context.WithCancel(ctx)
	defer stopCache()
	go func() { _ = hubCache.Start(cacheCtx) }()
	running := &clusterhealth.Pacer{Client: hubClient, Informers: hubCache, WriteBudget: 0.1, MaxInterval: 3 * time.Second, Every: time.Hour}
	pacerDone := make(chan struct{})
	go func() { defer close(pacerDone); _ = running.Start(cacheCtx) }()
	defer func() { stopCache(); <-pacerDone }()
	g.Eventually(func(g Gomega) {
		g.Expect(hubClient.Get(ctx, key, lease)).To(Succeed())
		g.Expect(lease.Annotations).To(HaveKeyWithValue(placementv1alpha1.HeartbeatIntervalAnnotation, "3"), "the first count")
	}).Should(Succeed())
	joined := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "other-c", Namespace: ns, Labels: map[string]string{placementv1alpha1.AgentLeaseLabel: "true"}},
		Spec:       coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: time.Now()}, LeaseDurationSeconds: ptr.To[int32](40)},
	}
	g.Expect(hubClient.Create(ctx, joined)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(hubClient.Get(ctx, client.ObjectKeyFromObject(joined), joined)).To(Succeed())
		g.Expect(joined.Annotations).To(HaveKeyWithValue(placementv1alpha1.HeartbeatIntervalAnnotation, "3"))
	}).Should(Succeed())
}
