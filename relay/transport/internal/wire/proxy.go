package wire

import (
	"slices"
)

// ---- proxy streams (protocol version 5) ----
//
// A parent opens a proxy stream toward the child that leads to a
// destination and sends ProxyOpen first. A region opens the next stream
// toward its own child and passes the bytes through; the edge answers
// ProxyReady, or any relay on the way answers Error (CodeNotFound,
// CodeUnavailable, CodeTooManyStreams) and closes the stream. After
// ProxyOpen and ProxyReady, both ends exchange ProxyData, ProxyCredit and
// ProxyClose: a byte stream in each direction with its own flow control,
// so that a stream nobody reads holds only its window, never the link.
//
// Each end may send ProxyWindow bytes of ProxyData (counting Data only)
// beyond what the other end has granted with ProxyCredit; the opener may
// send data right after ProxyOpen, before ProxyReady.

// ProxyWindow is how many data bytes either end of a proxy stream may have
// in flight before the other grants more (ProxyCredit).
const ProxyWindow = 256 << 10

// ProxyOpen opens a proxy stream: the destination it goes to and the user
// on whose behalf (as the root authenticated and authorized them), for the
// edge to impersonate at its cluster.
//
// Payload: Destination (string), ID (string), User (string), UID (string),
// Groups (count, strings), Extra (count, key string then count, strings;
// keys strictly increasing).
type ProxyOpen struct {
	Destination string
	// ID identifies the request in the root's audit log and in every
	// relay's log on the way.
	ID     string
	User   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

func (*ProxyOpen) Type() Type { return TypeProxyOpen }

func (m *ProxyOpen) appendPayload(b []byte, _ *encoder) ([]byte, error) {
	b = appendString(b, m.Destination)
	b = appendString(b, m.ID)
	b = appendString(b, m.User)
	b = appendString(b, m.UID)
	b = appendStrings(b, m.Groups)
	keys := make([]string, 0, len(m.Extra))
	for k := range m.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = appendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = appendString(b, k)
		b = appendStrings(b, m.Extra[k])
	}
	return b, nil
}

func (m *ProxyOpen) decodePayload(d *decoder) {
	m.Destination = d.string("destination")
	m.ID = d.string("id")
	m.User = d.string("user")
	m.UID = d.string("uid")
	m.Groups = d.strings("groups")
	n := d.count("extra", 2)
	if n == 0 {
		return
	}
	m.Extra = make(map[string][]string, capHint(n))
	prev := ""
	for i := range n {
		k := d.string("extra.key")
		v := d.strings("extra.values")
		if d.err != nil {
			return
		}
		if i > 0 && k <= prev {
			d.fail("extra", "keys not strictly increasing (%q after %q)", k, prev)
			return
		}
		m.Extra[k], prev = v, k
	}
}

// ProxyReady is the edge's answer to ProxyOpen: the stream reaches the
// destination's cluster.
//
// Payload: none.
type ProxyReady struct{}

func (*ProxyReady) Type() Type                                         { return TypeProxyReady }
func (*ProxyReady) appendPayload(b []byte, _ *encoder) ([]byte, error) { return b, nil }
func (*ProxyReady) decodePayload(*decoder)                             {}

// ProxyData carries bytes of a proxy stream.
//
// Payload: Data (bytes).
type ProxyData struct {
	Data []byte
}

func (*ProxyData) Type() Type { return TypeProxyData }

func (m *ProxyData) appendPayload(b []byte, _ *encoder) ([]byte, error) {
	return appendBytes(b, m.Data), nil
}

func (m *ProxyData) decodePayload(d *decoder) { m.Data = d.bytes("data") }

// ProxyCredit grants the other end Bytes more bytes of ProxyData: the
// sender has consumed that many.
//
// Payload: Bytes (uvarint).
type ProxyCredit struct {
	Bytes uint64
}

func (*ProxyCredit) Type() Type { return TypeProxyCredit }

func (m *ProxyCredit) appendPayload(b []byte, _ *encoder) ([]byte, error) {
	return appendUvarint(b, m.Bytes), nil
}

func (m *ProxyCredit) decodePayload(d *decoder) { m.Bytes = d.uvarint("bytes") }

// ProxyClose ends the sender's direction of a proxy stream (as a TCP
// half-close): no ProxyData follows it. It still reads, and grants credit,
// until the other end closes too.
//
// Payload: none.
type ProxyClose struct{}

func (*ProxyClose) Type() Type                                         { return TypeProxyClose }
func (*ProxyClose) appendPayload(b []byte, _ *encoder) ([]byte, error) { return b, nil }
func (*ProxyClose) decodePayload(*decoder)                             {}
