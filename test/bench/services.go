package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	servicesv1alpha1 "github.com/lodestar-dev/lodestar/api/services/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/scheme"
)

// exported runs S1: the bench's application placed on the 1000 simulated
// clusters, then one Service of it exported from every one of them (each
// simulated agent reports its export, one ready endpoint, as the real agent
// does: an ExportedService in its cluster namespace), imported on all. It
// measures the time from the first export until every importer's
// ImportedService carries every exporter's endpoint, then the time and the
// hub's writes for one endpoint change (one exporter gains a second endpoint)
// to reach every importer. Endpoint addresses are made up and never dialled.
func (f *fleet) exported(ctx context.Context, record func(*Result) error) error {
	const clusters = 1000
	ns := "bench-s1"
	if err := f.app(ctx, ns); err != nil {
		return err
	}
	p := placementFor(ns, "web", map[string]string{"fleet": "sim"})
	if _, err := f.place(ctx, p, clusters, 5*time.Minute); err != nil {
		return err
	}
	imports, err := f.watchImports(ctx)
	if err != nil {
		return err
	}
	defer imports.stop()
	exporters := make([]string, clusters)
	addresses := map[string][]string{}
	for i := range exporters {
		exporters[i] = fmt.Sprintf("sim-%05d", i)
		addresses[exporters[i]] = []string{fmt.Sprintf("10.%d.%d.%d", 100+i/65536, i/256%256, i%256)}
	}

	before, err := f.hubWritesByKind(ctx)
	if err != nil {
		return err
	}
	cpu0 := cpuSeconds()
	start := time.Now()
	if err := parallel(clusters, 32, func(i int) error {
		return f.admin.Create(ctx, exportFor(ns, exporters[i], addresses[exporters[i]]))
	}); err != nil {
		return fmt.Errorf("S1, exporting: %w", err)
	}
	if err := imports.wait(ctx, clusters, sourcesHash(addresses), 10*time.Minute); err != nil {
		return fmt.Errorf("S1, importing: %w", err)
	}
	everywhere := time.Since(start)
	cpu1 := cpuSeconds()
	// The hub answers each export after writing the imports: the change is
	// made once every export says it is imported everywhere.
	if err := f.answered(ctx, clusters, 10*time.Minute); err != nil {
		return fmt.Errorf("S1, the exports' answers: %w", err)
	}
	mid, err := f.hubWritesByKind(ctx)
	if err != nil {
		return err
	}

	// One endpoint change: the first exporter's second pod ready.
	changed := exporters[0]
	addresses[changed] = append(addresses[changed], "10.99.0.1")
	start = time.Now()
	e := &servicesv1alpha1.ExportedService{}
	if err := f.admin.Get(ctx, client.ObjectKey{Namespace: names.ClusterNamespace(changed), Name: names.ServiceObject(ns, "web")}, e); err != nil {
		return err
	}
	e.Spec.Slices = exportFor(ns, changed, addresses[changed]).Spec.Slices
	if err := f.admin.Update(ctx, e); err != nil {
		return err
	}
	if err := imports.wait(ctx, clusters, sourcesHash(addresses), 10*time.Minute); err != nil {
		return fmt.Errorf("S1, an endpoint change: %w", err)
	}
	change := time.Since(start)
	after, err := f.hubWritesByKind(ctx)
	if err != nil {
		return err
	}

	r := &Result{Scenario: "S1", Members: simulated,
		Description: fmt.Sprintf("one Service exported from %d clusters (one endpoint each), imported on all %d: the first export to every importer's ImportedService carrying every endpoint; then one endpoint added on one exporter", clusters, clusters)}
	r.add("every importer has every endpoint", everywhere.Seconds(), "s")
	r.add("hub writes until every export was answered", total(before, mid), "writes")
	cpuShares(r, cpu0, cpu1)
	r.add("an endpoint change on every importer", change.Seconds(), "s")
	// The Services' writes only: the simulated agents' heartbeats go on.
	var services float64
	for k, v := range after {
		if strings.HasPrefix(k, "importedservices") || strings.HasPrefix(k, "exportedservices") {
			services += v - mid[k]
		}
	}
	r.add("hub writes per endpoint change (imports and exports)", services, "writes")
	for _, k := range []string{"importedservices PATCH", "exportedservices PUT", "exportedservices/status PATCH"} {
		if d := after[k] - mid[k]; d > 0 {
			r.add("  of which "+k, d, "writes")
		}
	}
	say("S1: %d importers with %d exporters' endpoints in %.2fs; an endpoint change in %.2fs", clusters, clusters, everywhere.Seconds(), change.Seconds())
	if err := record(r); err != nil {
		return err
	}
	// The application removed first (the exports become invalid, and the hub
	// deletes every import at once), then the exports.
	if err := f.remove(ctx, client.ObjectKeyFromObject(p), 5*time.Minute); err != nil {
		return err
	}
	if err := parallel(clusters, 32, func(i int) error {
		return client.IgnoreNotFound(f.admin.Delete(ctx, &servicesv1alpha1.ExportedService{ObjectMeta: metav1.ObjectMeta{
			Namespace: names.ClusterNamespace(exporters[i]), Name: names.ServiceObject(ns, "web")}}))
	}); err != nil {
		return err
	}
	if err := imports.wait(ctx, 0, 0, 10*time.Minute); err != nil {
		return fmt.Errorf("S1, withdrawing: %w", err)
	}
	return nil
}

// exportFor is the report a cluster's agent makes of the bench's Service
// exported there with ready endpoints at addresses.
func exportFor(ns, cluster string, addresses []string) *servicesv1alpha1.ExportedService {
	var endpoints []servicesv1alpha1.Endpoint
	for _, a := range addresses {
		endpoints = append(endpoints, servicesv1alpha1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return &servicesv1alpha1.ExportedService{
		ObjectMeta: metav1.ObjectMeta{Namespace: names.ClusterNamespace(cluster), Name: names.ServiceObject(ns, "web")},
		Spec: servicesv1alpha1.ExportedServiceSpec{
			Namespace: ns, Name: "web", ExportCreated: metav1.NewTime(time.Unix(1767225600, 0)),
			Service: &servicesv1alpha1.ServiceProperties{Type: mcsv1beta1.ClusterSetIP,
				Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
			Slices: []servicesv1alpha1.Slice{{AddressType: discoveryv1.AddressTypeIPv4,
				Ports:     []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](80)}},
				Endpoints: endpoints}},
		},
	}
}

// sourcesHash is a digest of which addresses each exporting cluster serves,
// the same whether it is computed from what the bench exported or from an
// ImportedService's sources.
func sourcesHash(addresses map[string][]string) uint64 {
	clusters := make([]string, 0, len(addresses))
	for c := range addresses {
		clusters = append(clusters, c)
	}
	slices.Sort(clusters)
	h := fnv.New64a()
	for _, c := range clusters {
		a := slices.Clone(addresses[c])
		slices.Sort(a)
		fmt.Fprintf(h, "%s=%s;", c, strings.Join(a, ","))
	}
	return h.Sum64()
}

// importsWatch follows every ImportedService on the hub, as the importing
// clusters' agents do, and keeps of each only the digest of its sources.
type importsWatch struct {
	mu      sync.Mutex
	digests map[string]uint64 // importer's namespace -> sourcesHash of its import
	changed chan struct{}
	stop    func()
}

func (f *fleet) watchImports(ctx context.Context) (*importsWatch, error) {
	c, err := client.NewWithWatch(f.adminCfg, client.Options{Scheme: scheme.Hub()})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	w, err := c.Watch(ctx, &servicesv1alpha1.ImportedServiceList{})
	if err != nil {
		cancel()
		return nil, err
	}
	iw := &importsWatch{digests: map[string]uint64{}, changed: make(chan struct{}, 1), stop: func() { cancel(); w.Stop() }}
	go func() {
		for ev := range w.ResultChan() {
			im, ok := ev.Object.(*servicesv1alpha1.ImportedService)
			if !ok {
				continue
			}
			iw.mu.Lock()
			if ev.Type == watch.Deleted {
				delete(iw.digests, im.Namespace)
			} else {
				addresses := map[string][]string{}
				for _, s := range im.Spec.Sources {
					for _, sl := range s.Slices {
						for _, e := range sl.Endpoints {
							addresses[s.Cluster] = append(addresses[s.Cluster], e.Addresses...)
						}
					}
				}
				iw.digests[im.Namespace] = sourcesHash(addresses)
			}
			iw.mu.Unlock()
			select {
			case iw.changed <- struct{}{}:
			default:
			}
		}
	}()
	return iw, nil
}

// wait waits until exactly n imports exist, each with the digest want.
func (iw *importsWatch) wait(ctx context.Context, n int, want uint64, timeout time.Duration) error {
	deadline := time.After(timeout)
	for {
		iw.mu.Lock()
		done := len(iw.digests) == n
		for _, d := range iw.digests {
			done = done && d == want
		}
		have := len(iw.digests)
		iw.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("not done after %s (%d imports)", timeout, have)
		case <-iw.changed:
		case <-time.After(time.Second):
		}
	}
}

// answered waits until each of the n exports of the bench's Service reads
// Ready, imported by n clusters, for its generation.
func (f *fleet) answered(ctx context.Context, n int, timeout time.Duration) error {
	want := "imported by " + message.Count(n, "cluster")
	_, err := waitFor(ctx, timeout, time.Second, func() (bool, error) {
		list := &servicesv1alpha1.ExportedServiceList{}
		if err := f.admin.List(ctx, list); err != nil {
			return false, err
		}
		ready := 0
		for _, e := range list.Items {
			c := meta.FindStatusCondition(e.Status.Conditions, string(mcsv1beta1.ServiceExportConditionReady))
			if c != nil && c.Status == metav1.ConditionTrue && c.Message == want && e.Status.ObservedGeneration == e.Generation {
				ready++
			}
		}
		return ready == n, nil
	})
	return err
}

// total is the sum of the writes counted between two readings.
func total(before, after map[string]float64) float64 {
	var n float64
	for k, v := range after {
		n += v - before[k]
	}
	return n
}
