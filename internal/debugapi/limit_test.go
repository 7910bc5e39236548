package debugapi

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// A user's loop of local requests is paced after its burst; another user's
// requests are not held back by it.
func TestUserPace(t *testing.T) {
	g := NewWithT(t)
	p := &userPace{every: 5, burst: 20}
	now := time.Unix(1_000_000, 0)
	for i := range 20 {
		ok, _ := p.allow("alice", now)
		g.Expect(ok).To(BeTrue(), "request %d of the burst", i)
	}
	ok, wait := p.allow("alice", now)
	g.Expect(ok).To(BeFalse())
	g.Expect(wait).To(BeNumerically("~", 200*time.Millisecond, 10*time.Millisecond))
	ok, _ = p.allow("bob", now)
	g.Expect(ok).To(BeTrue(), "bob has his own pace")
	ok, _ = p.allow("alice", now.Add(time.Second))
	g.Expect(ok).To(BeTrue(), "alice again a second later")
}
