package phases

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
)

type scope struct{ ran []string }

func step(name string, res ctrl.Result, err error) Phase[scope] {
	return func(_ context.Context, s *scope) (ctrl.Result, error) {
		s.ran = append(s.ran, name)
		return res, err
	}
}

// Phases run in order; the soonest requeue wins; a wait ends them without an
// error, an error ends them with it.
func TestRunMergesAndStops(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := &scope{}
	res, err := Run(ctx, s, step("a", ctrl.Result{RequeueAfter: time.Minute}, nil), step("b", ctrl.Result{}, nil), step("c", ctrl.Result{RequeueAfter: time.Second}, nil))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(Equal(time.Second))
	g.Expect(s.ran).To(Equal([]string{"a", "b", "c"}))

	s = &scope{}
	wait := func(_ context.Context, s *scope) (ctrl.Result, error) {
		s.ran = append(s.ran, "wait")
		return Wait(5 * time.Second)
	}
	res, err = Run(ctx, s, step("a", ctrl.Result{RequeueAfter: time.Minute}, nil), wait, step("never", ctrl.Result{}, nil))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(Equal(5 * time.Second))
	g.Expect(s.ran).To(Equal([]string{"a", "wait"}))

	s = &scope{}
	boom := errors.New("boom")
	_, err = Run(ctx, s, step("a", ctrl.Result{}, boom), step("never", ctrl.Result{}, nil))
	g.Expect(err).To(MatchError(boom))
	g.Expect(s.ran).To(Equal([]string{"a"}))
}
