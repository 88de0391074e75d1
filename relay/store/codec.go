package store

import (
	"encoding/binary"
	"errors"
)

// The binary encodings of commands, snapshot records and continue tokens are
// built from varints and length-prefixed byte strings.

var errShort = errors.New("truncated or oversized field")

// encoder appends fields to buf.
type encoder struct{ buf []byte }

func (e *encoder) byte(b byte)         { e.buf = append(e.buf, b) }
func (e *encoder) uvarint(v uint64)    { e.buf = binary.AppendUvarint(e.buf, v) }
func (e *encoder) varint(v int64)      { e.buf = binary.AppendVarint(e.buf, v) }
func (e *encoder) str(s string)        { e.uvarint(uint64(len(s))); e.buf = append(e.buf, s...) }
func (e *encoder) bytes(b []byte)      { e.uvarint(uint64(len(b))); e.buf = append(e.buf, b...) }
func (e *encoder) resource(r Resource) { e.str(r.Group); e.str(r.Resource) }

// key encodes k in the order decoder.key reads it.
func (e *encoder) key(k Key) {
	e.str(k.Space)
	e.resource(k.Resource)
	e.str(k.Namespace)
	e.str(k.Name)
}

// decoder reads fields from buf. The first failure is sticky: later reads
// return zero values and err says what went wrong, so callers check it once.
type decoder struct {
	buf []byte
	err error
}

func (d *decoder) fail() { d.err, d.buf = errShort, nil }

func (d *decoder) byte() byte {
	if len(d.buf) == 0 {
		d.fail()
		return 0
	}
	b := d.buf[0]
	d.buf = d.buf[1:]
	return b
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.buf)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.buf)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

// bytes returns a length-prefixed field aliasing buf: callers that keep it
// must copy it.
func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if n > uint64(len(d.buf)) {
		d.fail()
		return nil
	}
	b := d.buf[:n:n]
	d.buf = d.buf[n:]
	return b
}

func (d *decoder) str() string { return string(d.bytes()) }

func (d *decoder) resource() Resource { return Resource{Group: d.str(), Resource: d.str()} }

func (d *decoder) key() Key {
	return Key{Space: d.str(), Resource: d.resource(), Namespace: d.str(), Name: d.str()}
}
