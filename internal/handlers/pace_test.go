package handlers

import (
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestStatusPaceSpacesCountOnlyWrites(t *testing.T) {
	p := StatusPace{Every: time.Second}
	key := client.ObjectKey{Namespace: "team-a", Name: "web"}
	now := time.Unix(1000, 0)
	if w := p.Wait(key, false, now); w != 0 {
		t.Fatalf("first write waited %v", w)
	}
	if w := p.Wait(key, false, now.Add(300*time.Millisecond)); w != 700*time.Millisecond {
		t.Fatalf("a count-only write 300ms after the last waits %v, want 700ms", w)
	}
	if w := p.Wait(key, true, now.Add(400*time.Millisecond)); w != 0 {
		t.Fatalf("a material write waited %v", w)
	}
	// The material write counts: the next count-only one waits from it.
	if w := p.Wait(key, false, now.Add(500*time.Millisecond)); w != 900*time.Millisecond {
		t.Fatalf("a count-only write 100ms after a material one waits %v, want 900ms", w)
	}
	p.Forget(key)
	if w := p.Wait(key, false, now.Add(600*time.Millisecond)); w != 0 {
		t.Fatalf("a write after Forget waited %v", w)
	}
}

func TestStatusPaceRechecksSoonAfterItsOwnWrite(t *testing.T) {
	p := StatusPace{Every: time.Second}
	key := client.ObjectKey{Namespace: "team-a", Name: "web"}
	now := time.Unix(1000, 0)
	if d := p.Recheck(key, now, 100*time.Millisecond); d != 0 {
		t.Fatalf("never written: recheck after %v, want none", d)
	}
	p.Wait(key, true, now)
	// The looks come sooner the younger the write, never before least, and
	// stop once the write is StatusSettle old: a few in all.
	var looks []time.Duration
	at := now.Add(10 * time.Millisecond)
	for range 100 {
		d := p.Recheck(key, at, 100*time.Millisecond)
		if d == 0 {
			break
		}
		looks = append(looks, d)
		at = at.Add(d)
	}
	if len(looks) == 0 || looks[0] != 100*time.Millisecond {
		t.Fatalf("looks %v: want the first after 100ms", looks)
	}
	if len(looks) > 6 {
		t.Fatalf("looks %v: want a few, each after as long as the write is old", looks)
	}
	if at.Sub(now) < StatusSettle {
		t.Fatalf("looks %v stopped %v after the write, before StatusSettle", looks, at.Sub(now))
	}
	if d := p.Recheck(client.ObjectKey{Namespace: "team-a", Name: "other"}, now, 100*time.Millisecond); d != 0 {
		t.Fatalf("another Placement: recheck after %v, want none", d)
	}
}
