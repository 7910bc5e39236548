package requeue

import (
	"testing"
	"time"
)

func TestSoonest(t *testing.T) {
	for _, tc := range []struct {
		in   []time.Duration
		want time.Duration
	}{
		{nil, 0},
		{[]time.Duration{0, 0}, 0},
		{[]time.Duration{0, 3 * time.Second, time.Second, -time.Second}, time.Second},
		{[]time.Duration{5 * time.Second}, 5 * time.Second},
	} {
		if got := Soonest(tc.in...); got != tc.want {
			t.Errorf("Soonest(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
