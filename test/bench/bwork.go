package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	"github.com/lodestar-dev/lodestar/internal/names"
)

// bworkWorks is how many Works B_work writes.
const bworkWorks = 3000

// recordWorkBaseline measures B_work, keeps it for the fractions of the
// scenarios after, and records it.
func (f *fleet) recordWorkBaseline(ctx context.Context, bw float64, record func(*Result) error) error {
	bwork, size, statusSize, cpu, err := f.workBaseline(ctx)
	if err != nil {
		return err
	}
	f.bwork = bwork
	r := &Result{Scenario: "B_work", Description: "raw API server rate for the writes a placed Work costs: the create of a Work identical to one the hub wrote (the bench's application) and the agent's status patch of it (the same status), 3000 Works from 32 unthrottled writers, no controller acting on them"}
	r.add("B_work", bwork, "Works/s")
	r.add("writes", 2*bwork, "writes/s")
	r.add("as a fraction of B_w", bwork/bw, "")
	r.add("the Work", float64(size), "bytes")
	r.add("its status patch", float64(statusSize), "bytes")
	// What the writes cost each process, to set beside P2's CPU per Work.
	cpuShares(r, cpu[0], cpu[1])
	apiServerCPUPerWork(r, cpu[0], cpu[1], bworkWorks)
	return record(r)
}

// workBaseline measures B_work: how many Works per second this API server
// takes when each costs exactly the writes a placed Work costs it, the create
// of a Work identical to the work generator's (its spec, labels and
// annotations) and the agent's status patch of it (the same status), from 32
// unthrottled writers and no controller acting on them. The Work and its
// status are a real one: the bench's application placed on one simulated
// cluster. It returns B_work, the size of the Work and of its status, and
// each process's CPU seconds before and after the writes.
func (f *fleet) workBaseline(ctx context.Context) (rate float64, size, statusSize int, cpu [2]map[string]float64, err error) {
	const n, workers = bworkWorks, 32
	template, err := f.placedWork(ctx)
	if err != nil {
		return 0, 0, 0, cpu, err
	}
	status, err := json.Marshal(map[string]any{"status": template.Status})
	if err != nil {
		return 0, 0, 0, cpu, err
	}
	template.ManagedFields = nil
	whole, err := json.Marshal(template)
	if err != nil {
		return 0, 0, 0, cpu, err
	}
	ns := "bench-bwork"
	if err := f.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return 0, 0, 0, cpu, err
	}
	say("B_work: creating %d Works of %d bytes and patching their status (%d bytes)", n, len(whole), len(status))
	cpu[0] = cpuSeconds()
	start := time.Now()
	if err := parallel(n, workers, func(i int) error {
		w := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w-%05d", i), Namespace: ns,
			Labels: copied(template.Labels, "bench-"), Annotations: template.Annotations}, Spec: template.Spec}
		if err := f.admin.Create(ctx, w); err != nil {
			return err
		}
		return f.admin.Status().Patch(ctx, w, client.RawPatch(types.MergePatchType, status))
	}); err != nil {
		return 0, 0, 0, cpu, fmt.Errorf("measuring B_work: %w", err)
	}
	rate = float64(n) / time.Since(start).Seconds()
	cpu[1] = cpuSeconds()
	if err := f.admin.DeleteAllOf(ctx, &workv1alpha1.Work{}, client.InNamespace(ns)); err != nil {
		return 0, 0, 0, cpu, err
	}
	say("B_work: %.0f Works/s (%.0f writes/s)", rate, 2*rate)
	return rate, len(whole), len(status), cpu, nil
}

// placedWork places the bench's application on one simulated cluster and
// returns its Work as the agent left it (Available), then removes it.
func (f *fleet) placedWork(ctx context.Context) (*workv1alpha1.Work, error) {
	ns := "bench-bwork-template"
	if err := f.app(ctx, ns); err != nil {
		return nil, err
	}
	p := placementFor(ns, "web", nil)
	p.Spec.Scheduling.ClusterSelector = nil
	p.Spec.Scheduling.ClusterNames = []string{"sim-00000"}
	if _, err := f.place(ctx, p, 1, 2*time.Minute); err != nil {
		return nil, err
	}
	w := &workv1alpha1.Work{}
	if err := f.admin.Get(ctx, client.ObjectKey{Namespace: names.ClusterNamespace("sim-00000"), Name: names.Work(ns, "web")}, w); err != nil {
		return nil, fmt.Errorf("reading the placed Work: %w", err)
	}
	if err := f.remove(ctx, client.ObjectKeyFromObject(p), 2*time.Minute); err != nil {
		return nil, err
	}
	return w, nil
}

// copied is m with prefix before each key: labels of the same size that no
// controller acts on.
func copied(m map[string]string, prefix string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[prefix+k] = v
	}
	return out
}
