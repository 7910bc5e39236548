package debugapi

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Each user's requests for the hub manager's own answers (placements/fleet,
// placements/services: Local) are paced: each reads the hub's caches on the
// manager's CPU, which a loop of requests would take from every tenant's
// placements. Streams to members are bounded by their own limits.
const (
	// DefaultLocalPerUser is how many local answers a second one user gets,
	// after a burst of DefaultLocalBurst.
	DefaultLocalPerUser = 5
	DefaultLocalBurst   = 20
)

// userPace paces each user's local requests.
type userPace struct {
	every rate.Limit
	burst int
	users sync.Map // user name → *rate.Limiter
}

// allow tells whether user may have one more local answer now, and when to
// ask again when not.
func (p *userPace) allow(user string, now time.Time) (bool, time.Duration) {
	v, _ := p.users.LoadOrStore(user, rate.NewLimiter(p.every, p.burst))
	l := v.(*rate.Limiter)
	r := l.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}
