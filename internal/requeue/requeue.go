// Package requeue picks when a reconcile asks to be run again.
package requeue

import "time"

// Soonest returns the shortest of the positive durations, or 0 when there is
// none: of several things a reconcile waits for, the first one due wins.
func Soonest(ds ...time.Duration) time.Duration {
	var out time.Duration
	for _, d := range ds {
		if d > 0 && (out == 0 || d < out) {
			out = d
		}
	}
	return out
}
