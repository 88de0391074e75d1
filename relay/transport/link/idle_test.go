package link

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/test/poll"
)

// A stream the parent opens before the child ever accepts waits for the
// child's first AcceptStream (whose accept loop starts then).
func TestAcceptAfterPeerOpened(t *testing.T) {
	pki := newTestPKI(t)
	ctx := testCtx(t, 20*time.Second)
	l := listenLoopback(t, pki, nil)
	d := &Dialer{TLS: pki.client, Mode: ModeQUICOnly, Config: fastConfig()}
	child, err := d.Dial(ctx, []string{l.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	parent := acceptOne(t, ctx, l)
	s, err := parent.OpenStream(ctx, StreamProxy)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the stream reaches the child before it accepts
	cs, kind, err := child.AcceptStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if kind != StreamProxy {
		t.Fatalf("kind %v, want %v", kind, StreamProxy)
	}
	buf := make([]byte, 5)
	if _, err := cs.Read(buf); err != nil || string(buf) != "hello" {
		t.Fatalf("read %q, %v", buf, err)
	}
}

// AfterClose runs its function when the link goes, unless stopped first, over
// both transports.
func TestAfterClose(t *testing.T) {
	pki := newTestPKI(t)
	for _, tc := range []struct {
		name string
		mode Mode
		addr func(*Listener) string
	}{
		{"quic", ModeQUICOnly, func(l *Listener) string { return l.Addr().String() }},
		{"tcp", ModeTCPOnly, func(l *Listener) string { return l.TCPAddr().String() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t, 20*time.Second)
			l := listenLoopback(t, pki, nil)
			d := &Dialer{TLS: pki.client, Mode: tc.mode, IgnoreProxyEnv: true, Config: fastConfig()}
			child, err := d.Dial(ctx, []string{tc.addr(l)})
			if err != nil {
				t.Fatal(err)
			}
			acceptOne(t, ctx, l)
			var stopped, ran atomic.Int32
			stop := AfterClose(child, func() { stopped.Add(1) })
			if !stop() {
				t.Fatal("stop before the close did not stop")
			}
			done := make(chan struct{})
			AfterClose(child, func() { ran.Add(1); close(done) })
			_ = child.Close("bye")
			select {
			case <-done:
			case <-ctx.Done():
				t.Fatal("AfterClose did not run after the close")
			}
			poll.Holds(t, "only the function not stopped runs, once", 20*time.Millisecond, func() error {
				if stopped.Load() != 0 || ran.Load() != 1 {
					return fmt.Errorf("stopped function ran %d times, the other %d", stopped.Load(), ran.Load())
				}
				return nil
			})
		})
	}
}
