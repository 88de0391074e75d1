package link

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/canopy-dev/canopy/test/poll"
)

// crashConn is a UDP socket whose owner can "crash": from then on nothing
// it writes leaves, as when a process is killed and sends no
// CONNECTION_CLOSE.
type crashConn struct {
	net.PacketConn
	crashed atomic.Bool
}

func (c *crashConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	if c.crashed.Load() {
		return len(b), nil
	}
	return c.PacketConn.WriteTo(b, addr)
}

// A parent killed and started again on the same address (same identity)
// resets its children's QUIC links statelessly, and they redial it at
// once: the idle timeout is ten minutes here, so only the reset can end
// the old link before the test's deadline. The child is idle when the
// parent dies: its probe datagrams, not stream data, draw the reset.
func TestRestartedParentResetsChild(t *testing.T) {
	pki := newTestPKI(t)
	ctx := testCtx(t, 30*time.Second)
	cfg := Config{KeepAlivePeriod: 200 * time.Millisecond, MaxIdleTimeout: 10 * time.Minute, HandshakeTimeout: 2 * time.Second}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	crash := &crashConn{PacketConn: pc}
	l1, err := Listen(ListenConfig{TLS: pki.server, PacketConn: crash, DisableTCP: true, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	serve := func(l *Listener) {
		for {
			c, err := l.Accept(ctx)
			if err != nil {
				return
			}
			go serveEcho(ctx, c, nil)
		}
	}
	go serve(l1)

	// The child's socket is wrapped (and never crashed): quic-go runs no
	// path MTU discovery on it, whose large probe packets would draw a
	// reset too, but only in a link's first moments.
	cpc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cpc.Close() })
	d := &Dialer{TLS: pki.client, Mode: ModeQUICOnly, PacketConn: &crashConn{PacketConn: cpc}, QUICTimeout: 500 * time.Millisecond, Config: cfg}
	t.Cleanup(func() { _ = d.Close() })
	conns := make(chan Conn, 4)
	r := &Redialer{
		Dial: func(ctx context.Context) (Conn, error) { return d.Dial(ctx, []string{addr}) },
		Serve: func(ctx context.Context, c Conn) error {
			<-ctx.Done()
			return ctx.Err()
		},
		Backoff:   Backoff{Min: 20 * time.Millisecond, Max: 200 * time.Millisecond},
		OnConnect: func(c Conn, _ uint64) { conns <- c },
	}
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = r.Start(rctx) }()
	t.Cleanup(func() { stop(); wg.Wait() })

	c1 := <-conns
	echoRoundTrip(t, ctx, c1, StreamControl, []byte("one"))

	// The parent dies without a word; a new one binds the same address.
	crash.crashed.Store(true)
	_ = l1.Close()
	_ = pc.Close()
	var l2 *Listener
	poll.Until(t, "the address free again", func() (err error) {
		l2, err = Listen(ListenConfig{TLS: pki.server, Addr: addr, DisableTCP: true, Config: cfg})
		return err
	})
	t.Cleanup(func() { _ = l2.Close() })
	go serve(l2)

	var c2 Conn
	select {
	case c2 = <-conns:
	case <-ctx.Done():
		t.Fatalf("the child did not reconnect to the restarted parent (old link ended: %v)", context.Cause(c1.(*quicConn).qc.Context()))
	}
	cause := context.Cause(c1.(*quicConn).qc.Context())
	var reset *quic.StatelessResetError
	if !errors.As(cause, &reset) {
		t.Fatalf("old link ended with %v, want a stateless reset", cause)
	}
	echoRoundTrip(t, ctx, c2, StreamControl, []byte("two"))
}

func (c *crashConn) SetReadBuffer(n int) error {
	if b, ok := c.PacketConn.(interface{ SetReadBuffer(int) error }); ok {
		return b.SetReadBuffer(n)
	}
	return nil
}

func (c *crashConn) SetWriteBuffer(n int) error {
	if b, ok := c.PacketConn.(interface{ SetWriteBuffer(int) error }); ok {
		return b.SetWriteBuffer(n)
	}
	return nil
}

// The reset key is the same for the same identity and differs between
// identities; a configuration without a certificate gets none.
func TestDeriveResetKey(t *testing.T) {
	a, b := newTestPKI(t), newTestPKI(t)
	k1, k2 := deriveResetKey(a.server), deriveResetKey(a.server.Clone())
	if k1 == nil || k2 == nil || *k1 != *k2 {
		t.Fatalf("same identity: keys %x and %x", k1, k2)
	}
	if k3 := deriveResetKey(b.server); k3 == nil || *k3 == *k1 {
		t.Fatalf("another identity: key %x, first %x", k3, k1)
	}
	if k := deriveResetKey(&tls.Config{}); k != nil {
		t.Fatalf("no certificate: key %x", k)
	}
}
