package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
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
	p.Spec.Strategy = &placementv1alpha1.RolloutStrategy{Type: placementv1alpha1.RolloutRolling,
		Rolling: &placementv1alpha1.RollingStrategy{MaxUnavailable: ptrTo(intstr.FromString("10%"))}}
	key := client.ObjectKeyFromObject(p)
	if _, err := f.place(ctx, p, 1000, 5*time.Minute, false); err != nil {
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
	say("R1: 1000 clusters, 10%% at a time, in %.2fs", d.Seconds())
	if err := record(r); err != nil {
		return err
	}
	return f.remove(ctx, key, 5*time.Minute)
}

func ptrTo[T any](v T) *T { return &v }

// hubWrites is the hub API server's count of write requests so far.
func (f *fleet) hubWrites(ctx context.Context) (float64, error) {
	cs, err := kubernetes.NewForConfig(f.adminCfg)
	if err != nil {
		return 0, err
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading the hub API server's metrics: %w", err)
	}
	var total float64
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		write := false
		for _, verb := range []string{`verb="POST"`, `verb="PUT"`, `verb="PATCH"`, `verb="APPLY"`, `verb="DELETE"`} {
			if strings.Contains(line, verb) {
				write = true
				break
			}
		}
		if !write {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			total += v
		}
	}
	return total, sc.Err()
}
