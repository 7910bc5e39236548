// Command bench runs Lodestar's benchmarks (`make bench`) against a real hub API
// server and writes bench/results/<scenario>.json and a Markdown table, which it
// also puts into README.md between the bench markers. Each result says whether its
// members were real or simulated.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof" //nolint:gosec // served only with --pprof
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// Metric is one figure of a result.
type Metric struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
}

// Result is one scenario's outcome.
type Result struct {
	Scenario    string   `json:"scenario"`
	Description string   `json:"description"`
	Members     string   `json:"members"`
	Machine     string   `json:"machine"`
	Date        string   `json:"date"`
	Metrics     []Metric `json:"metrics"`
	// FractionOfBw is the scenario's throughput (Works per second) as a fraction of
	// the API server's raw create rate of Work-sized objects; 0 when not a
	// throughput scenario.
	FractionOfBw float64 `json:"fractionOfBw,omitempty"`
	// FractionOfBwork is the same throughput as a fraction of B_work, the rate
	// at which the API server takes the writes a placed Work costs (its create
	// and its status patch).
	FractionOfBwork float64 `json:"fractionOfBwork,omitempty"`
}

// value is the figure named name, 0 when there is none.
func (r *Result) value(name string) float64 {
	for _, m := range r.Metrics {
		if m.Name == name {
			return m.Value
		}
	}
	return 0
}

func (r *Result) add(name string, value float64, unit string) {
	r.Metrics = append(r.Metrics, Metric{Name: name, Value: value, Unit: unit})
}

func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	return fmt.Sprintf("%d cores (%s), %s/%s", runtime.NumCPU(), model, runtime.GOOS, runtime.GOARCH)
}

func main() {
	out := flag.String("out", "bench/results", "Directory for the JSON results and the table.")
	bin := flag.String("bin", "bin", "Directory holding lodestar-hub and lodestar-agent.")
	readme := flag.String("readme", "README.md", "README whose benchmark table is replaced; empty to leave it.")
	reportOnly := flag.Bool("report", false, "Only write the table from the results already in --out.")
	only := flag.String("only", "", "Comma-separated scenario groups to run (p1, l1, p1-busy, p2, r1, d1 (with D1'), s1, p3, g1, h1, p4 (with X1 and footprint-agent), m1, soak, t1); empty runs all. For profiling: the README table is left alone.")
	soakDuration := flag.Duration("soak-duration", 10*time.Minute, "How long the soak (scenario group soak) changes Placements and injects faults.")
	hostileDuration := flag.Duration("hostile-duration", 10*time.Minute, "How long T1, the hostile-tenant soak (scenario group t1), attacks.")
	pprofAddr := flag.String("pprof", "", "With an address (host:port), serve net/http/pprof for this process there and for the hub manager on the next port.")
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.Level(zapcore.ErrorLevel), zap.WriteTo(os.Stderr)))
	if *reportOnly {
		if err := report(*out, *readme, 0); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *only != "" {
		*readme = ""
	}
	if *pprofAddr != "" {
		go func() { _ = http.ListenAndServe(*pprofAddr, nil) }() //nolint:gosec // a local profiling endpoint for development
	}
	if err := run(*out, *bin, *readme, *only, *pprofAddr, *soakDuration, *hostileDuration); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// nextPort is addr (host:port) with its port moved by n.
func nextPort(addr string, n int) string {
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	return net.JoinHostPort(host, strconv.Itoa(p+n))
}

func say(format string, args ...any) {
	fmt.Printf("%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func run(out, bin, readme, only, pprofAddr string, soakDuration, hostileDuration time.Duration) error {
	// Interrupted, the benchmark still stops every process it started.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "lodestar-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	started := time.Now()

	var results []*Result
	record := func(r *Result) error {
		r.Machine, r.Date = machine(), started.UTC().Format("2006-01-02")
		// Recorded again (a figure added later): the scenario's row is replaced.
		if i := slices.IndexFunc(results, func(o *Result) bool { return o.Scenario == r.Scenario }); i >= 0 {
			results[i] = r
		} else {
			results = append(results, r)
		}
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(out, r.Scenario+".json"), append(b, '\n'), 0o644)
	}

	say("starting the hub API server")
	f, err := startFleet(dir, bin)
	if err != nil {
		return err
	}
	defer f.stop()
	if only != "" {
		f.only = strings.Split(only, ",")
	}
	if pprofAddr != "" {
		if _, _, err := net.SplitHostPort(pprofAddr); err != nil {
			return fmt.Errorf("--pprof: %w", err)
		}
		f.pprof = nextPort(pprofAddr, 1)
		f.profiles = out
	}

	bw, err := f.baseline(ctx, record)
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	if err := f.simulatedScenarios(ctx, bw, record); err != nil {
		return err
	}
	if f.want("g1") {
		if err := f.debugStreams(ctx, record); err != nil {
			return fmt.Errorf("G1: %w", err)
		}
	}
	if f.want("h1") {
		if err := f.heartbeats(ctx, bw, record); err != nil {
			return fmt.Errorf("H1: %w", err)
		}
	}
	if f.want("p4") {
		if err := f.realMembers(ctx, record); err != nil {
			return fmt.Errorf("P4: %w", err)
		}
	}
	f.endHeartbeats()
	if f.want("m1") {
		if err := f.twoManagers(ctx, record); err != nil {
			return fmt.Errorf("M1: %w", err)
		}
	}
	if f.want("soak") {
		if err := f.soak(ctx, soakDuration, record); err != nil {
			return err
		}
	}
	if f.want("t1") {
		if err := f.hostile(ctx, hostileDuration, record); err != nil {
			return err
		}
	}

	return report(out, readme, time.Since(started))
}

// order is the order of scenarios in the table.
var order = []string{"baseline", "B_work", "P1-qps20", "P1", "L1", "P1-busy", "P2-1000", "R1", "D1", "D1'", "S1", "P2-5000", "P3", "footprint-hub", "G1", "H1", "P4", "X1", "footprint-agent", "M1", "soak", "T1"}

// report writes the table of the results in out, and into the README.
func report(out, readme string, took time.Duration) error {
	var results []*Result
	for _, name := range order {
		b, err := os.ReadFile(filepath.Join(out, name+".json"))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return err
		}
		r := &Result{}
		if err := json.Unmarshal(b, r); err != nil {
			return fmt.Errorf("reading %s: %w", name, err)
		}
		results = append(results, r)
	}
	table := markdown(results, took)
	if err := os.WriteFile(filepath.Join(out, "README.md"), []byte(table), 0o644); err != nil {
		return err
	}
	fmt.Println(table)
	if readme != "" {
		return replaceBetweenMarkers(readme, table)
	}
	return nil
}

const (
	beginMarker = "<!-- bench:begin -->"
	endMarker   = "<!-- bench:end -->"
)

func replaceBetweenMarkers(path, table string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, beginMarker), strings.Index(s, endMarker)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %s ... %s section", path, beginMarker, endMarker)
	}
	s = s[:i+len(beginMarker)] + "\n" + table + s[j:]
	return os.WriteFile(path, []byte(s), 0o644)
}

func markdown(results []*Result, took time.Duration) string {
	var b strings.Builder
	if len(results) > 0 {
		fmt.Fprintf(&b, "Measured %s on %s by `make bench`", results[0].Date, results[0].Machine)
		if took > 0 {
			fmt.Fprintf(&b, " (%s in all)", took.Round(time.Second))
		}
		b.WriteString(".\n\n")
	}
	b.WriteString("| scenario | members | figures | Works/s as a fraction of B_w | of B_work |\n|---|---|---|---|---|\n")
	for _, r := range results {
		var figs []string
		for _, m := range r.Metrics {
			figs = append(figs, fmt.Sprintf("%s %s %s", m.Name, format(m.Value), m.Unit))
		}
		frac, fracWork := "", ""
		if r.FractionOfBw > 0 {
			frac = fmt.Sprintf("%.2f", r.FractionOfBw)
		}
		if r.FractionOfBwork > 0 {
			fracWork = fmt.Sprintf("%.2f", r.FractionOfBwork)
		}
		members := "simulated"
		if strings.HasPrefix(r.Members, "real") {
			members = "real"
		} else if r.Members == "" {
			members = "none"
		}
		fmt.Fprintf(&b, "| **%s** %s | %s | %s | %s | %s |\n", r.Scenario, r.Description, members, strings.Join(figs, "; "), frac, fracWork)
	}
	b.WriteString("\nSimulated members run the real agent code (`work.Reconciler`), many agents in one process, each applying to an in-memory member whose Deployments become available at once; real members are kube-apiserver, etcd, kube-controller-manager, kube-scheduler and a kwok node each, with the `lodestar-agent` binary.\n")
	return b.String()
}

func format(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}
