package proxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/canopy-dev/canopy/relay/transport/internal/wire"
	"github.com/canopy-dev/canopy/relay/transport/link"
)

// maxChunk bounds one ProxyData frame.
const maxChunk = 32 << 10

// Conn is one end of a proxy stream once it is open: a net.Conn whose
// bytes travel as ProxyData within the other end's credit. A goroutine
// reads the link's stream as soon as bytes arrive, into at most
// wire.ProxyWindow bytes that Read has not taken yet; Read grants the
// other end credit as it takes them. CloseWrite half-closes (ProxyClose).
//
// Deadlines work as net.Conn's: an expired one fails Read or Write with
// os.ErrDeadlineExceeded, and setting one in the past wakes a blocked call.
type Conn struct {
	st  link.Stream
	req Request

	// wmu serializes frames on st.
	wmu sync.Mutex
	w   *wire.Writer

	mu sync.Mutex
	// changed is closed, and replaced, whenever anything below changes.
	changed chan struct{}
	// in holds bytes received and not read; taken counts bytes read since
	// the last credit granted.
	in    []byte
	taken int
	// credit is how many bytes this end may still send.
	credit int
	// awaitReady: the opener's first frame from the other end must be
	// ProxyReady, or an Error.
	awaitReady bool
	// inEOF: the other end sent ProxyClose; outEOF: this end did.
	inEOF, outEOF bool
	// err ends both directions: the stream failed, the other end refused
	// (*Error), or Close was called (net.ErrClosed).
	err             error
	readDL, writeDL time.Time
	// closing: Close was called; readDone: the other end's direction
	// ended; linger aborts the stream if it does not after Close.
	closing, readDone, released bool
	linger                      *time.Timer
	closeOnce                   sync.Once
}

func newConn(st link.Stream, req Request, opener bool) *Conn {
	return &Conn{st: st, req: req, w: wire.NewWriter(st, nil), changed: make(chan struct{}),
		credit: wire.ProxyWindow, awaitReady: opener}
}

// Request is the request the stream was opened with.
func (c *Conn) Request() Request { return c.req }

// send writes one frame.
func (c *Conn) send(m wire.Message) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.w.Write(m); err != nil {
		return err
	}
	return c.w.Flush()
}

// notifyLocked wakes every waiter; c.mu must be held.
func (c *Conn) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *Conn) failLocked(err error) {
	if c.err == nil {
		c.err = err
	}
	c.notifyLocked()
}

// readLoop reads the other end's frames until the stream ends; then,
// once Close was called too, it releases the stream.
func (c *Conn) readLoop(r *wire.Reader) {
	defer func() {
		c.mu.Lock()
		c.readDone = true
		release := c.closing
		c.mu.Unlock()
		if release {
			c.release()
		}
	}()
	for {
		m, err := r.Read()
		c.mu.Lock()
		if err != nil {
			if c.inEOF && errors.Is(err, io.EOF) {
				err = nil
			} else if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			if err != nil {
				c.failLocked(fmt.Errorf("proxy: stream %s: %w", c.req.ID, err))
			}
			c.notifyLocked()
			c.mu.Unlock()
			return
		}
		grant, err := c.receiveLocked(m)
		if err != nil {
			c.failLocked(err)
			c.mu.Unlock()
			c.st.Abort()
			return
		}
		c.notifyLocked()
		release := c.closing && c.inEOF
		c.mu.Unlock()
		if grant > 0 {
			_ = c.send(&wire.ProxyCredit{Bytes: uint64(grant)})
		}
		if release {
			c.release()
		}
	}
}

// receiveLocked takes one frame of the other end. After Close, data is
// dropped and its credit granted back at once (the grant returned), so
// that the other end finishes what it writes and closes.
func (c *Conn) receiveLocked(m wire.Message) (grant int, err error) {
	if c.awaitReady {
		switch m := m.(type) {
		case *wire.ProxyReady:
			c.awaitReady = false
			return 0, nil
		case *wire.Error:
			return 0, fromWire(m)
		}
		return 0, fmt.Errorf("proxy: %s before ProxyReady", m.Type())
	}
	switch m := m.(type) {
	case *wire.ProxyData:
		switch {
		case c.inEOF:
			return 0, errors.New("proxy: ProxyData after ProxyClose")
		case len(c.in)+len(m.Data) > wire.ProxyWindow:
			return 0, fmt.Errorf("proxy: the other end sent %d bytes beyond its window", len(c.in)+len(m.Data)-wire.ProxyWindow)
		case c.closing:
			return len(m.Data), nil
		}
		c.in = append(c.in, m.Data...)
	case *wire.ProxyCredit:
		if m.Bytes > wire.ProxyWindow {
			return 0, fmt.Errorf("proxy: credit of %d bytes", m.Bytes)
		}
		c.credit += int(m.Bytes)
	case *wire.ProxyClose:
		c.inEOF = true
	case *wire.Error:
		return 0, fromWire(m)
	default:
		return 0, fmt.Errorf("proxy: unexpected %s", m.Type())
	}
	return 0, nil
}

// wait blocks until ready (called with c.mu held, returns with it held)
// holds, or the deadline dl returns passes.
func (c *Conn) wait(ready func() bool, dl func() time.Time) error {
	for !ready() {
		d := dl()
		if !d.IsZero() && !time.Now().Before(d) {
			return os.ErrDeadlineExceeded
		}
		ch := c.changed
		c.mu.Unlock()
		var t *time.Timer
		var timer <-chan time.Time
		if !d.IsZero() {
			t = time.NewTimer(time.Until(d))
			timer = t.C
		}
		select {
		case <-ch:
		case <-timer:
		}
		if t != nil {
			t.Stop()
		}
		c.mu.Lock()
	}
	return nil
}

// Read implements net.Conn.
func (c *Conn) Read(p []byte) (int, error) {
	c.mu.Lock()
	err := c.wait(func() bool { return len(c.in) > 0 || c.inEOF || c.err != nil }, func() time.Time { return c.readDL })
	if err != nil {
		c.mu.Unlock()
		return 0, err
	}
	if len(c.in) == 0 {
		err := c.err
		if err == nil {
			err = io.EOF
		}
		c.mu.Unlock()
		return 0, err
	}
	n := copy(p, c.in)
	c.in = c.in[n:]
	if len(c.in) == 0 {
		c.in = nil // let the buffer go
	}
	c.taken += n
	grant := 0
	if c.taken >= wire.ProxyWindow/4 && c.err == nil {
		grant, c.taken = c.taken, 0
	}
	c.mu.Unlock()
	if grant > 0 {
		if err := c.send(&wire.ProxyCredit{Bytes: uint64(grant)}); err != nil {
			c.fail(err)
		}
	}
	return n, nil
}

// Write implements net.Conn.
func (c *Conn) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		c.mu.Lock()
		err := c.wait(func() bool { return c.credit > 0 || c.err != nil || c.outEOF }, func() time.Time { return c.writeDL })
		if err == nil {
			switch {
			case c.err != nil:
				err = c.err
			case c.outEOF:
				err = net.ErrClosed
			}
		}
		if err != nil {
			c.mu.Unlock()
			return written, err
		}
		n := min(len(p), c.credit, maxChunk)
		c.credit -= n
		c.mu.Unlock()
		if err := c.send(&wire.ProxyData{Data: p[:n]}); err != nil {
			c.fail(err)
			return written, err
		}
		written += n
		p = p[n:]
	}
	return written, nil
}

func (c *Conn) fail(err error) {
	c.mu.Lock()
	c.failLocked(err)
	c.mu.Unlock()
}

// CloseWrite ends this end's direction (ProxyClose); reading goes on.
func (c *Conn) CloseWrite() error {
	c.mu.Lock()
	if c.outEOF || c.err != nil {
		c.mu.Unlock()
		return nil
	}
	c.outEOF = true
	c.notifyLocked()
	c.mu.Unlock()
	return c.send(&wire.ProxyClose{})
}

// closeLinger bounds how long a closed Conn waits for the other end to
// close its direction too before it aborts the stream.
const closeLinger = 10 * time.Second

// Close implements net.Conn. It ends this end's direction (ProxyClose, if
// CloseWrite did not) and fails Read and Write at once. What the other
// end still sends is dropped, its credit granted back, until that end
// closes its direction too: then the stream is released, so that
// neither end is cut off by a reset while the other finishes. An end that
// does not close within closeLinger, or a Close during a Write (a peer
// that stopped reading the link), aborts the stream.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		closeWrite := !c.outEOF && c.err == nil
		c.outEOF, c.closing, c.in = true, true, nil
		c.failLocked(net.ErrClosed)
		done := c.readDone || c.inEOF
		c.mu.Unlock()
		if !c.wmu.TryLock() {
			c.st.Abort()
			return
		}
		if closeWrite && c.w.Write(&wire.ProxyClose{}) == nil {
			_ = c.w.Flush()
		}
		c.wmu.Unlock()
		if done {
			c.release()
			return
		}
		c.mu.Lock()
		if !c.readDone && !c.inEOF { // else readLoop released the stream meanwhile
			c.linger = time.AfterFunc(closeLinger, c.st.Abort)
		}
		c.mu.Unlock()
	})
	return nil
}

// release closes the stream once both directions ended (each end sent
// ProxyClose, or the stream ended), at most once.
func (c *Conn) release() {
	c.mu.Lock()
	if c.linger != nil {
		c.linger.Stop()
	}
	released := c.released
	c.released = true
	c.mu.Unlock()
	if !released {
		c.wmu.Lock() // a credit may be on its way out
		defer c.wmu.Unlock()
		c.st.Close()
	}
}

// LocalAddr and RemoteAddr name the request (no socket is involved).
func (c *Conn) LocalAddr() net.Addr { return addr("canopy-proxy") }
func (c *Conn) RemoteAddr() net.Addr {
	return addr("canopy-proxy/" + c.req.Destination + "/" + c.req.ID)
}

// SetDeadline implements net.Conn.
func (c *Conn) SetDeadline(t time.Time) error { return c.setDeadlines(&t, &t) }

// SetReadDeadline implements net.Conn.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.setDeadlines(&t, nil) }

// SetWriteDeadline implements net.Conn.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.setDeadlines(nil, &t) }

// setDeadlines sets those given and wakes the calls waiting, so that they
// see them.
func (c *Conn) setDeadlines(read, write *time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if read != nil {
		c.readDL = *read
	}
	if write != nil {
		c.writeDL = *write
	}
	c.notifyLocked()
	return nil
}

var _ net.Conn = (*Conn)(nil)
