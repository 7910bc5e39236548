package workgenerator

import (
	"testing"
	"time"

	"github.com/lodestar-dev/lodestar/internal/handlers"
)

// A rollout under way looks again within rolloutBackstop whatever it asked
// for; a finished or paused one only when it asked.
func TestARolloutUnderWayIsNeverLeftAlone(t *testing.T) {
	for _, tc := range []struct {
		name     string
		interest handlers.Interest
		paused   bool
		asked    []time.Duration
		want     time.Duration
	}{
		{"gating, nothing asked", handlers.Gating, false, nil, rolloutBackstop},
		{"reporting, nothing asked", handlers.Reporting, false, []time.Duration{0, 0}, rolloutBackstop},
		{"gating, sooner asked", handlers.Gating, false, []time.Duration{0, 5 * time.Second}, 5 * time.Second},
		{"gating, later asked", handlers.Gating, false, []time.Duration{time.Hour}, rolloutBackstop},
		{"paused", handlers.Gating, true, nil, 0},
		{"paused, asked", handlers.Gating, true, []time.Duration{time.Minute}, time.Minute},
		{"idle", handlers.Idle, false, nil, 0},
		{"idle, asked", handlers.Idle, false, []time.Duration{time.Hour}, time.Hour},
	} {
		if got := lookAgain(tc.interest, tc.paused, tc.asked...); got != tc.want {
			t.Errorf("%s: looks again after %v, want %v", tc.name, got, tc.want)
		}
	}
}
