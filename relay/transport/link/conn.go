package link

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/yamux"
	"github.com/quic-go/quic-go"
)

// counters are the byte counters of one connection, shared by its streams.
type counters struct {
	in, out atomic.Uint64
}

func (c *counters) stats() (uint64, uint64) { return c.in.Load(), c.out.Load() }

type accepted struct {
	s    Stream
	kind StreamKind
}

// streamQueue turns raw incoming streams into typed ones: each new stream's
// kind byte is read in its own goroutine, so one silent stream never holds up
// the others. It queues them for accept or, once serve is set
// (Conn.ServeStreams), passes each to serve in that goroutine.
type streamQueue struct {
	ch      chan accepted
	done    <-chan struct{}
	timeout time.Duration

	serveOnce sync.Once
	serve     func(Stream, StreamKind) // set before serving is closed
	serving   chan struct{}
}

func newStreamQueue(done <-chan struct{}, timeout time.Duration) streamQueue {
	return streamQueue{ch: make(chan accepted), done: done, timeout: timeout, serving: make(chan struct{})}
}

// serveWith makes the queue pass every stream, those waiting included, to
// serve; the first call decides.
func (q *streamQueue) serveWith(serve func(Stream, StreamKind)) {
	q.serveOnce.Do(func() {
		q.serve = serve
		close(q.serving)
	})
}

// headerStream is what the queue needs of a raw stream.
type headerStream interface {
	io.Reader
	SetReadDeadline(time.Time) error
}

func (q *streamQueue) admit(raw headerStream, wrap func() Stream, reject func()) {
	var b [1]byte
	_ = raw.SetReadDeadline(time.Now().Add(q.timeout))
	if _, err := io.ReadFull(raw, b[:]); err != nil || b[0] == 0 {
		reject()
		return
	}
	_ = raw.SetReadDeadline(time.Time{})
	a := accepted{s: wrap(), kind: StreamKind(b[0])}
	select {
	case <-q.serving:
		q.serve(a.s, a.kind)
		return
	default:
	}
	select {
	case q.ch <- a:
	case <-q.serving:
		q.serve(a.s, a.kind)
	case <-q.done:
		reject()
	}
}

func (q *streamQueue) accept(ctx context.Context, cause func() error) (Stream, StreamKind, error) {
	select {
	case a := <-q.ch:
		return a.s, a.kind, nil
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	case <-q.done:
		// A stream may have been queued just before the close.
		select {
		case a := <-q.ch:
			return a.s, a.kind, nil
		default:
		}
		return nil, 0, closedErr(cause())
	}
}

func closedErr(cause error) error {
	if cause == nil {
		return ErrConnClosed
	}
	return fmt.Errorf("%w: %w", ErrConnClosed, cause)
}

// ---- QUIC ----

// AfterClose arranges for f to run, in a goroutine of its own, once c is
// gone; stop cancels that if f has not started. For a QUIC connection it
// adds no goroutine while the connection lives (context.AfterFunc on its
// context): a relay with thousands of links waits on none for this.
func AfterClose(c Conn, f func()) (stop func() bool) {
	if qc, ok := c.(*quicConn); ok {
		return context.AfterFunc(qc.qc.Context(), f)
	}
	cancel := make(chan struct{})
	var once sync.Once
	go func() {
		select {
		case <-c.Done():
			once.Do(f)
		case <-cancel:
		}
	}()
	return func() bool {
		stopped := false
		once.Do(func() { stopped = true })
		if stopped {
			close(cancel)
		}
		return stopped
	}
}

// quicConn is a Conn over a quic-go connection. Its accept loop starts
// with the first AcceptStream: a side that never accepts streams (a
// child's uplink) runs no goroutine for it, and streams the peer opens
// wait in quic-go's queue, within the stream limit, until accepted.
type quicConn struct {
	qc        *quic.Conn
	cnt       counters
	q         streamQueue
	accepting sync.Once
}

const (
	codeNoError  quic.ApplicationErrorCode = 0
	codeBadKind  quic.StreamErrorCode      = 1
	codeCanceled quic.StreamErrorCode      = 2
)

// newQUICConn wraps qc; onClose, when set, runs once qc is closed (it
// releases a transport owned by this connection).
func newQUICConn(qc *quic.Conn, cfg Config, onClose func()) *quicConn {
	c := &quicConn{
		qc: qc,
		q:  newStreamQueue(qc.Context().Done(), cfg.StreamHeaderTimeout),
	}
	if onClose != nil {
		context.AfterFunc(qc.Context(), onClose)
	}
	return c
}

// probeSize is the payload of a dialed link's probe datagram: whatever the
// lengths of connection ID (1–20 bytes) and packet number, its packet is
// larger than the 42 bytes up to which quic-go sends no stateless reset
// (protocol.MinStatelessResetSize). quic-go's keep-alive PING packets are
// 25–29 bytes.
const probeSize = 24

var probePayload = make([]byte, probeSize)

// probe makes a dialed link send a DATAGRAM every keep-alive period while
// it lives. A parent started again on the same address with the same
// identity answers it with a stateless reset (ListenConfig.StatelessResetKey),
// which ends the link at once instead of after the idle timeout; a live
// parent acknowledges it, which spares both sides their keep-alive PINGs.
// It runs no goroutine between probes. A peer without datagram support is
// not probed.
func (c *quicConn) probe(cfg Config) {
	if !c.qc.ConnectionState().SupportsDatagrams.Remote {
		return
	}
	// A little under quic-go's keep-alive interval: the probe and its
	// acknowledgement reach each side before its keep-alive PING is due.
	period := min(cfg.KeepAlivePeriod, cfg.MaxIdleTimeout/2) * 9 / 10
	ctx := c.qc.Context()
	var t *time.Timer
	t = time.AfterFunc(period, func() {
		if ctx.Err() != nil {
			return
		}
		if err := c.qc.SendDatagram(probePayload); err != nil {
			return // the link is gone, or its path cannot carry even this
		}
		t.Reset(period)
	})
	context.AfterFunc(ctx, func() { t.Stop() })
}

// drainDatagrams discards the probes of the peer (an accepted link), which
// quic-go would otherwise queue, up to 128 per link. It runs no goroutine
// between drains: a timer empties the queue every drainProbes probe
// periods (of this side's configuration, which a fleet shares).
func (c *quicConn) drainDatagrams(cfg Config) {
	period := min(cfg.KeepAlivePeriod, cfg.MaxIdleTimeout/2) * 9 / 10 * drainProbes
	ctx := c.qc.Context()
	var t *time.Timer
	t = time.AfterFunc(period, func() {
		// Receive waits for a datagram once the queue is empty: a short
		// deadline ends that wait.
		rctx, cancel := context.WithTimeout(ctx, time.Millisecond)
		defer cancel()
		for {
			if _, err := c.qc.ReceiveDatagram(rctx); err != nil {
				break
			}
		}
		if ctx.Err() == nil {
			t.Reset(period)
		}
	})
	context.AfterFunc(ctx, func() { t.Stop() })
}

// drainProbes is how many probe periods an accepted link lets its peer's
// probes queue before it discards them.
const drainProbes = 16

func (c *quicConn) acceptLoop() {
	ctx := c.qc.Context()
	for {
		s, err := c.qc.AcceptStream(ctx)
		if err != nil {
			return
		}
		go c.q.admit(s,
			func() Stream { return &quicStream{s: s, cnt: &c.cnt} },
			func() { s.CancelRead(codeBadKind); s.CancelWrite(codeBadKind) })
	}
}

func (c *quicConn) OpenStream(ctx context.Context, kind StreamKind) (Stream, error) {
	if kind == 0 {
		return nil, ErrInvalidKind
	}
	s, err := c.qc.OpenStreamSync(ctx)
	if err != nil {
		if c.qc.Context().Err() != nil {
			return nil, closedErr(context.Cause(c.qc.Context()))
		}
		return nil, err
	}
	if _, err := s.Write([]byte{byte(kind)}); err != nil {
		s.CancelRead(codeCanceled)
		s.CancelWrite(codeCanceled)
		return nil, err
	}
	return &quicStream{s: s, cnt: &c.cnt}, nil
}

func (c *quicConn) AcceptStream(ctx context.Context) (Stream, StreamKind, error) {
	c.accepting.Do(func() { go c.acceptLoop() })
	return c.q.accept(ctx, func() error { return context.Cause(c.qc.Context()) })
}

func (c *quicConn) ServeStreams(serve func(Stream, StreamKind)) {
	c.q.serveWith(serve)
	c.accepting.Do(func() { go c.acceptLoop() })
}

func (c *quicConn) ConnectionState() tls.ConnectionState { return c.qc.ConnectionState().TLS }
func (c *quicConn) Transport() string                    { return TransportQUIC }
func (c *quicConn) LocalAddr() net.Addr                  { return c.qc.LocalAddr() }
func (c *quicConn) RemoteAddr() net.Addr                 { return c.qc.RemoteAddr() }
func (c *quicConn) Stats() (uint64, uint64)              { return c.cnt.stats() }
func (c *quicConn) Done() <-chan struct{}                { return c.qc.Context().Done() }

func (c *quicConn) Close(reason string) error {
	return c.qc.CloseWithError(codeNoError, reason)
}

// quicStream counts bytes and gives Close its full-close meaning (quic-go's
// Close only ends the send direction).
type quicStream struct {
	s   *quic.Stream
	cnt *counters
}

func (s *quicStream) Read(p []byte) (int, error) {
	n, err := s.s.Read(p)
	s.cnt.in.Add(uint64(n))
	return n, err
}

func (s *quicStream) Write(p []byte) (int, error) {
	n, err := s.s.Write(p)
	s.cnt.out.Add(uint64(n))
	return n, err
}

func (s *quicStream) CloseWrite() error { return s.s.Close() }

func (s *quicStream) Close() error {
	s.s.CancelRead(codeCanceled)
	return s.s.Close()
}

func (s *quicStream) Abort() {
	s.s.CancelWrite(codeCanceled)
	s.s.CancelRead(codeCanceled)
}

func (s *quicStream) SetDeadline(t time.Time) error      { return s.s.SetDeadline(t) }
func (s *quicStream) SetReadDeadline(t time.Time) error  { return s.s.SetReadDeadline(t) }
func (s *quicStream) SetWriteDeadline(t time.Time) error { return s.s.SetWriteDeadline(t) }

// ---- TCP (TLS + yamux) ----

// tcpConn is a Conn over TLS 1.3 on TCP, multiplexed by yamux.
type tcpConn struct {
	sess *yamux.Session
	cs   tls.ConnectionState
	cnt  counters
	q    streamQueue
}

func yamuxConfig(cfg Config) *yamux.Config {
	yc := yamux.DefaultConfig()
	yc.AcceptBacklog = int(min(cfg.MaxIncomingStreams, 1<<16))
	yc.EnableKeepAlive = true
	yc.KeepAliveInterval = cfg.KeepAlivePeriod
	yc.ConnectionWriteTimeout = cfg.MaxIdleTimeout
	yc.MaxStreamWindowSize = 1 << 20
	yc.StreamOpenTimeout = cfg.MaxIdleTimeout
	yc.StreamCloseTimeout = time.Minute
	yc.LogOutput = io.Discard
	return yc
}

func newTCPConn(tc *tls.Conn, cfg Config, server bool) (*tcpConn, error) {
	var (
		sess *yamux.Session
		err  error
	)
	if server {
		sess, err = yamux.Server(tc, yamuxConfig(cfg))
	} else {
		sess, err = yamux.Client(tc, yamuxConfig(cfg))
	}
	if err != nil {
		return nil, err
	}
	c := &tcpConn{
		sess: sess,
		cs:   tc.ConnectionState(),
		q:    newStreamQueue(sess.CloseChan(), cfg.StreamHeaderTimeout),
	}
	go c.acceptLoop()
	return c, nil
}

func (c *tcpConn) acceptLoop() {
	for {
		s, err := c.sess.AcceptStream()
		if err != nil {
			return
		}
		go c.q.admit(s,
			func() Stream { return &tcpStream{s: s, cnt: &c.cnt} },
			func() { _ = s.Close() })
	}
}

func (c *tcpConn) OpenStream(ctx context.Context, kind StreamKind) (Stream, error) {
	if kind == 0 {
		return nil, ErrInvalidKind
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	type result struct {
		s   *yamux.Stream
		err error
	}
	ch := make(chan result, 1)
	go func() {
		s, err := c.sess.OpenStream()
		if err == nil {
			_, err = s.Write([]byte{byte(kind)})
		}
		ch <- result{s, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			if r.s != nil {
				_ = r.s.Close()
			}
			if c.sess.IsClosed() {
				return nil, closedErr(r.err)
			}
			return nil, r.err
		}
		return &tcpStream{s: r.s, cnt: &c.cnt}, nil
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.s != nil {
				_ = r.s.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

func (c *tcpConn) AcceptStream(ctx context.Context) (Stream, StreamKind, error) {
	return c.q.accept(ctx, func() error { return nil })
}

func (c *tcpConn) ServeStreams(serve func(Stream, StreamKind)) { c.q.serveWith(serve) }

func (c *tcpConn) ConnectionState() tls.ConnectionState { return c.cs }
func (c *tcpConn) Transport() string                    { return TransportTCP }
func (c *tcpConn) LocalAddr() net.Addr                  { return c.sess.LocalAddr() }
func (c *tcpConn) RemoteAddr() net.Addr                 { return c.sess.RemoteAddr() }
func (c *tcpConn) Stats() (uint64, uint64)              { return c.cnt.stats() }
func (c *tcpConn) Done() <-chan struct{}                { return c.sess.CloseChan() }

// Close closes the session; yamux has no way to carry reason to the peer.
func (c *tcpConn) Close(reason string) error { return c.sess.Close() }

// tcpStream counts bytes and separates CloseWrite (yamux's Close, a FIN) from
// Close (FIN, and local reads end).
type tcpStream struct {
	s      *yamux.Stream
	cnt    *counters
	fin    sync.Once
	finErr error
	closed atomic.Bool
}

func (s *tcpStream) Read(p []byte) (int, error) {
	if s.closed.Load() {
		return 0, net.ErrClosed
	}
	n, err := s.s.Read(p)
	s.cnt.in.Add(uint64(n))
	return n, err
}

func (s *tcpStream) Write(p []byte) (int, error) {
	n, err := s.s.Write(p)
	s.cnt.out.Add(uint64(n))
	return n, err
}

func (s *tcpStream) CloseWrite() error {
	s.fin.Do(func() { s.finErr = s.s.Close() })
	return s.finErr
}

func (s *tcpStream) Close() error {
	s.closed.Store(true)
	return s.CloseWrite()
}

// Abort closes the stream: yamux streams are safe for concurrent use, and
// a yamux Close unblocks a Write waiting for the peer's window.
func (s *tcpStream) Abort() { _ = s.Close() }

func (s *tcpStream) SetDeadline(t time.Time) error      { return s.s.SetDeadline(t) }
func (s *tcpStream) SetReadDeadline(t time.Time) error  { return s.s.SetReadDeadline(t) }
func (s *tcpStream) SetWriteDeadline(t time.Time) error { return s.s.SetWriteDeadline(t) }
