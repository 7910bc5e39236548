package unseen

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// A write stands in for the cache until the cache shows it or TTL passes;
// Forget drops the writes of a prefix.
func TestWritesStandInUntilSeen(t *testing.T) {
	g := NewWithT(t)
	var w Writes[string]
	now := time.Now()
	w.Store("ns/p/a", "h2", now)
	w.Store("ns/p/b", "h2", now.Add(-TTL))
	w.Store("ns/q/a", "h3", now)
	got, ok := w.Lookup("ns/p/a", func(v string) bool { return v == "h1" })
	g.Expect(ok).To(BeTrue())
	g.Expect(got).To(Equal("h2"))
	_, ok = w.Lookup("ns/p/b", func(string) bool { return false })
	g.Expect(ok).To(BeFalse(), "older than TTL")
	_, ok = w.Lookup("ns/p/a", func(v string) bool { return v == "h2" })
	g.Expect(ok).To(BeFalse(), "the cache shows it")
	_, ok = w.Lookup("ns/p/a", func(string) bool { return false })
	g.Expect(ok).To(BeFalse(), "forgotten once seen")
	w.Forget("ns/q/")
	_, ok = w.Lookup("ns/q/a", func(string) bool { return false })
	g.Expect(ok).To(BeFalse())
}
