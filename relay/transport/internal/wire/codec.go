package wire

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"
)

// Field encoders. Each appends one field to b.

func appendUvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }
func appendVarint(b []byte, v int64) []byte   { return binary.AppendVarint(b, v) }

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendBytes(b, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendStrings appends a list of strings: its count, then each string.
func appendStrings(b []byte, ss []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(ss)))
	for _, s := range ss {
		b = appendString(b, s)
	}
	return b
}

// encoder builds one payload. Writers and Marshal take one from
// encoderPool for each frame.
type encoder struct {
	buf    []byte
	flags  Flags
	limits limits
}

// retainLimit is the largest buffer a pooled encoder keeps between frames;
// one huge frame does not pin its buffer forever.
const retainLimit = 1 << 20

var encoderPool = sync.Pool{New: func() any { return new(encoder) }}

func getEncoder(l limits) *encoder {
	e := encoderPool.Get().(*encoder)
	e.limits = l
	return e
}

func putEncoder(e *encoder) {
	if cap(e.buf) > retainLimit {
		e.buf = nil
	}
	encoderPool.Put(e)
}

// encode sets e.buf to msg's payload and e.flags to its frame flags.
func (e *encoder) encode(msg Message) error {
	if msg == nil {
		return fmt.Errorf("%w: nil message", ErrMalformed)
	}
	e.buf, e.flags = e.buf[:0], 0
	var err error
	e.buf, err = msg.appendPayload(e.buf, e)
	if err != nil {
		return err
	}
	if len(e.buf) > e.limits.maxFrame {
		return fmt.Errorf("%w: %v payload of %d bytes, limit %d", ErrFrameTooLarge, msg.Type(), len(e.buf), e.limits.maxFrame)
	}
	return nil
}

// object appends an object field, compressing it if configured to.
func (e *encoder) object(b, p []byte) []byte {
	b, z := appendObject(b, p, e.limits)
	if z {
		e.flags |= FlagCompressed
	}
	return b
}

// codecError is an error of this package: a sentinel, a message, and
// optionally the cause.
type codecError struct {
	sentinel error
	msg      string
	cause    error
}

func (e *codecError) Error() string {
	if e.cause != nil {
		return e.sentinel.Error() + ": " + e.msg + ": " + e.cause.Error()
	}
	return e.sentinel.Error() + ": " + e.msg
}

func (e *codecError) Unwrap() []error {
	if e.cause != nil {
		return []error{e.sentinel, e.cause}
	}
	return []error{e.sentinel}
}

// decoder reads the fields of one payload. Errors are sticky: after the
// first one every read returns a zero value, and err says what went wrong.
// Byte fields are copied out, so a message never aliases the payload.
type decoder struct {
	b      []byte
	typ    Type
	flags  Flags
	limits limits
	err    error
}

func (d *decoder) fail(field, format string, args ...any) {
	if d.err == nil {
		d.err = &codecError{sentinel: ErrMalformed, msg: fmt.Sprintf("%v.%s: ", d.typ, field) + fmt.Sprintf(format, args...)}
	}
}

// more reports whether bytes remain: fields a later protocol version
// appended to a payload, which an older sender leaves out.
func (d *decoder) more() bool { return d.err == nil && len(d.b) > 0 }

func (d *decoder) truncated(field string) {
	if d.err == nil {
		d.err = &codecError{sentinel: ErrMalformed, msg: fmt.Sprintf("%v.%s", d.typ, field), cause: io.ErrUnexpectedEOF}
	}
}

func (d *decoder) uvarint(field string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		if n == 0 {
			d.truncated(field)
		} else {
			d.fail(field, "uvarint overflows 64 bits")
		}
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uint32(field string) uint32 {
	v := d.uvarint(field)
	if v > 1<<32-1 {
		d.fail(field, "%d overflows 32 bits", v)
		return 0
	}
	return uint32(v)
}

func (d *decoder) varint(field string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		if n == 0 {
			d.truncated(field)
		} else {
			d.fail(field, "varint overflows 64 bits")
		}
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte(field string) byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.truncated(field)
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) bool(field string) bool {
	switch v := d.byte(field); v {
	case 0:
		return false
	case 1:
		return true
	default:
		d.fail(field, "boolean byte %d", v)
		return false
	}
}

// raw returns a length-prefixed field without copying it.
func (d *decoder) raw(field string) []byte {
	n := d.uvarint(field)
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.truncated(field)
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes(field string) []byte {
	v := d.raw(field)
	if len(v) == 0 {
		return nil
	}
	return append([]byte(nil), v...)
}

func (d *decoder) string(field string) string {
	return string(d.raw(field))
}

// object reads an object field, decompressing it if the frame says so.
func (d *decoder) object(field string) []byte {
	if d.flags&FlagCompressed == 0 {
		return d.bytes(field)
	}
	z := d.raw(field)
	if d.err != nil {
		return nil
	}
	v, err := decompress(z, d.limits.maxFrame)
	if err != nil {
		ce := err.(*codecError)
		d.err = &codecError{sentinel: ce.sentinel, msg: fmt.Sprintf("%v.%s: ", d.typ, field) + ce.msg, cause: ce.cause}
		return nil
	}
	return v
}

// count reads a list or map length. Each element takes at least minSize
// bytes on the wire, so a count the remaining payload cannot hold is an
// error, never an allocation.
func (d *decoder) count(field string, minSize int) int {
	n := d.uvarint(field)
	if d.err != nil {
		return 0
	}
	if n > uint64(len(d.b)/minSize) {
		d.fail(field, "%d elements cannot fit in %d bytes", n, len(d.b))
		return 0
	}
	return int(n)
}

// strings reads a list of strings (appendStrings); empty is nil.
func (d *decoder) strings(field string) []string {
	n := d.count(field, 1)
	if n == 0 {
		return nil
	}
	out := make([]string, 0, capHint(n))
	for range n {
		s := d.string(field)
		if d.err != nil {
			return nil
		}
		out = append(out, s)
	}
	return out
}

// capHint bounds the capacity preallocated for n decoded elements, so that
// small wire elements cannot make a much larger in-memory allocation up
// front; beyond it, slices grow as elements are actually decoded.
func capHint(n int) int { return min(n, 64) }
