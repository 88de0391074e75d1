package link

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// Backoff is exponential backoff with full jitter: the wait before retry n
// (n = 0, 1, ...) is uniform in [0, min(Max, Min·2^n)]. The zero value of a
// field means its default.
type Backoff struct {
	Min time.Duration // ceiling of the first wait; default 250 ms
	Max time.Duration // cap of the ceiling; default 30 s
	// ResetAfter: a connection that lived at least this long resets the
	// attempt count. Default 2·Max.
	ResetAfter time.Duration
	// Rand draws the jitter; nil uses the global source. A *rand.Rand is not
	// safe for concurrent use: give each Redialer its own.
	Rand *rand.Rand
}

func (b Backoff) complete() Backoff {
	if b.Min <= 0 {
		b.Min = 250 * time.Millisecond
	}
	if b.Max <= 0 {
		b.Max = 30 * time.Second
	}
	if b.Max < b.Min {
		b.Max = b.Min
	}
	if b.ResetAfter <= 0 {
		b.ResetAfter = 2 * b.Max
	}
	return b
}

// Ceiling is the upper bound of the wait before retry n.
func (b Backoff) Ceiling(n int) time.Duration {
	b = b.complete()
	d := b.Min
	for i := 0; i < n && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// Delay draws the wait before retry n.
func (b Backoff) Delay(n int) time.Duration {
	ceil := int64(b.Ceiling(n))
	if b.Rand != nil {
		return time.Duration(b.Rand.Int64N(ceil + 1))
	}
	return time.Duration(rand.Int64N(ceil + 1))
}

// Redialer keeps one link up: dial, serve until the link is gone, wait, dial
// again. Hooks are called from the Start goroutine and must not block long.
type Redialer struct {
	Dial    func(ctx context.Context) (Conn, error)
	Serve   func(ctx context.Context, c Conn) error
	Backoff Backoff

	// OnConnect is called with each new link; reconnects counts the links
	// made before this one.
	OnConnect func(c Conn, reconnects uint64)
	// OnDisconnect is called when a link is gone, with what Serve returned
	// and how long the link lived.
	OnDisconnect func(err error, lived time.Duration)
	// OnRetry is called before each wait, with the dial or serve error.
	OnRetry func(err error, attempt int, wait time.Duration)

	connects  atomic.Uint64
	failures  atomic.Uint64
	connected atomic.Bool
}

// KeepConnected runs a [Redialer] until ctx is done.
func KeepConnected(ctx context.Context, dial func(ctx context.Context) (Conn, error), serve func(ctx context.Context, c Conn) error, backoff Backoff) {
	r := &Redialer{Dial: dial, Serve: serve, Backoff: backoff}
	_ = r.Start(ctx)
}

// Reconnects is how many links were made after the first.
func (r *Redialer) Reconnects() uint64 {
	n := r.connects.Load()
	if n == 0 {
		return 0
	}
	return n - 1
}

// DialFailures is how many dials failed.
func (r *Redialer) DialFailures() uint64 { return r.failures.Load() }

// Connected reports whether a link is up now.
func (r *Redialer) Connected() bool { return r.connected.Load() }

// Start blocks until ctx is done, keeping a link up; it returns ctx's error.
// Serve gets a context cancelled when ctx is done or the link is gone; the
// link is closed when Serve returns.
func (r *Redialer) Start(ctx context.Context) error {
	b := r.Backoff.complete()
	attempt := 0
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c, err := r.Dial(ctx)
		if err == nil {
			lived := r.serve(ctx, c, &err)
			if lived >= b.ResetAfter {
				attempt = 0
			}
		} else {
			r.failures.Add(1)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := b.Delay(attempt)
		if r.OnRetry != nil {
			r.OnRetry(err, attempt, wait)
		}
		attempt++
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

func (r *Redialer) serve(ctx context.Context, c Conn, errp *error) time.Duration {
	start := time.Now()
	n := r.connects.Add(1)
	r.connected.Store(true)
	if r.OnConnect != nil {
		r.OnConnect(c, n-1)
	}
	sctx, cancel := context.WithCancel(ctx)
	stop := AfterClose(c, cancel)
	err := r.Serve(sctx, c)
	stop()
	cancel()
	_ = c.Close("serve returned")
	r.connected.Store(false)
	if err == nil {
		err = errors.New("link: serve returned")
	}
	*errp = err
	lived := time.Since(start)
	if r.OnDisconnect != nil {
		r.OnDisconnect(err, lived)
	}
	return lived
}
