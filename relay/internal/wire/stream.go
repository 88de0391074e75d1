package wire

import (
	"bufio"
	"fmt"
	"io"
)

// writerBufferSize is the size of a Writer's buffer: many small frames
// (acks, deletes, small puts) coalesce into one write of the stream.
const writerBufferSize = 32 << 10

// Writer writes frames to a byte stream. It buffers: call Flush when a
// batch is done, or the last frames stay in memory. It is not safe for
// concurrent use.
//
// An error from the underlying io.Writer is sticky: every later Write and
// Flush returns it, as the stream is then broken. An error in encoding a
// message (ErrMalformed, ErrFrameTooLarge) writes nothing and is not sticky.
type Writer struct {
	bw  *bufio.Writer
	enc encoder
	err error
}

// NewWriter returns a Writer that writes frames to w. A nil cfg means the
// defaults.
func NewWriter(w io.Writer, cfg *Config) *Writer {
	return &Writer{
		bw:  bufio.NewWriterSize(w, writerBufferSize),
		enc: encoder{limits: cfg.limits()},
	}
}

// Write encodes msg as one frame into the Writer's buffer.
func (w *Writer) Write(msg Message) error {
	if w.err != nil {
		return w.err
	}
	if err := w.enc.encode(msg); err != nil {
		return err
	}
	var hdr [maxHeaderLen]byte
	h := appendHeader(hdr[:0], msg.Type(), w.enc.flags, len(w.enc.buf))
	if _, err := w.bw.Write(h); err != nil {
		return w.fail(err)
	}
	if _, err := w.bw.Write(w.enc.buf); err != nil {
		return w.fail(err)
	}
	if cap(w.enc.buf) > retainLimit {
		w.enc.buf = nil
	}
	return nil
}

// Flush writes buffered frames to the underlying io.Writer.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if err := w.bw.Flush(); err != nil {
		return w.fail(err)
	}
	return nil
}

func (w *Writer) fail(err error) error {
	w.err = fmt.Errorf("wire: writing frame: %w", err)
	return w.err
}

// Reader reads frames from a byte stream. It is not safe for concurrent use.
//
// Any error is sticky: a stream has no way to find the next frame after a
// bad one, so the caller closes it (after sending an Error with CodeProtocol
// where it can).
type Reader struct {
	br     *bufio.Reader
	limits limits
	buf    []byte
	err    error
}

// NewReader returns a Reader that reads frames from r. A nil cfg means the
// defaults.
func NewReader(r io.Reader, cfg *Config) *Reader {
	return &Reader{br: bufio.NewReader(r), limits: cfg.limits()}
}

// Read reads the next frame and returns its message, which the caller owns.
// It returns io.EOF if the stream ended cleanly between frames, and an
// error wrapping io.ErrUnexpectedEOF if it ended inside one.
func (r *Reader) Read() (Message, error) {
	if r.err != nil {
		return nil, r.err
	}
	m, err := r.read()
	if err != nil {
		r.err = err
	}
	return m, err
}

func (r *Reader) read() (Message, error) {
	t, f, n, err := readHeader(r.br, r.limits)
	if err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		return nil, err
	}
	p, err := r.payload(n)
	if err != nil {
		return nil, fmt.Errorf("wire: reading %v payload: %w", t, noEOF(err))
	}
	m, err := decodePayload(t, f, p, r.limits)
	if cap(r.buf) > retainLimit {
		r.buf = nil
	}
	return m, err
}

// payload reads n bytes into the Reader's buffer. Beyond what the buffer
// already holds, it grows the buffer only as bytes arrive, so a peer that
// announces a large frame and sends nothing costs little memory.
func (r *Reader) payload(n int) ([]byte, error) {
	const chunk = 64 << 10
	if n <= cap(r.buf) || n <= chunk {
		if n > cap(r.buf) {
			r.buf = make([]byte, n)
		}
		p := r.buf[:n]
		_, err := io.ReadFull(r.br, p)
		return p, err
	}
	p := r.buf[:0]
	for len(p) < n {
		k := min(n-len(p), max(chunk, len(p)))
		p = append(p, make([]byte, k)...)
		if _, err := io.ReadFull(r.br, p[len(p)-k:]); err != nil {
			return nil, err
		}
	}
	r.buf = p
	return p, nil
}
