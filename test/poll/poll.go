package poll

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// Timeout is how long Until and True wait unless told otherwise: long
// enough for a loaded 2-core CI machine running the race detector.
const Timeout = 30 * time.Second

// Interval is the longest pause between two polls unless told otherwise.
// The first pauses are shorter (1 ms, doubling up to the interval), so
// that a condition met soon is seen soon and one met late costs little.
const Interval = 20 * time.Millisecond

// An Option changes how long or how often a condition is polled.
type Option func(*options)

type options struct {
	timeout, interval time.Duration
}

// For sets how long to wait.
func For(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// Every sets the longest pause between two polls.
func Every(d time.Duration) Option { return func(o *options) { o.interval = d } }

func resolve(opts []Option) options {
	o := options{timeout: Timeout, interval: Interval}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Stop wraps an error that no further wait can mend (a process that
// exited, a request refused for good): a condition that returns it ends
// Until or Wait at once with err.
func Stop(err error) error { return stopError{err} }

type stopError struct{ err error }

func (s stopError) Error() string { return s.err.Error() }
func (s stopError) Unwrap() error { return s.err }

// Until polls cond until it returns nil, and fails t with what and cond's
// last error when the timeout passes first or cond returns Stop(err).
func Until(t testing.TB, what string, cond func() error, opts ...Option) {
	t.Helper()
	o := resolve(opts)
	if err := wait(context.Background(), o, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// True is Until for a condition that has nothing to say but yes or no.
func True(t testing.TB, what string, cond func() bool, opts ...Option) {
	t.Helper()
	Until(t, what, func() error {
		if cond() {
			return nil
		}
		return errors.New("not yet")
	}, opts...)
}

// Wait polls cond until it returns nil, ctx ends, the timeout passes or
// cond returns Stop(err), and returns nil or cond's last error. It never
// touches a test.
func Wait(ctx context.Context, cond func() error, opts ...Option) error {
	return wait(ctx, resolve(opts), cond)
}

func wait(ctx context.Context, o options, cond func() error) error {
	deadline := time.Now().Add(o.timeout)
	pause := min(time.Millisecond, o.interval)
	timer := time.NewTimer(pause)
	defer timer.Stop()
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if stop := (stopError{}); errors.As(err, &stop) {
			return stop.err
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("not met within %v: %w", o.timeout, err)
		}
		timer.Reset(pause)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-timer.C:
		}
		pause = min(2*pause, o.interval)
	}
}

// Holds checks cond throughout d, polling it, and fails t at the first
// error: the way to say "this does not happen" with a bound the test
// states, instead of a sleep before one look.
func Holds(t testing.TB, what string, d time.Duration, cond func() error, opts ...Option) {
	t.Helper()
	o := resolve(opts)
	end := time.Now().Add(d)
	for {
		if err := cond(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !time.Now().Before(end) {
			return
		}
		time.Sleep(min(o.interval, time.Until(end)))
	}
}
