package wire

import (
	"bytes"
	"fmt"
	"io"
	"sync"
)

// Buffers. A Writer and a Reader hold a buffer only while they have bytes
// in it: a Writer from its first Write to the Flush that sends them, a
// Reader while a frame it read ahead is not consumed yet. Between batches
// they give the buffer back to a pool shared by the process, so an idle
// stream costs a few words, not a buffer (a relay with ten thousand idle
// links would otherwise pin hundreds of MiB).
const (
	// writerBufferSize is how many bytes a Writer gathers before it writes
	// them without waiting for Flush: many small frames (acks, deletes,
	// small puts) coalesce into one write of the stream.
	writerBufferSize = 32 << 10
	// readerBufferSize is how much a Reader asks the stream for at once.
	readerBufferSize = 32 << 10
	// pooledBufferMax is the largest buffer given back to the pool; a
	// larger one (a Reader's, after a large frame) is left to the garbage
	// collector, so one huge frame does not pin its buffer.
	pooledBufferMax = 64 << 10
	// directWriteMin: a payload at least this long is written to the
	// stream as it is, after the frames buffered before it, not copied
	// into the buffer.
	directWriteMin = writerBufferSize
)

// buffer is a pooled byte slice; the pool holds pointers so that putting
// one back allocates nothing.
type buffer struct{ b []byte }

var bufferPool = sync.Pool{New: func() any { return &buffer{b: make([]byte, 0, readerBufferSize)} }}

func getBuffer() *buffer {
	pb := bufferPool.Get().(*buffer)
	pb.b = pb.b[:0]
	return pb
}

// putBuffer gives pb back to the pool, unless it grew too large. pb may be
// nil.
func putBuffer(pb *buffer) {
	if pb == nil || cap(pb.b) > pooledBufferMax {
		return
	}
	bufferPool.Put(pb)
}

// Writer writes frames to a byte stream. It buffers: call Flush when a
// batch is done, or the last frames stay in memory. The frames written
// between two Flushes reach the stream in one write (in writes of about
// 32 KiB when they are more). It is not safe for concurrent use.
//
// An error from the underlying io.Writer is sticky: every later Write and
// Flush returns it, as the stream is then broken. An error in encoding a
// message (ErrMalformed, ErrFrameTooLarge) writes nothing and is not sticky.
type Writer struct {
	w      io.Writer
	limits limits
	buf    *buffer // frames not written yet; nil after a Flush
	err    error
}

// NewWriter returns a Writer that writes frames to w. A nil cfg means the
// defaults.
func NewWriter(w io.Writer, cfg *Config) *Writer {
	return &Writer{w: w, limits: cfg.limits()}
}

// Write encodes msg as one frame into the Writer's buffer.
func (w *Writer) Write(msg Message) error {
	if w.err != nil {
		return w.err
	}
	e := getEncoder(w.limits)
	defer putEncoder(e)
	if err := e.encode(msg); err != nil {
		return err
	}
	if w.buf == nil {
		w.buf = getBuffer()
	}
	w.buf.b = appendHeader(w.buf.b, msg.Type(), e.flags, len(e.buf))
	if len(e.buf) >= directWriteMin {
		// A large payload goes out as it is, after what is buffered.
		if err := w.send(); err != nil {
			return err
		}
		if _, err := w.w.Write(e.buf); err != nil {
			return w.fail(err)
		}
		return nil
	}
	w.buf.b = append(w.buf.b, e.buf...)
	if len(w.buf.b) >= writerBufferSize {
		return w.send()
	}
	return nil
}

// Flush writes buffered frames to the underlying io.Writer.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if err := w.send(); err != nil {
		return err
	}
	putBuffer(w.buf)
	w.buf = nil
	return nil
}

// send writes the buffered bytes and empties the buffer (keeping it).
func (w *Writer) send() error {
	if w.buf == nil || len(w.buf.b) == 0 {
		return nil
	}
	_, err := w.w.Write(w.buf.b)
	w.buf.b = w.buf.b[:0]
	if err != nil {
		return w.fail(err)
	}
	return nil
}

func (w *Writer) fail(err error) error {
	w.err = fmt.Errorf("wire: writing frame: %w", err)
	putBuffer(w.buf)
	w.buf = nil
	return w.err
}

// Reader reads frames from a byte stream. It is not safe for concurrent use.
//
// It reads ahead: one read of the stream may bring several frames, which
// later Reads return without reading the stream. While it waits for a
// frame with nothing read ahead, it holds no buffer.
//
// Any error is sticky: a stream has no way to find the next frame after a
// bad one, so the caller closes it (after sending an Error with CodeProtocol
// where it can).
type Reader struct {
	r      io.Reader
	limits limits
	// buf.b[off:end] are the bytes read ahead and not consumed; buf is nil
	// when there are none.
	buf      *buffer
	off, end int
	// first receives the first bytes of a batch: the wait for the next
	// frame needs no buffer.
	first [maxHeaderLen]byte
	// rerr is an error the stream returned with bytes still unconsumed:
	// returned once they are.
	rerr error
	err  error
}

// NewReader returns a Reader that reads frames from r. A nil cfg means the
// defaults.
func NewReader(r io.Reader, cfg *Config) *Reader {
	return &Reader{r: r, limits: cfg.limits()}
}

// Read reads the next frame and returns its message, which the caller owns.
// It returns io.EOF if the stream ended cleanly between frames, and an
// error wrapping io.ErrUnexpectedEOF if it ended inside one.
func (r *Reader) Read() (Message, error) {
	if r.err != nil {
		return nil, r.err
	}
	m, err := r.read()
	if r.off == r.end || err != nil {
		r.release()
	}
	if err != nil {
		r.err = err
	}
	return m, err
}

// Buffered returns how many bytes the Reader has read ahead of the frames
// it returned: more than zero means the next frame has begun to arrive
// (with the one before it, in one read of the stream).
func (r *Reader) Buffered() int { return r.end - r.off }

// Rest returns what follows the last frame Read returned: the bytes read
// ahead, then the rest of the stream. A stream that changes from frames to
// raw bytes (a relay passing a proxy stream on) reads on from Rest; the
// Reader must not be used after it.
func (r *Reader) Rest() io.Reader {
	var ahead []byte
	if r.buf != nil {
		ahead = bytes.Clone(r.buf.b[r.off:r.end])
	}
	r.release()
	if r.rerr != nil {
		return io.MultiReader(bytes.NewReader(ahead), errReader{r.rerr})
	}
	return io.MultiReader(bytes.NewReader(ahead), r.r)
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func (r *Reader) read() (Message, error) {
	t, f, n, err := readHeader(byteReader{r}, r.limits)
	if err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		return nil, err
	}
	if err := r.fill(n); err != nil {
		return nil, fmt.Errorf("wire: reading %v payload: %w", t, noEOF(err))
	}
	var p []byte
	if n > 0 {
		p = r.buf.b[r.off : r.off+n]
		r.off += n
	}
	// The message never aliases p: the buffer may be reused at once.
	return decodePayload(t, f, p, r.limits)
}

// release gives the buffer back once everything read ahead is consumed.
func (r *Reader) release() {
	putBuffer(r.buf)
	r.buf, r.off, r.end = nil, 0, 0
}

// fill makes at least n unread bytes available. Beyond what it already
// holds, it grows the buffer only as bytes arrive, so a peer that
// announces a large frame and sends nothing costs little memory.
func (r *Reader) fill(n int) error {
	const chunk = 64 << 10
	for empty := 0; r.end-r.off < n; {
		if r.rerr != nil {
			return r.rerr
		}
		var k int
		var err error
		if r.buf == nil {
			// Waiting for a batch: its first bytes go to r.first.
			if k, err = r.r.Read(r.first[:]); k > 0 {
				r.buf = getBuffer()
				r.buf.b = append(r.buf.b, r.first[:k]...)
				r.off, r.end = 0, k
			}
		} else {
			b := r.buf.b[:cap(r.buf.b)]
			if len(b)-r.off < n {
				// Too little room after off: move the unread bytes to
				// the front of the buffer, or of a larger one: of the
				// size needed, or of twice what arrived (at least
				// chunk) if that is less.
				have := r.end - r.off
				if size := min(n, max(chunk, 2*have)); size > len(b) {
					nb := make([]byte, size)
					copy(nb, b[r.off:r.end])
					putBuffer(r.buf)
					r.buf, b = &buffer{}, nb
				} else {
					copy(b, b[r.off:r.end])
				}
				r.off, r.end = 0, have
			}
			k, err = r.r.Read(b[r.end:])
			r.end += k
			r.buf.b = b
		}
		switch {
		case err != nil:
			r.rerr = err
		case k == 0:
			if empty++; empty == 100 {
				r.rerr = io.ErrNoProgress
			}
		default:
			empty = 0
		}
	}
	return nil
}

// byteReader reads a frame header from a Reader's buffer, filling it as
// needed. A clean end of the stream before the first byte is io.EOF.
type byteReader struct{ r *Reader }

func (b byteReader) ReadByte() (byte, error) {
	if err := b.r.fill(1); err != nil {
		return 0, err
	}
	c := b.r.buf.b[b.r.off]
	b.r.off++
	return c, nil
}
