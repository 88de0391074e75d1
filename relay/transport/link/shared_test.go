package link

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// TestSharedTransport dials 200 links through one quic.Transport (one UDP
// socket) to one listener.
func TestSharedTransport(t *testing.T) {
	const links = 200
	pki := newTestPKI(t)
	ctx := testCtx(t, 25*time.Second)
	l := listenLoopback(t, pki, func(lc *ListenConfig) { lc.DisableTCP = true; lc.Config = Config{} })
	go func() {
		for {
			c, err := l.Accept(ctx)
			if err != nil {
				return
			}
			go serveEcho(ctx, c, nil)
		}
	}()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := &quic.Transport{Conn: pc}
	t.Cleanup(func() { _ = tr.Close(); _ = pc.Close() })
	d := &Dialer{TLS: pki.client, Mode: ModeQUICOnly, Transport: tr, QUICTimeout: 10 * time.Second}

	conns := make([]Conn, links)
	var wg sync.WaitGroup
	errs := make(chan error, links)
	// Fewer dials at once than quic-go's accept queue (32): a server
	// refuses a handshake completed while the queue is full
	// (CONNECTION_REFUSED after the client's Dial returned), which a
	// starved accept loop on a busy machine let happen.
	sem := make(chan struct{}, 16)
	start := time.Now()
	for i := range links {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			c, err := d.Dial(ctx, []string{l.Addr().String()})
			if err != nil {
				errs <- err
				return
			}
			conns[i] = c
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d links over one socket in %v", links, time.Since(start))
	for i, c := range conns {
		if !c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().IsLoopback() || c.LocalAddr().String() != pc.LocalAddr().String() {
			t.Fatalf("link %d local address %v, want the shared %v", i, c.LocalAddr(), pc.LocalAddr())
		}
	}
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			echoRoundTrip(t, ctx, c, StreamControl, []byte("ping"))
		}()
	}
	wg.Wait()
	// Closing one link leaves the others and the socket up.
	_ = conns[0].Close("done")
	echoRoundTrip(t, ctx, conns[1], StreamUpsync, []byte("still here"))
	for _, c := range conns[1:] {
		_ = c.Close("done")
	}
}
