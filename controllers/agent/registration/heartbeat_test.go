package registration

import (
	"math"
	"testing"
	"time"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

func TestPace(t *testing.T) {
	tests := []struct {
		name           string
		d              time.Duration
		interval       string
		every, leaseOf time.Duration
	}{
		{name: "own pace: a quarter of the lease", d: 40 * time.Second, every: 10 * time.Second, leaseOf: 40 * time.Second},
		{name: "the hub's slower pace, with the same margin", d: 40 * time.Second, interval: "240", every: 240 * time.Second, leaseOf: 270 * time.Second},
		{name: "never faster than its own pace", d: 40 * time.Second, interval: "5", every: 10 * time.Second, leaseOf: 40 * time.Second},
		{name: "garbage is ignored", d: 40 * time.Second, interval: "soon", every: 10 * time.Second, leaseOf: 40 * time.Second},
		{name: "a short lease", d: 2 * time.Second, interval: "3", every: 3 * time.Second, leaseOf: 4500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var annotations map[string]string
			if tt.interval != "" {
				annotations = map[string]string{placementv1alpha1.HeartbeatIntervalAnnotation: tt.interval}
			}
			every, d := Pace(tt.d, annotations)
			if every != tt.every || d != tt.leaseOf {
				t.Errorf("Pace(%s, %q) = %s, %s; want %s, %s", tt.d, tt.interval, every, d, tt.every, tt.leaseOf)
			}
		})
	}
}

// A failing renewal is retried at the agent's own pace, then less and less often
// up to MaxRetryInterval, each wait stretched by up to a fifth at random.
func TestRetryAfter(t *testing.T) {
	own := 10 * time.Second
	for n, want := range map[int]time.Duration{1: own, 2: 2 * own, 3: 4 * own, 4: MaxRetryInterval, 10: MaxRetryInterval} {
		lowest, highest := time.Duration(math.MaxInt64), time.Duration(0)
		for range 200 {
			d := RetryAfter(own, n)
			lowest, highest = min(lowest, d), max(highest, d)
		}
		if lowest < want || highest > want+want/5 {
			t.Errorf("after %d failures: waits from %s to %s; want from %s to %s", n, lowest, highest, want, want+want/5)
		}
		if highest == lowest {
			t.Errorf("after %d failures: every wait was %s; want them spread", n, lowest)
		}
	}
	// An agent whose own pace is slower than the cap keeps it.
	if d := RetryAfter(2*time.Minute, 3); d < 2*time.Minute || d > 2*time.Minute+24*time.Second {
		t.Errorf("RetryAfter(2m, 3) = %s; want 2m to 2m24s", d)
	}
}
