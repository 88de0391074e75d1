package link

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/test/poll"
)

func TestBackoffJitter(t *testing.T) {
	b := Backoff{Min: 100 * time.Millisecond, Max: 2 * time.Second, Rand: rand.New(rand.NewPCG(1, 2))}
	ceil := []time.Duration{100, 200, 400, 800, 1600, 2000, 2000, 2000}
	for n, want := range ceil {
		if got := b.Ceiling(n); got != want*time.Millisecond {
			t.Fatalf("Ceiling(%d) = %v, want %v", n, got, want*time.Millisecond)
		}
	}
	// Deterministic: the same seed draws the same waits.
	ref := rand.New(rand.NewPCG(1, 2))
	for n := range ceil {
		got := b.Delay(n)
		want := time.Duration(ref.Int64N(int64(b.Ceiling(n)) + 1))
		if got != want {
			t.Fatalf("Delay(%d) = %v, want %v", n, got, want)
		}
	}
	// Jittered and growing: over many draws, waits spread over [0, ceiling]
	// and their mean follows the ceiling.
	var prevMean time.Duration
	for n := range 6 {
		var sum, lo, hi time.Duration
		lo = time.Hour
		for range 2000 {
			d := b.Delay(n)
			if d < 0 || d > b.Ceiling(n) {
				t.Fatalf("Delay(%d) = %v outside [0, %v]", n, d, b.Ceiling(n))
			}
			sum += d
			lo, hi = min(lo, d), max(hi, d)
		}
		mean := sum / 2000
		if hi-lo < b.Ceiling(n)/2 {
			t.Fatalf("attempt %d: waits in [%v, %v], not jittered", n, lo, hi)
		}
		if n > 0 && n < 5 && mean <= prevMean {
			t.Fatalf("attempt %d: mean %v did not grow from %v", n, mean, prevMean)
		}
		prevMean = mean
	}
	if d := (Backoff{}).complete(); d.Min != 250*time.Millisecond || d.Max != 30*time.Second || d.ResetAfter != time.Minute {
		t.Fatalf("defaults %+v", d)
	}
}

// TestKeepConnectedAcrossRestart restarts the listener on the same address.
func TestKeepConnectedAcrossRestart(t *testing.T) {
	pki := newTestPKI(t)
	ctx := testCtx(t, 20*time.Second)
	l := listenLoopback(t, pki, nil)
	addr := l.Addr().String()
	serve := func(l *Listener) {
		for {
			c, err := l.Accept(ctx)
			if err != nil {
				return
			}
			go serveEcho(ctx, c, nil)
		}
	}
	go serve(l)

	d := &Dialer{TLS: pki.client, IgnoreProxyEnv: true, QUICTimeout: 300 * time.Millisecond, Config: fastConfig()}
	var waits []time.Duration
	waitc := make(chan time.Duration, 64)
	conns := make(chan Conn, 4)
	r := &Redialer{
		Dial: func(ctx context.Context) (Conn, error) { return d.Dial(ctx, []string{addr}) },
		Serve: func(ctx context.Context, c Conn) error {
			<-ctx.Done()
			return context.Cause(ctx)
		},
		Backoff:   Backoff{Min: 20 * time.Millisecond, Max: 200 * time.Millisecond, Rand: rand.New(rand.NewPCG(7, 7))},
		OnConnect: func(c Conn, _ uint64) { conns <- c },
		OnRetry:   func(_ error, _ int, w time.Duration) { waitc <- w },
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = r.Start(rctx); close(done) }()

	c1 := <-conns
	echoRoundTrip(t, ctx, c1, StreamControl, []byte("one"))
	_ = l.Close()
	<-c1.Done()
	poll.True(t, "failed redials", func() bool { return r.DialFailures() >= 2 })

	poll.Until(t, "listen again on "+addr, func() (err error) { // the port may briefly be held
		l, err = Listen(ListenConfig{TLS: pki.server, Addr: addr, Config: fastConfig()})
		return err
	})
	t.Cleanup(func() { _ = l.Close() })
	go serve(l)
	c2 := <-conns
	echoRoundTrip(t, ctx, c2, StreamControl, []byte("two"))
	if r.Reconnects() != 1 {
		t.Fatalf("reconnects %d", r.Reconnects())
	}
	stop()
	<-done
	close(waitc)
	for w := range waitc {
		waits = append(waits, w)
	}
	t.Logf("waits %v (transports %s)", waits, c2.Transport())
	if len(waits) < 3 {
		t.Fatalf("only %d retries", len(waits))
	}
}

func TestKeepConnectedReturnsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	done := make(chan struct{})
	go func() {
		KeepConnected(ctx, func(context.Context) (Conn, error) {
			calls++
			if calls == 3 {
				cancel()
			}
			return nil, context.DeadlineExceeded
		}, nil, Backoff{Min: time.Millisecond, Max: 2 * time.Millisecond})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("KeepConnected did not return")
	}
}
