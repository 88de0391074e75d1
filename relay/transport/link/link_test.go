package link

import (
	"context"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// acceptOne returns the next link accepted by l.
func acceptOne(t testing.TB, ctx context.Context, l *Listener) Conn {
	t.Helper()
	c, err := l.Accept(ctx)
	if err != nil {
		t.Fatalf("accept: %v", err)
	}
	return c
}

func listenLoopback(t testing.TB, pki testPKI, mod func(*ListenConfig)) *Listener {
	t.Helper()
	lc := ListenConfig{TLS: pki.server, Addr: "127.0.0.1:0", Config: fastConfig()}
	if mod != nil {
		mod(&lc)
	}
	l, err := Listen(lc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// exerciseLink opens every kind from the child and the proxy kind from the
// parent, echoing data both ways, and checks identities. The parent
// accepts streams (AcceptStream), the child serves them (ServeStreams),
// one of them opened before it does.
func exerciseLink(t *testing.T, ctx context.Context, child, parent Conn, transport string) {
	t.Helper()
	for _, c := range []Conn{child, parent} {
		if got := c.Transport(); got != transport {
			t.Fatalf("Transport() = %q, want %q", got, transport)
		}
		if got := c.ConnectionState().NegotiatedProtocol; got != ALPN {
			t.Fatalf("ALPN = %q", got)
		}
	}
	if cn := parent.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "child" {
		t.Fatalf("parent sees peer %q, want child", cn)
	}
	if cn := child.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "parent" {
		t.Fatalf("child sees peer %q, want parent", cn)
	}
	parentKinds := make(chan StreamKind, 8)
	childKinds := make(chan StreamKind, 8)
	go serveEcho(ctx, parent, parentKinds)
	early, err := parent.OpenStream(ctx, StreamProxy)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := early.Write([]byte("early")); err != nil {
		t.Fatal(err)
	}
	_ = early.CloseWrite()
	child.ServeStreams(echoStreams(childKinds))
	if got, err := io.ReadAll(early); string(got) != "early" || err != nil {
		t.Fatalf("a stream opened before the child served: %q, %v", got, err)
	}
	early.Close()
	if got := <-childKinds; got != StreamProxy {
		t.Fatalf("child served kind %v, want %v", got, StreamProxy)
	}

	data := randomBytes(100 << 10)
	for _, k := range []StreamKind{StreamControl, StreamDownsync, StreamUpsync} {
		echoRoundTrip(t, ctx, child, k, data)
		if got := <-parentKinds; got != k {
			t.Fatalf("parent accepted kind %v, want %v", got, k)
		}
	}
	for _, k := range []StreamKind{StreamProxy, StreamProxy + 1} {
		echoRoundTrip(t, ctx, parent, k, data)
		if got := <-childKinds; got != k {
			t.Fatalf("child accepted kind %v, want %v", got, k)
		}
	}
	if _, err := child.OpenStream(ctx, 0); err != ErrInvalidKind {
		t.Fatalf("kind 0: %v", err)
	}
	in, out := child.Stats()
	if want := uint64(5 * len(data)); in < want || out < want {
		t.Fatalf("child stats in=%d out=%d, want >= %d each", in, out, want)
	}
}

func TestQUICLoopback(t *testing.T) {
	pki := newTestPKI(t)
	ctx := testCtx(t, 20*time.Second)
	l := listenLoopback(t, pki, nil)
	if l.Addr().Network() != "udp" || l.TCPAddr() == nil {
		t.Fatalf("addr %v tcp %v", l.Addr(), l.TCPAddr())
	}
	if l.Addr().(*net.UDPAddr).Port != l.TCPAddr().(*net.TCPAddr).Port {
		t.Fatalf("UDP %v and TCP %v ports differ", l.Addr(), l.TCPAddr())
	}
	d := &Dialer{TLS: pki.client, Mode: ModeQUICOnly, Config: fastConfig()}
	child, err := d.Dial(ctx, []string{l.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	parent := acceptOne(t, ctx, l)
	exerciseLink(t, ctx, child, parent, TransportQUIC)

	if err := child.Close("bye"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-parent.Done():
	case <-ctx.Done():
		t.Fatal("parent did not see the close")
	}
	if _, _, err := parent.AcceptStream(ctx); err == nil {
		t.Fatal("AcceptStream after close succeeded")
	}
}

func TestTCPLoopback(t *testing.T) {
	pki := newTestPKI(t)
	ctx := testCtx(t, 20*time.Second)
	l := listenLoopback(t, pki, nil)
	d := &Dialer{TLS: pki.client, Mode: ModeTCPOnly, IgnoreProxyEnv: true, Config: fastConfig()}
	child, err := d.Dial(ctx, []string{l.TCPAddr().String()})
	if err != nil {
		t.Fatal(err)
	}
	parent := acceptOne(t, ctx, l)
	exerciseLink(t, ctx, child, parent, TransportTCP)
	_ = parent.Close("bye")
	select {
	case <-child.Done():
	case <-ctx.Done():
		t.Fatal("child did not see the close")
	}
}

func TestMutualAuthRequired(t *testing.T) {
	pki := newTestPKI(t)
	other := newTestPKI(t) // a different CA
	ctx := testCtx(t, 20*time.Second)
	l := listenLoopback(t, pki, nil)
	for _, mode := range []Mode{ModeQUICOnly, ModeTCPOnly, ModeAuto} {
		d := &Dialer{TLS: other.client, Mode: mode, IgnoreProxyEnv: true, QUICTimeout: time.Second, Config: fastConfig()}
		start := time.Now()
		if c, err := d.Dial(ctx, []string{l.Addr().String()}); err == nil {
			_ = c.Close("")
			t.Fatalf("%v: dial with a foreign CA succeeded", mode)
		}
		if mode == ModeAuto && d.Worked(l.Addr().String()) != "" {
			t.Fatalf("auto: remembered %q", d.Worked(l.Addr().String()))
		}
		_ = start
	}
}

// With port 0, the port UDP picked may be taken on TCP by someone else:
// Listen tries again with another port rather than failing.
func TestListenRetriesWhenTCPPortTaken(t *testing.T) {
	failures := 2
	listenTCP = func(network, addr string) (net.Listener, error) {
		if failures > 0 {
			failures--
			return nil, &net.OpError{Op: "listen", Net: network, Err: syscall.EADDRINUSE}
		}
		return net.Listen(network, addr)
	}
	t.Cleanup(func() { listenTCP = net.Listen })
	l := listenLoopback(t, newTestPKI(t), nil)
	if failures != 0 {
		t.Fatalf("%d simulated failures left", failures)
	}
	udp, tcp := l.udp.LocalAddr().(*net.UDPAddr).Port, l.tl.Addr().(*net.TCPAddr).Port
	if udp != tcp {
		t.Fatalf("UDP port %d, TCP port %d: want the same", udp, tcp)
	}
}
