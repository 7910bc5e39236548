package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
)

// hostOf is the host:port of a URL or host.
func hostOf(s string) string {
	if u, err := url.Parse(s); err == nil && u.Host != "" {
		return u.Host
	}
	return s
}

// overWindow reads counters, waits for window, and reads them again.
func overWindow(ctx context.Context, window time.Duration, read func(context.Context) (map[string]float64, error)) (before, after map[string]float64, err error) {
	if before, err = read(ctx); err != nil {
		return nil, nil, err
	}
	select {
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	case <-time.After(window):
	}
	if after, err = read(ctx); err != nil {
		return nil, nil, err
	}
	return before, after, nil
}

// agentRequests reads an agent's rest_client_requests_total, summed by host and
// method ("host:port GET").
func agentRequests(ctx context.Context, addr string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading the agent's metrics: %w", err)
	}
	defer resp.Body.Close()
	return sumCounter(resp.Body, "rest_client_requests_total", func(l map[string]string) (string, bool) {
		return l["host"] + " " + l["method"], true
	})
}

// sumCounter sums the samples of a counter in a Prometheus text exposition by the
// key that key gives each sample's labels; a sample key refuses is left out.
func sumCounter(r io.Reader, metric string, key func(labels map[string]string) (string, bool)) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		labels, ok := strings.CutPrefix(sc.Text(), metric+"{")
		if !ok {
			continue
		}
		end := strings.IndexByte(labels, '}')
		if end < 0 {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(labels[end+1:]), 64)
		if err != nil {
			continue
		}
		if k, ok := key(promLabels(labels[:end])); ok {
			out[k] += v
		}
	}
	return out, sc.Err()
}

// cpuSeconds is the CPU time (user and system) used so far by this process
// (the simulated members) and by each of its child processes, by command name
// (kube-apiserver, etcd, lodestar-hub, ...).
func cpuSeconds() map[string]float64 {
	out := map[string]float64{}
	self := os.Getpid()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... utime stime: fields 14 and 15.
		s := string(b)
		open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closing < open {
			continue
		}
		comm := s[open+1 : closing]
		fields := strings.Fields(s[closing+1:])
		if len(fields) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		if pid != self && ppid != self {
			continue
		}
		if pid == self {
			comm = "bench (simulated members)"
		}
		utime, _ := strconv.ParseFloat(fields[11], 64)
		stime, _ := strconv.ParseFloat(fields[12], 64)
		out[comm] += (utime + stime) / clockTicks
	}
	return out
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat times.
const clockTicks = 100

// cpuShares adds to r the CPU seconds each process used between two readings.
func cpuShares(r *Result, before, after map[string]float64) {
	names := make([]string, 0, len(after))
	for k := range after {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if d := after[k] - before[k]; d >= 0.5 {
			r.add("CPU "+k, d, "s")
		}
	}
}

// apiServerCPUPerWork records the hub API server's CPU per Work placed
// between before and after: set beside B_work's, what the hub's Works cost it
// beyond their writes.
func apiServerCPUPerWork(r *Result, before, after map[string]float64, works int) {
	const name = "kube-apiserver"
	if _, ok := after[name]; ok && works > 0 {
		r.add("CPU kube-apiserver per Work", 1000*(after[name]-before[name])/float64(works), "ms")
	}
}

// profileHub takes CPU profiles of the hub API server and of the hub
// manager for d from now, into <profiles>/<scenario>.<process>.pprof, when
// the bench runs with --pprof; the function it returns waits for them.
// Profiling is on in every kube-apiserver (--profiling defaults to true) and
// the admin may read it.
func (f *fleet) profileHub(ctx context.Context, scenario string, d time.Duration) (wait func()) {
	if f.profiles == "" {
		return func() {}
	}
	seconds := strconv.Itoa(int(d.Seconds()))
	var wg sync.WaitGroup
	take := func(process string, get func() ([]byte, error)) {
		wg.Go(func() {
			raw, err := get()
			if err == nil {
				err = os.WriteFile(filepath.Join(f.profiles, scenario+"."+process+".pprof"), raw, 0o644)
			}
			if err != nil {
				say("profile %s of %s: %v", process, scenario, err)
			}
		})
	}
	take("kube-apiserver", func() ([]byte, error) {
		cs, err := kubernetes.NewForConfig(f.adminCfg)
		if err != nil {
			return nil, err
		}
		return cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", seconds).Timeout(d + time.Minute).DoRaw(ctx)
	})
	take("lodestar-hub", func() ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+f.pprof+"/debug/pprof/profile?seconds="+seconds, nil)
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%s", resp.Status)
		}
		return io.ReadAll(resp.Body)
	})
	return wg.Wait
}
