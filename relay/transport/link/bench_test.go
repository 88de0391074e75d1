package link

import (
	"context"
	"io"
	"testing"
	"time"
)

func benchPair(b *testing.B, transport string) (l *Listener, d *Dialer) {
	pki := newTestPKI(b)
	l = listenLoopback(b, pki, nil)
	mode := ModeQUICOnly
	if transport == TransportTCP {
		mode = ModeTCPOnly
	}
	d = &Dialer{TLS: pki.client, Mode: mode, IgnoreProxyEnv: true}
	return l, d
}

// BenchmarkStreamThroughput sends 64 KiB writes on one stream, child to
// parent, over loopback.
func BenchmarkStreamThroughput(b *testing.B) {
	for _, tr := range []string{TransportQUIC, TransportTCP} {
		b.Run(tr, func(b *testing.B) {
			ctx := context.Background()
			l, d := benchPair(b, tr)
			addr := l.Addr().String()
			if tr == TransportTCP {
				addr = l.TCPAddr().String()
			}
			c, err := d.Dial(ctx, []string{addr})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close("")
			p, err := l.Accept(ctx)
			if err != nil {
				b.Fatal(err)
			}
			got := make(chan int64, 1)
			go func() {
				s, _, err := p.AcceptStream(ctx)
				if err != nil {
					got <- -1
					return
				}
				n, _ := io.Copy(io.Discard, s)
				got <- n
			}()
			s, err := c.OpenStream(ctx, StreamDownsync)
			if err != nil {
				b.Fatal(err)
			}
			buf := randomBytes(64 << 10)
			b.SetBytes(int64(len(buf)))
			b.ResetTimer()
			for b.Loop() {
				if _, err := s.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			_ = s.CloseWrite()
			if n := <-got; n != int64(b.N)*int64(len(buf)) {
				b.Fatalf("received %d", n)
			}
		})
	}
}

// BenchmarkHandshake dials and closes links over loopback (mutual TLS).
func BenchmarkHandshake(b *testing.B) {
	for _, tr := range []string{TransportQUIC, TransportTCP} {
		b.Run(tr, func(b *testing.B) {
			ctx := context.Background()
			l, d := benchPair(b, tr)
			addr := l.Addr().String()
			if tr == TransportTCP {
				addr = l.TCPAddr().String()
			}
			go func() {
				for {
					p, err := l.Accept(ctx)
					if err != nil {
						return
					}
					go func() { <-p.Done() }()
				}
			}()
			start := time.Now()
			for b.Loop() {
				c, err := d.Dial(ctx, []string{addr})
				if err != nil {
					b.Fatal(err)
				}
				_ = c.Close("")
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "handshakes/s")
		})
	}
}
