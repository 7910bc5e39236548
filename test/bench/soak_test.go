package main

import (
	"testing"
)

// The soak judges a member's deletion by what it asked of the hub: one that a
// removal asked for (earlier, however late it lands) is fine; one of an object
// a live Placement still places there is a violation.
func TestSoakJudgesDeletions(t *testing.T) {
	s := &soakFleet{placements: map[string]*soakPlacement{}, removed: map[string]int{}}
	s.ask("p1", []string{"a", "b"}, 1, false)
	s.deleted("a", "cm-p1")
	if len(s.violations) != 1 {
		t.Fatalf("a deletion of an object its live Placement places: %d violations, want 1", len(s.violations))
	}
	s.ask("p1", []string{"b"}, 1, false) // moved off a
	s.ask("p1", []string{"a", "b"}, 1, false)
	s.deleted("a", "cm-p1") // the move's deletion, landing after the move back
	s.deleted("c", "cm-p1") // never placed there
	if len(s.violations) != 1 {
		t.Fatalf("deletions a removal asked for: %v", s.violations)
	}
	s.deleted("a", "cm-p1") // nothing asked for this one
	if len(s.violations) != 2 {
		t.Fatalf("a second deletion with no removal to match: %d violations, want 2", len(s.violations))
	}
	s.ask("p1", nil, 0, true)
	s.deleted("a", "cm-p1")
	s.deleted("b", "cm-p1")
	if len(s.violations) != 2 {
		t.Fatalf("deletions of a deleted Placement's objects: %v", s.violations)
	}
}
