package registration

import (
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
