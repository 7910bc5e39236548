package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarfleet "github.com/lodestar-dev/lodestar/internal/fleet"
)

// managersPerSet is how many simulated clusters each of M1's two cluster sets has.
const managersPerSet = 1000

// twoManagers is M1: one hub, two cluster sets of managersPerSet simulated
// clusters, and a Placement to every cluster of each set created at the same
// instant; first with one hub manager managing both sets, then with two hub
// manager releases (the hub-wide one with the first set, a second with
// --hub-wide=false and the other), each measured to Available on its set.
// Its own hub, so that it runs alone (no other scenario's objects).
func (f *fleet) twoManagers(ctx context.Context, record func(*Result) error) error {
	dir := filepath.Join(f.dir, "m1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	m, err := startFleet(dir, f.bin)
	if err != nil {
		return err
	}
	defer m.stop()
	if err := m.startSimulator(); err != nil {
		return err
	}
	sets := []string{"bench-set-a", "bench-set-b"}
	one, err := m.spawnManager(append(m.hubWideArgs(), "--clusterset-namespaces", sets[0]+","+sets[1])...)
	if err != nil {
		return err
	}
	say("M1: registering %d simulated clusters in each of two cluster sets", managersPerSet)
	for i, set := range sets {
		m.set = set
		if err := m.addClusters(ctx, (i+1)*managersPerSet, func(int) map[string]string { return map[string]string{"fleet": "sim"} }, true); err != nil {
			stopProcess(one)
			return err
		}
	}
	if err := m.takenIn(ctx, sets); err != nil {
		stopProcess(one)
		return err
	}
	if err := m.ready(ctx, "m1-one", sets); err != nil {
		stopProcess(one)
		return err
	}
	oneTimes, oneCPU, err := m.placeInEachSet(ctx, "m1-one", sets)
	stopProcess(one)
	if err != nil {
		return err
	}

	// The second set handed to a second release: its mark removed, as
	// docs/scale.md says, and each manager started with its own set.
	ns := &corev1.Namespace{}
	if err := m.admin.Get(ctx, client.ObjectKey{Name: sets[1]}, ns); err != nil {
		return err
	}
	delete(ns.Labels, placementv1alpha1.HubManagerLabel)
	if err := m.admin.Update(ctx, ns); err != nil {
		return err
	}
	first, err := m.spawnManager(append(m.hubWideArgs(), "--clusterset-namespaces", sets[0])...)
	if err != nil {
		return err
	}
	defer stopProcess(first)
	second, err := m.spawnManager("--clusterset-namespaces", sets[1], "--hub-wide=false", "--hub-manager-name", "lodestar-hub-b")
	if err != nil {
		return err
	}
	defer stopProcess(second)
	if err := m.ready(ctx, "m1-two", sets); err != nil {
		return err
	}
	twoTimes, twoCPU, err := m.placeInEachSet(ctx, "m1-two", sets)
	if err != nil {
		return err
	}

	r := &Result{Scenario: "M1", Members: simulated,
		Description: fmt.Sprintf("one hub, two cluster sets of %d clusters, a Placement to each whole set created at once; one hub manager with both sets, then two hub manager releases with one set each", managersPerSet)}
	for i, set := range sets {
		r.add("one manager: "+set, oneTimes[i].Seconds(), "s")
	}
	r.add("one manager: both", max(oneTimes[0], oneTimes[1]).Seconds(), "s")
	for i, set := range sets {
		r.add("two managers: "+set, twoTimes[i].Seconds(), "s")
	}
	both := max(twoTimes[0], twoTimes[1])
	r.add("two managers: both", both.Seconds(), "s")
	r.add("two managers: Works/s", 2*managersPerSet/both.Seconds(), "Works/s")
	r.add("two managers faster than one by", max(oneTimes[0], oneTimes[1]).Seconds()/both.Seconds(), "×")
	// What each placing cost the machine, per Work placed: the hub API
	// server's share must not grow with the number of managers.
	for _, phase := range []struct {
		name string
		cpu  map[string]float64
	}{{"one manager", oneCPU}, {"two managers", twoCPU}} {
		for _, proc := range []string{"kube-apiserver", "etcd", "lodestar-hub", "bench (simulated members)"} {
			r.add(fmt.Sprintf("%s: CPU %s per Work", phase.name, proc), 1000*phase.cpu[proc]/(2*managersPerSet), "ms")
		}
	}
	if f.bwork > 0 {
		r.FractionOfBwork = 2 * managersPerSet / both.Seconds() / f.bwork
	}
	say("M1: one manager %.1fs / %.1fs, two managers %.1fs / %.1fs", oneTimes[0].Seconds(), oneTimes[1].Seconds(), twoTimes[0].Seconds(), twoTimes[1].Seconds())
	return record(r)
}

// takenIn waits until the hub has taken in every cluster of sets (the cleanup
// finalizer and a reachability condition on each).
func (f *fleet) takenIn(ctx context.Context, sets []string) error {
	_, err := waitFor(ctx, 5*time.Minute, 2*time.Second, func() (bool, error) {
		for _, set := range sets {
			taken, all, err := f.takenInCount(ctx, set)
			if err != nil || taken < all {
				return false, err
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the hub to take in the clusters of %v: %w", sets, err)
	}
	return nil
}

// ready waits until the running managers place on each set: a Placement to
// the set's first cluster, Available, then removed. A manager just started
// fills its caches and takes the clusters in first, which M1 does not measure.
func (f *fleet) ready(ctx context.Context, prefix string, sets []string) error {
	for i, set := range sets {
		ns := fmt.Sprintf("%s-ready-%d", prefix, i)
		if err := f.appIn(ctx, ns, set); err != nil {
			return err
		}
		p := placementFor(ns, "web", nil)
		p.Spec.Scheduling.ClusterSelector = nil
		p.Spec.Scheduling.ClusterNames = []string{fmt.Sprintf("sim-%05d", i*managersPerSet)}
		if _, err := f.place(ctx, p, 1, 5*time.Minute); err != nil {
			return fmt.Errorf("the manager of %s: %w", set, err)
		}
		if err := f.remove(ctx, client.ObjectKeyFromObject(p), 2*time.Minute); err != nil {
			return err
		}
	}
	return nil
}

// placeInEachSet creates, at the same instant, one Placement per set (in a
// namespace that binds only that set) to every cluster of the set, measures
// each to Available, then removes them; it returns the times and the CPU
// seconds each process (by name) used until both were Available.
func (f *fleet) placeInEachSet(ctx context.Context, prefix string, sets []string) ([]time.Duration, map[string]float64, error) {
	placements := make([]*placementv1alpha1.Placement, len(sets))
	for i, set := range sets {
		ns := fmt.Sprintf("%s-%d", prefix, i)
		if err := f.appIn(ctx, ns, set); err != nil {
			return nil, nil, err
		}
		placements[i] = placementFor(ns, "web", nil)
	}
	before := cpuSeconds()
	reads, err := f.hubRequestsByKind(ctx, "GET", "LIST")
	if err != nil {
		return nil, nil, err
	}
	times := make([]time.Duration, len(sets))
	errs := make([]error, len(sets))
	done := make(chan int)
	for i, p := range placements {
		go func() {
			times[i], errs[i] = f.place(ctx, p, managersPerSet, 10*time.Minute)
			done <- i
		}()
	}
	for range placements {
		<-done
	}
	after := cpuSeconds()
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	if err := f.sayReads(ctx, prefix, reads, len(sets)*managersPerSet); err != nil {
		return nil, nil, err
	}
	for _, p := range placements {
		if err := f.remove(ctx, client.ObjectKeyFromObject(p), 5*time.Minute); err != nil {
			return nil, nil, err
		}
	}
	cpu := map[string]float64{}
	for k, v := range after {
		cpu[k] = v - before[k]
	}
	return times, cpu, nil
}

// appIn is the bench's application in ns, bound to set too (the bench's own
// lodestar-fleet, which its hub here does not manage, has no clusters).
func (f *fleet) appIn(ctx context.Context, ns, set string) error {
	if err := f.app(ctx, ns); err != nil {
		return err
	}
	return lodestarfleet.BindClusterSet(ctx, f.admin, ns, set)
}
