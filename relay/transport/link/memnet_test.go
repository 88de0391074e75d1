package link

import (
	"context"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/transport/link/memnet"
	"github.com/canopy-dev/canopy/test/poll"
)

// TestQUICOverMemnet runs a link over the in-memory network with 50 ms
// latency and 5 % loss, partitions it and heals it.
func TestQUICOverMemnet(t *testing.T) {
	// The 256 KiB echo takes ~3 s: QUIC's congestion control at 5 % loss and
	// 100 ms RTT allows ~90 KB/s each way.
	pki := newTestPKI(t)
	ctx := testCtx(t, 60*time.Second)
	n := memnet.NewSeeded(42)
	t.Cleanup(func() { _ = n.Close() })
	const parentAddr, childAddr = "127.0.1.1:443", "127.0.1.2:5000"
	if err := n.SetLink(parentAddr, childAddr, memnet.Link{Latency: 50 * time.Millisecond, Loss: 0.05}); err != nil {
		t.Fatal(err)
	}
	ppc, err := n.Listen(parentAddr)
	if err != nil {
		t.Fatal(err)
	}
	cpc, err := n.Listen(childAddr)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig()
	cfg.MaxIdleTimeout = 2 * time.Second
	cfg.KeepAlivePeriod = 200 * time.Millisecond
	l, err := Listen(ListenConfig{TLS: pki.server, PacketConn: ppc, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	if l.TCPAddr() != nil {
		t.Fatal("TCP served without an address")
	}
	go func() {
		for {
			c, err := l.Accept(ctx)
			if err != nil {
				return
			}
			go serveEcho(ctx, c, nil)
		}
	}()

	d := &Dialer{TLS: pki.client, Mode: ModeQUICOnly, PacketConn: cpc, QUICTimeout: time.Second, Config: cfg}
	t.Cleanup(func() { _ = d.Close() })
	conns := make(chan Conn, 4)
	r := &Redialer{
		Dial:      func(ctx context.Context) (Conn, error) { return d.Dial(ctx, []string{parentAddr}) },
		Serve:     func(ctx context.Context, c Conn) error { <-ctx.Done(); return ctx.Err() },
		Backoff:   Backoff{Min: 50 * time.Millisecond, Max: 200 * time.Millisecond},
		OnConnect: func(c Conn, _ uint64) { conns <- c },
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = r.Start(rctx); close(done) }()
	defer func() { stop(); <-done }()

	c := <-conns
	start := time.Now()
	echoRoundTrip(t, ctx, c, StreamDownsync, randomBytes(256<<10))
	t.Logf("256 KiB echoed over 50 ms / 5 %% loss in %v", time.Since(start))

	if err := n.Partition(parentAddr, childAddr); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	select {
	case <-c.Done():
		if el := time.Since(cut); el > 3*cfg.MaxIdleTimeout {
			t.Fatalf("Done after %v, idle timeout %v", el, cfg.MaxIdleTimeout)
		}
		t.Logf("Done %v after the partition", time.Since(cut))
	case <-ctx.Done():
		t.Fatal("Done did not fire after the partition")
	}
	poll.True(t, "a failed redial", func() bool { return r.DialFailures() >= 1 })
	if r.Connected() {
		t.Fatal("connected through a partition")
	}
	if err := n.Heal(parentAddr, childAddr); err != nil {
		t.Fatal(err)
	}
	select {
	case c2 := <-conns:
		echoRoundTrip(t, ctx, c2, StreamControl, randomBytes(10<<10))
	case <-ctx.Done():
		t.Fatal("no reconnect after healing")
	}
	if r.Reconnects() != 1 {
		t.Fatalf("reconnects %d, want 1", r.Reconnects())
	}
	st := n.Stats(childAddr, parentAddr)
	t.Logf("child→parent: %+v", st)
	if st.Dropped == 0 {
		t.Fatal("no packet dropped")
	}
}
