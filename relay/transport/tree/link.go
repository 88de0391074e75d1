package tree

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/internal/wire"
)

// Sentinel errors; test them with errors.Is.
var (
	// ErrBusy: Serve was called while another Serve of the same value runs.
	ErrBusy = errors.New("tree: already serving a stream")
	// ErrProtocol: the peer sent a frame that is not valid on this stream
	// or at this point (wrong type, bad key, ResyncEnd without ResyncBegin).
	ErrProtocol = errors.New("tree: protocol violation")
	// ErrNotAllowed: a Collector refused a report outside what its Allow
	// function accepts.
	ErrNotAllowed = errors.New("tree: report not allowed")
	// ErrRemote: the peer sent an Error frame.
	ErrRemote = errors.New("tree: peer sent an error")
)

// Stats are cumulative counters of a Sender, Receiver, Reporter or
// Collector over all its Serve calls.
type Stats struct {
	BytesSent        uint64
	BytesReceived    uint64
	MessagesSent     uint64
	MessagesReceived uint64
	// Objects counts object frames: Put and Delete (downsync) or Report
	// (upsync) frames sent by a Sender or Reporter, received by a Receiver
	// or Collector.
	Objects uint64
	// Resyncs counts full snapshots (ResyncBegin ... ResyncEnd) sent or
	// received.
	Resyncs uint64
	// AckedRevision is, for a Sender or Reporter, the highest Ack
	// (ReportAck) received; for a Receiver or Collector, the last one sent.
	AckedRevision uint64
	// DirtyKeys (Sender, Reporter) is the number of keys changed but not
	// yet sent: what is held for a slow peer.
	DirtyKeys int
	// LagRevisions (Sender, Reporter) is the newest revision the watch has
	// seen minus AckedRevision: how far the peer's durable state trails.
	LagRevisions uint64
	// LagSeconds (Sender, Reporter) is how long the oldest change the peer
	// has not acknowledged has been waiting; 0 when it is up to date.
	LagSeconds float64
	// BehindSince (Sender, Reporter) is when the oldest change the peer
	// has not acknowledged was sent; zero when it is up to date.
	BehindSince time.Time
}

// counters back Stats.
type counters struct {
	bytesOut, bytesIn, msgsOut, msgsIn, objects, resyncs, acked atomic.Uint64
}

func (c *counters) stats() Stats {
	return Stats{
		BytesSent:        c.bytesOut.Load(),
		BytesReceived:    c.bytesIn.Load(),
		MessagesSent:     c.msgsOut.Load(),
		MessagesReceived: c.msgsIn.Load(),
		Objects:          c.objects.Load(),
		Resyncs:          c.resyncs.Load(),
		AckedRevision:    c.acked.Load(),
	}
}

// storeMax raises a to v if v is larger.
func storeMax(a *atomic.Uint64, v uint64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// link is one stream: framing, counting and closing.
type link struct {
	rw   io.ReadWriter
	w    *wire.Writer
	r    *wire.Reader
	c    *counters
	once sync.Once
}

func newLink(rw io.ReadWriter, cfg *wire.Config, c *counters) *link {
	return &link{
		rw: rw,
		c:  c,
		w:  wire.NewWriter(countWriter{rw, &c.bytesOut}, cfg),
		r:  wire.NewReader(countReader{rw, &c.bytesIn}, cfg),
	}
}

func (l *link) write(m wire.Message) error {
	if err := l.w.Write(m); err != nil {
		return err
	}
	l.c.msgsOut.Add(1)
	switch m.(type) {
	case *wire.Put, *wire.Delete, *wire.Report:
		l.c.objects.Add(1)
	}
	return nil
}

func (l *link) flush() error { return l.w.Flush() }

// readMore reads a frame as read does, and says whether the bytes of the
// next frame were already read with it: the peer wrote them together.
func (l *link) readMore() (wire.Message, bool, error) {
	m, err := l.read()
	return m, err == nil && l.r.Buffered() > 0, err
}

func (l *link) read() (wire.Message, error) {
	m, err := l.r.Read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("tree: stream closed by peer: %w", err)
		}
		return nil, err
	}
	l.c.msgsIn.Add(1)
	return m, nil
}

// closable reports whether close can unblock the stream.
func (l *link) closable() bool { _, ok := l.rw.(io.Closer); return ok }

func (l *link) close() {
	if c, ok := l.rw.(io.Closer); ok {
		l.once.Do(func() { _ = c.Close() })
	}
}

// fail sends an Error frame for err, best effort, before the stream closes.
// A peer that does not read gets failTimeout, then the stream is closed.
func (l *link) fail(code wire.ErrorCode, err error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if l.write(&wire.Error{Code: code, Message: err.Error()}) == nil {
			_ = l.flush()
		}
	}()
	t := time.NewTimer(failTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		l.close()
	}
}

// failTimeout bounds the wait to deliver an Error frame.
const failTimeout = time.Second

// remoteError turns a received Error frame into an error.
func remoteError(m *wire.Error) error {
	return fmt.Errorf("%w: %v: %s", ErrRemote, m.Code, m.Message)
}

type countWriter struct {
	w io.Writer
	n *atomic.Uint64
}

func (c countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(uint64(max(n, 0)))
	return n, err
}

type countReader struct {
	r io.Reader
	n *atomic.Uint64
}

func (c countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(uint64(max(n, 0)))
	return n, err
}

// wireKey is k on the wire: without its space, which the stream implies.
func wireKey(k store.Key) wire.Key {
	return wire.Key{Group: k.Resource.Group, Resource: k.Resource.Resource, Namespace: k.Namespace, Name: k.Name}
}

// storeKey places a wire key in space, or fails if it is not a valid key of
// a stream (a space, or no resource or name).
func storeKey(space string, k wire.Key) (store.Key, error) {
	if k.Space != "" || k.Resource == "" || k.Name == "" {
		return store.Key{}, fmt.Errorf("%w: bad key %q", ErrProtocol, k.String())
	}
	return store.Key{
		Space:     space,
		Resource:  store.Resource{Group: k.Group, Resource: k.Resource},
		Namespace: k.Namespace,
		Name:      k.Name,
	}, nil
}

func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// Log keys shared with the rest of the relay (STYLE.md).
const (
	logSpace    = "space"
	logRevision = "revision"
	logError    = "error"
)
