package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// rolling runs R1: a change rolled out over the 1000 clusters of an available
// Placement with Rolling maxUnavailable 10%, until the rollout is complete; and
// the hub's write rate meanwhile (from the hub API server's own request counter:
// the hub manager's writes and the simulated members' status reports). The
// Placement is removed afterwards.
func (f *fleet) rolling(ctx context.Context, bw float64, record func(*Result) error) error {
	ns := "bench-r1"
	if err := f.app(ctx, ns); err != nil {
		return err
	}
	p := placementFor(ns, "rolling", map[string]string{"fleet": "sim"})
	p.Spec.Strategy = placementv1alpha1.RolloutStrategy{Type: placementv1alpha1.RolloutRolling,
		Rolling: &placementv1alpha1.RollingStrategy{MaxUnavailable: ptrTo(intstr.FromString("10%"))}}
	key := client.ObjectKeyFromObject(p)
	if _, err := f.place(ctx, p, 1000, 5*time.Minute); err != nil {
		return err
	}
	writesBefore, err := f.hubWrites(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	cm := &corev1.ConfigMap{}
	if err := f.admin.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: "web-config"}, cm); err != nil {
		return err
	}
	cm.Data["payload"] = strings.Repeat("r", 1024)
	if err := f.admin.Update(ctx, cm); err != nil {
		return err
	}
	if _, err := waitFor(ctx, 10*time.Minute, 50*time.Millisecond, func() (bool, error) {
		p := &placementv1alpha1.Placement{}
		if err := f.admin.Get(ctx, key, p); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(p.Status.Conditions, placementv1alpha1.ProgressingCondition)
		return c != nil && c.ObservedGeneration == p.Generation && c.Reason == placementv1alpha1.ReasonRolloutComplete &&
			p.Status.Rollout != nil && p.Status.Rollout.TargetRevisionNumber == 2, nil
	}); err != nil {
		return fmt.Errorf("R1: %w", err)
	}
	d := time.Since(start)
	writesAfter, err := f.hubWrites(ctx)
	if err != nil {
		return err
	}
	r := &Result{Scenario: "R1", Description: "rollout of a change to a Placement's 1000 clusters, Rolling with maxUnavailable 10% (100 clusters at a time, each until Available), change to complete", Members: simulated}
	r.add("to complete", d.Seconds(), "s")
	r.add("clusters updated per second", 1000/d.Seconds(), "clusters/s")
	r.add("hub writes per second (manager and simulated members)", (writesAfter-writesBefore)/d.Seconds(), "writes/s")
	r.FractionOfBw = 1000 / d.Seconds() / bw
	r.FractionOfBwork = 1000 / d.Seconds() / f.bwork
	say("R1: 1000 clusters, 10%% at a time, in %.2fs", d.Seconds())
	if err := record(r); err != nil {
		return err
	}
	return f.remove(ctx, key, 5*time.Minute)
}

func ptrTo[T any](v T) *T { return &v }

// hubWrites is the hub API server's count of write requests so far.
func (f *fleet) hubWrites(ctx context.Context) (float64, error) {
	byKind, err := f.hubWritesByKind(ctx)
	var total float64
	for _, v := range byKind {
		total += v
	}
	return total, err
}

// hubWritesByKind is the hub API server's count of write requests so far, by
// resource (and subresource) and verb: "works POST", "works/status PATCH".
func (f *fleet) hubWritesByKind(ctx context.Context) (map[string]float64, error) {
	return f.hubRequestsByKind(ctx, "POST", "PUT", "PATCH", "APPLY", "DELETE")
}

// sayReads says the hub API server's reads (GET, LIST) since before
// (hubRequestsByKind's), by resource and verb, for those of 10 or more: how
// many and per Work. Not figures of the table, a hint of who reads what.
func (f *fleet) sayReads(ctx context.Context, prefix string, before map[string]float64, works int) error {
	after, err := f.hubRequestsByKind(ctx, "GET", "LIST")
	if err != nil {
		return err
	}
	keys := slices.Sorted(maps.Keys(after))
	for _, k := range keys {
		if n := after[k] - before[k]; n >= 10 {
			say("%s: hub reads, %s: %.0f (%.3f per Work)", prefix, k, n, n/float64(works))
		}
	}
	return nil
}

// hubRequestsByKind counts the hub API server's requests of the given verbs so
// far, by resource (and subresource) and verb.
func (f *fleet) hubRequestsByKind(ctx context.Context, verbs ...string) (map[string]float64, error) {
	cs, err := kubernetes.NewForConfig(f.adminCfg)
	if err != nil {
		return nil, err
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the hub API server's metrics: %w", err)
	}
	return sumCounter(bytes.NewReader(raw), "apiserver_request_total", func(l map[string]string) (string, bool) {
		if !slices.Contains(verbs, l["verb"]) {
			return "", false
		}
		key := l["resource"]
		if sub := l["subresource"]; sub != "" {
			key += "/" + sub
		}
		return key + " " + l["verb"], true
	})
}

// promLabels parses the labels of a Prometheus text line: a="x",b="y".
func promLabels(s string) map[string]string {
	out := map[string]string{}
	for s != "" {
		eq := strings.IndexByte(s, '=')
		if eq < 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			break
		}
		name := s[:eq]
		end := strings.IndexByte(s[eq+2:], '"')
		if end < 0 {
			break
		}
		out[name] = s[eq+2 : eq+2+end]
		s = strings.TrimPrefix(s[eq+2+end+1:], ",")
	}
	return out
}

// writesPerWork adds to r the hub writes per Work between two counts, in all and
// for each kind of write that made up at least 0.05 of a write per Work.
func writesPerWork(r *Result, before, after map[string]float64, works int) {
	var total float64
	type kind struct {
		name string
		n    float64
	}
	var kinds []kind
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			total += d
			kinds = append(kinds, kind{k, d})
		}
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i].n > kinds[j].n })
	r.add("hub writes per Work", total/float64(works), "writes")
	for _, k := range kinds {
		if per := k.n / float64(works); per >= 0.05 {
			r.add("  of which "+k.name, per, "writes/Work")
		}
	}
}
