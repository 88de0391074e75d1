package consensus

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// The forward protocol carries requests from a follower to the leader over
// a connection opened with protoForward (transport.go). Requests are
// pipelined: the follower writes requests tagged with an id at any time,
// the leader serves each on its own goroutine and answers in any order.
//
//	request:  id u64 | kind u8 | timeout-ms u32 | len u32 | payload
//	response: id u64 | status u8 | index u64 | len u32 | message
//
// All integers are big endian. Request ids on a connection increase in the
// order requests are written. A leader that closes sends, before closing,
// a response with statusGoAway whose id is the last request it took on:
// the follower knows the requests after it were never read and may send
// them again elsewhere. The connection has no other state, so a follower
// keeps one per leader address and drops it on the first error.
const (
	kindPropose   byte = 1 // payload: the command; answer: its log index
	kindReadIndex byte = 2 // no payload; answer: the read index
	kindDeliver   byte = 3 // payload: a message for Config.Deliver; never logged
)

// Response statuses. Every status but statusUnknown means the command was
// applied (statusOK) or certainly not appended to the log.
const (
	statusOK        byte = 0
	statusNotLeader byte = 1 // not appended: the receiver is not the leader
	statusNotQueued byte = 2 // not appended: raft's queue stayed full
	statusUnknown   byte = 3 // appended or not: leadership lost, shutdown, timeout
	statusFailed    byte = 4 // not appended: invalid request
	// statusGoAway (id = last request taken) announces the close of the
	// connection; requests after id were not read.
	statusGoAway byte = 5
)

const (
	reqHeaderLen  = 8 + 1 + 4 + 4
	respHeaderLen = 8 + 1 + 8 + 4
	// maxForwardPayload bounds a forwarded command (and a message).
	maxForwardPayload = 64 << 20
	// forwardDialTimeout bounds connecting to the leader.
	forwardDialTimeout = 5 * time.Second
	// forwardWriteTimeout bounds writing one request or response.
	forwardWriteTimeout = 10 * time.Second
)

// errNotSent reports a forward that failed before the request was written:
// the leader never saw it, so it is safe to try again.
type errNotSent struct{ err error }

func (e errNotSent) Error() string { return "consensus: forwarding: " + e.err.Error() }
func (e errNotSent) Unwrap() error { return e.err }

// errConnLost reports that the forwarding connection broke after the request
// was written: its outcome is unknown.
var errConnLost = errors.New("connection to the leader lost")

type forwardResponse struct {
	status byte
	index  uint64
	msg    string
}

// forwardClient keeps one pipelined connection per leader address.
type forwardClient struct {
	dial func(addr string, timeout time.Duration) (net.Conn, error)

	mu     sync.Mutex
	conns  map[string]*forwardConn
	closed bool
}

func newForwardClient(dial func(string, time.Duration) (net.Conn, error)) *forwardClient {
	return &forwardClient{dial: dial, conns: map[string]*forwardConn{}}
}

type forwardConn struct {
	c   net.Conn
	wmu sync.Mutex // serializes writes and orders ids

	mu       sync.Mutex
	nextID   uint64 // guarded by wmu and mu
	pending  map[uint64]chan forwardResponse
	draining bool          // the leader announced its close
	dead     chan struct{} // closed when the reader stops
	err      error         // why, once dead is closed
}

var errLeaderClosing = errors.New("the leader is closing")

// call sends one request to addr and waits for its answer. An error of type
// errNotSent means the leader never received the request; any other error
// means it may have (for a proposal: the outcome is unknown).
func (fc *forwardClient) call(ctx context.Context, addr string, kind byte, payload []byte) (forwardResponse, error) {
	conn, err := fc.conn(ctx, addr)
	if err != nil {
		return forwardResponse{}, errNotSent{err}
	}
	var timeoutMS uint32
	if deadline, ok := ctx.Deadline(); ok {
		timeoutMS = uint32(min(max(time.Until(deadline).Milliseconds(), 1), 1<<31))
	}
	buf := make([]byte, reqHeaderLen+len(payload))
	buf[8] = kind
	binary.BigEndian.PutUint32(buf[9:], timeoutMS)
	binary.BigEndian.PutUint32(buf[13:], uint32(len(payload)))
	copy(buf[reqHeaderLen:], payload)

	// The id is taken and the request written under wmu, so ids reach
	// the leader in increasing order (statusGoAway relies on it).
	ch := make(chan forwardResponse, 1)
	conn.wmu.Lock()
	conn.mu.Lock()
	if conn.pending == nil || conn.draining {
		// Known dead or closing before anything was written.
		cause := conn.err
		if cause == nil {
			cause = errLeaderClosing
		}
		conn.mu.Unlock()
		conn.wmu.Unlock()
		return forwardResponse{}, errNotSent{cause}
	}
	conn.nextID++
	id := conn.nextID
	conn.pending[id] = ch
	conn.mu.Unlock()
	binary.BigEndian.PutUint64(buf[0:], id)
	_ = conn.c.SetWriteDeadline(time.Now().Add(forwardWriteTimeout))
	_, err = conn.c.Write(buf)
	conn.wmu.Unlock()
	defer func() {
		conn.mu.Lock()
		if conn.pending != nil {
			delete(conn.pending, id)
		}
		conn.mu.Unlock()
	}()
	if err != nil {
		// Part of the request may have gone out: unknown, unless the
		// leader's goaway, perhaps still unread, says it was not taken
		// on. Let the reader drain for a moment, then give up.
		fc.forget(addr, conn)
		_ = conn.c.SetReadDeadline(time.Now().Add(time.Second))
	}
	var r forwardResponse
	select {
	case r = <-ch:
	case <-conn.dead:
		select {
		case r = <-ch:
		default:
			return forwardResponse{}, fmt.Errorf("%w: %w", errConnLost, conn.err)
		}
	case <-ctx.Done():
		return forwardResponse{}, ctx.Err()
	}
	if r.status == statusGoAway {
		return forwardResponse{}, errNotSent{errLeaderClosing}
	}
	return r, nil
}

// conn returns the live connection to addr, dialing one if needed.
func (fc *forwardClient) conn(ctx context.Context, addr string) (*forwardConn, error) {
	fc.mu.Lock()
	if fc.closed {
		fc.mu.Unlock()
		return nil, ErrClosed
	}
	if c := fc.conns[addr]; c != nil {
		fc.mu.Unlock()
		return c, nil
	}
	fc.mu.Unlock()

	timeout := forwardDialTimeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(deadline))
	}
	if timeout <= 0 {
		return nil, context.DeadlineExceeded
	}
	c, err := fc.dial(addr, timeout)
	if err != nil {
		return nil, err
	}
	conn := &forwardConn{c: c, pending: map[uint64]chan forwardResponse{}, dead: make(chan struct{})}

	fc.mu.Lock()
	if fc.closed {
		fc.mu.Unlock()
		_ = c.Close()
		return nil, ErrClosed
	}
	if other := fc.conns[addr]; other != nil {
		// Another caller dialed meanwhile: use its connection.
		fc.mu.Unlock()
		_ = c.Close()
		return other, nil
	}
	fc.conns[addr] = conn
	fc.mu.Unlock()
	go fc.readLoop(addr, conn)
	return conn, nil
}

// readLoop delivers responses until the connection fails, then fails every
// pending call.
func (fc *forwardClient) readLoop(addr string, conn *forwardConn) {
	r := bufio.NewReader(conn.c)
	var hdr [respHeaderLen]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			fc.drop(addr, conn, err)
			return
		}
		n := binary.BigEndian.Uint32(hdr[17:])
		if n > maxForwardPayload {
			fc.drop(addr, conn, fmt.Errorf("response of %d bytes", n))
			return
		}
		msg := make([]byte, n)
		if _, err := io.ReadFull(r, msg); err != nil {
			fc.drop(addr, conn, err)
			return
		}
		id := binary.BigEndian.Uint64(hdr[0:])
		if hdr[8] == statusGoAway {
			fc.forget(addr, conn)
			conn.mu.Lock()
			conn.draining = true
			for pid, ch := range conn.pending {
				if pid > id {
					delete(conn.pending, pid)
					ch <- forwardResponse{status: statusGoAway}
				}
			}
			conn.mu.Unlock()
			continue
		}
		conn.mu.Lock()
		ch := conn.pending[id]
		delete(conn.pending, id)
		conn.mu.Unlock()
		if ch != nil {
			ch <- forwardResponse{status: hdr[8], index: binary.BigEndian.Uint64(hdr[9:]), msg: string(msg)}
		}
	}
}

// forget stops handing out conn for new calls.
func (fc *forwardClient) forget(addr string, conn *forwardConn) {
	fc.mu.Lock()
	if fc.conns[addr] == conn {
		delete(fc.conns, addr)
	}
	fc.mu.Unlock()
}

// drop closes conn and forgets it; calls waiting on it fail.
func (fc *forwardClient) drop(addr string, conn *forwardConn, cause error) {
	fc.forget(addr, conn)
	conn.mu.Lock()
	if conn.pending != nil {
		conn.pending = nil
		conn.err = cause
		close(conn.dead)
	}
	conn.mu.Unlock()
	_ = conn.c.Close()
}

// close closes every connection; later calls fail with ErrClosed.
func (fc *forwardClient) close() {
	fc.mu.Lock()
	fc.closed = true
	conns := fc.conns
	fc.conns = map[string]*forwardConn{}
	fc.mu.Unlock()
	for addr, c := range conns {
		fc.drop(addr, c, ErrClosed)
	}
}

// forwardHandler answers one request on the leader.
type forwardHandler func(ctx context.Context, kind byte, payload []byte) forwardResponse

// forwardServer serves forwarding connections until closed.
type forwardServer struct {
	handle forwardHandler
	ctx    context.Context // cancelled when the node closes

	mu     sync.Mutex
	conns  map[*serverConn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// serverConn is one forwarding connection on the leader side.
type serverConn struct {
	c   net.Conn
	wmu sync.Mutex // serializes writes

	mu       sync.Mutex
	closing  bool   // no request is taken on once set
	last     uint64 // id of the last request taken on
	handlers sync.WaitGroup
}

func newForwardServer(ctx context.Context, h forwardHandler) *forwardServer {
	return &forwardServer{handle: h, ctx: ctx, conns: map[*serverConn]struct{}{}}
}

// write sends one response frame; a failure closes the connection (and so
// ends its reader).
func (sc *serverConn) write(id uint64, status byte, index uint64, msg string) {
	buf := make([]byte, respHeaderLen+len(msg))
	binary.BigEndian.PutUint64(buf[0:], id)
	buf[8] = status
	binary.BigEndian.PutUint64(buf[9:], index)
	binary.BigEndian.PutUint32(buf[17:], uint32(len(msg)))
	copy(buf[respHeaderLen:], msg)
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	_ = sc.c.SetWriteDeadline(time.Now().Add(forwardWriteTimeout))
	if _, err := sc.c.Write(buf); err != nil {
		_ = sc.c.Close()
	}
}

// serve reads requests from c and answers each on its own goroutine. It
// returns when c fails or the server is closed.
func (s *forwardServer) serve(c net.Conn) {
	sc := &serverConn{c: c}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		sc.write(0, statusGoAway, 0, "") // nothing taken on
		_ = c.Close()
		return
	}
	s.conns[sc] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, sc)
		s.mu.Unlock()
		sc.handlers.Wait()
		_ = c.Close()
	}()

	r := bufio.NewReader(c)
	var hdr [reqHeaderLen]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[13:])
		if n > maxForwardPayload {
			return
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			return
		}
		id, kind := binary.BigEndian.Uint64(hdr[0:]), hdr[8]
		timeout := time.Duration(binary.BigEndian.Uint32(hdr[9:])) * time.Millisecond
		sc.mu.Lock()
		if sc.closing {
			// After the goaway: the follower sends it elsewhere.
			sc.mu.Unlock()
			continue
		}
		sc.last = id
		sc.handlers.Add(1)
		sc.mu.Unlock()
		go func() {
			defer sc.handlers.Done()
			ctx, cancel := s.ctx, context.CancelFunc(func() {})
			if timeout > 0 {
				ctx, cancel = context.WithTimeout(ctx, timeout)
			}
			resp := s.handle(ctx, kind, payload)
			cancel()
			sc.write(id, resp.status, resp.index, resp.msg)
		}()
	}
}

// close stops taking requests on: every connection gets a goaway naming
// the last request taken on, then is closed once those are answered
// (handlers end quickly: the node's context is cancelled first).
func (s *forwardServer) close() {
	s.mu.Lock()
	s.closed = true
	conns := make([]*serverConn, 0, len(s.conns))
	for sc := range s.conns {
		conns = append(conns, sc)
	}
	s.mu.Unlock()
	for _, sc := range conns {
		sc.mu.Lock()
		sc.closing = true
		last := sc.last
		sc.mu.Unlock()
		sc.write(last, statusGoAway, 0, "")
	}
	for _, sc := range conns {
		sc.handlers.Wait()
		_ = sc.c.Close()
	}
	s.wg.Wait()
}
