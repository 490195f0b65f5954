package gatewaytest

import (
	"context"
	"sync"
	"testing"

	"github.com/sekali/sekali/app/testenv"
)

// Holding is what Late needs of a gateway's fault switches: every
// Emulation and *emulation.Faults have it.
type Holding interface {
	// TimeOutAfterActing makes the next n API calls act, then not
	// answer until their caller gives up.
	TimeOutAfterActing(n int)
	// Held is how many calls acted and wait, unanswered, for their
	// caller.
	Held() int
}

// Late calls call with a deadline that passes once the gateway has acted
// and holds its answer (TimeOutAfterActing), and returns call's error:
// the caller cannot tell whether the gateway acted. what names the wait.
func Late(t testing.TB, faults Holding, what string, call func(ctx context.Context) error) error {
	t.Helper()
	faults.TimeOutAfterActing(1)
	ctx := newPassingDeadline(t.Context())
	t.Cleanup(ctx.pass)
	done := make(chan error, 1)
	go func() { done <- call(ctx) }()
	testenv.Eventually(t, what, func() bool { return faults.Held() == 1 })
	ctx.pass()
	return <-done
}

// passingDeadline is a context whose deadline passes when the test calls
// pass: after the gateway acted, at the moment the test chooses, so that
// a busy machine cannot make it come before the request arrives.
type passingDeadline struct {
	context.Context
	done chan struct{}
	pass func()
}

func newPassingDeadline(parent context.Context) *passingDeadline {
	c := &passingDeadline{Context: parent, done: make(chan struct{})}
	c.pass = sync.OnceFunc(func() { close(c.done) })
	return c
}

func (c *passingDeadline) Done() <-chan struct{} { return c.done }

func (c *passingDeadline) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}
