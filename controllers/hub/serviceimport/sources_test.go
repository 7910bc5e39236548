package serviceimport

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// A lease that expires withdraws the cluster at once; it is served again once
// live for a hold that doubles with each withdrawal in the window.
func TestSourcesDamping(t *testing.T) {
	g := NewWithT(t)
	s := &Sources{}
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	g.Expect(s.Served("a")).To(BeTrue(), "unknown: served")
	g.Expect(s.update(map[string]bool{"a": true}, now)).To(BeEmpty())
	g.Expect(s.Served("a")).To(BeTrue())

	// Flapping every 10 s for 5 minutes: one withdrawal, then the hold grows
	// past each return, so nothing else changes.
	var changes int
	for i := 1; i <= 30; i++ {
		now = now.Add(10 * time.Second)
		changes += len(s.update(map[string]bool{"a": i%2 == 0}, now))
	}
	g.Expect(changes).To(BeNumerically("<=", 3), "the importers' slices churn little")
	g.Expect(s.Served("a")).To(BeFalse())

	// Steady again: served after the hold (at most DefaultMaxHold).
	served := now
	for !s.Served("a") {
		now = now.Add(5 * time.Second)
		s.update(map[string]bool{"a": true}, now)
		g.Expect(now.Sub(served)).To(BeNumerically("<=", DefaultMaxHold+5*time.Second))
	}
	// A missing lease withdraws at once.
	g.Expect(s.update(map[string]bool{}, now)).To(Equal([]string{"a"}))
	g.Expect(s.Served("a")).To(BeFalse())
}

func TestHold(t *testing.T) {
	g := NewWithT(t)
	s := &Sources{}
	g.Expect(s.hold(0)).To(BeZero())
	g.Expect(s.hold(1)).To(Equal(DefaultHold))
	g.Expect(s.hold(2)).To(Equal(2 * DefaultHold))
	g.Expect(s.hold(20)).To(Equal(DefaultMaxHold))
}
