// Package phases is the one shape of a reconcile's normal path: a list of
// small phases run in order over the reconcile's scope, their results merged
// (as Cluster API's doReconcile merges its phases'). A phase that finds there
// is nothing more to do yet (waiting for another controller, say) returns
// Wait: a result, not an error, and not a nil scope.
package phases

import (
	"context"
	"errors"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/lodestar-dev/lodestar/internal/requeue"
)

// Phase is one step of a reconcile over its scope S.
type Phase[S any] func(ctx context.Context, s *S) (ctrl.Result, error)

// errWait ends the phases without an error (Wait).
var errWait = errors.New("waiting")

// Wait ends a reconcile's phases here: nothing more is to be done until
// something changes, or until after (when not zero). The scope's status says
// why.
func Wait(after time.Duration) (ctrl.Result, error) {
	return ctrl.Result{RequeueAfter: after}, errWait
}

// Run runs phases in order over s until one fails or waits, and merges their
// results: the soonest non-zero RequeueAfter, with the priority of the phase
// that asked for it.
func Run[S any](ctx context.Context, s *S, phases ...Phase[S]) (ctrl.Result, error) {
	var out ctrl.Result
	for _, phase := range phases {
		res, err := phase(ctx, s)
		if res.RequeueAfter > 0 && requeue.Soonest(res.RequeueAfter, out.RequeueAfter) == res.RequeueAfter {
			out.RequeueAfter, out.Priority = res.RequeueAfter, res.Priority
		}
		if errors.Is(err, errWait) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
	return out, nil
}
