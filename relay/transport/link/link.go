package link

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// ALPN is the application protocol negotiated on every link, over QUIC and TCP.
const ALPN = "canopy-link/1"

// Transport names returned by [Conn.Transport].
const (
	TransportQUIC = "quic"
	TransportTCP  = "tcp"
)

// StreamKind is the type of a stream, sent as its first byte.
type StreamKind uint8

// Stream kinds. Kinds from [StreamProxy] up are reserved for streams the parent
// opens toward the child (the proxy feature); 4–15 are unassigned.
const (
	StreamControl  StreamKind = 1
	StreamDownsync StreamKind = 2
	StreamUpsync   StreamKind = 3
	StreamProxy    StreamKind = 16
)

// ParentOpened reports whether k is in the range reserved for streams the
// parent opens.
func (k StreamKind) ParentOpened() bool { return k >= StreamProxy }

func (k StreamKind) String() string {
	switch k {
	case StreamControl:
		return "control"
	case StreamDownsync:
		return "downsync"
	case StreamUpsync:
		return "upsync"
	case StreamProxy:
		return "proxy"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Errors returned by this package.
var (
	ErrInvalidKind    = errors.New("link: invalid stream kind 0")
	ErrConnClosed     = errors.New("link: connection closed")
	ErrListenerClosed = errors.New("link: listener closed")
	ErrWrongALPN      = errors.New("link: peer did not negotiate ALPN " + ALPN)
	ErrNoAddress      = errors.New("link: no address to dial")
	ErrNoTransport    = errors.New("link: listener has neither QUIC nor TCP")
)

// Conn is one link: a multiplexed, mutually authenticated connection.
type Conn interface {
	// OpenStream opens a stream and sends its kind. Either side may open.
	OpenStream(ctx context.Context, kind StreamKind) (Stream, error)
	// AcceptStream returns the next stream opened by the peer, with its kind.
	AcceptStream(ctx context.Context) (Stream, StreamKind, error)
	// ServeStreams passes each stream the peer opens, with its kind, to
	// serve, in a goroutine of the stream's own, until the connection is
	// gone: accepting without a goroutine that waits for the next stream.
	// A Conn is served this way or accepted from, not both; the first
	// call decides.
	ServeStreams(serve func(Stream, StreamKind))
	// ConnectionState holds the peer certificates and the negotiated ALPN.
	ConnectionState() tls.ConnectionState
	// Transport is TransportQUIC or TransportTCP.
	Transport() string
	// LocalAddr and RemoteAddr are the addresses of the underlying socket
	// (for TCP through a proxy, RemoteAddr is the proxy's).
	LocalAddr() net.Addr
	RemoteAddr() net.Addr
	// Stats returns the stream payload bytes received and sent on this
	// connection so far (kind bytes and transport overhead excluded).
	Stats() (bytesIn, bytesOut uint64)
	// Close closes the connection and all its streams; reason is sent to the
	// peer where the transport allows (QUIC).
	Close(reason string) error
	// Done is closed when the connection is gone: closed by either side, idle
	// timeout, keep-alive failure.
	Done() <-chan struct{}
}

// Stream is a bidirectional byte stream of a [Conn]. Close ends both
// directions; CloseWrite sends end-of-stream and keeps reading possible;
// neither may be called during a Write. Abort ends both directions at
// once, discarding what is not sent yet, and may be called at any time: a
// blocked Read or Write returns.
type Stream interface {
	io.ReadWriteCloser
	CloseWrite() error
	Abort()
}

// Config holds the timers and limits shared by [Dialer] and [ListenConfig].
// The zero value of every field means its default.
type Config struct {
	// KeepAlivePeriod is how often an idle link sends a keep-alive (QUIC PING,
	// yamux ping). Default 15 s, short enough for common NAT UDP timeouts.
	KeepAlivePeriod time.Duration
	// MaxIdleTimeout closes a link after this long without hearing from the
	// peer. Default 45 s (three keep-alives). For TCP it bounds a keep-alive
	// round trip and a blocked write.
	MaxIdleTimeout time.Duration
	// HandshakeTimeout bounds a TLS handshake (TCP, and QUIC on the listener).
	// Default 10 s.
	HandshakeTimeout time.Duration
	// MaxIncomingStreams is how many streams the peer may have open at once.
	// Default 4096: the proxy streams a parent opens count (relay/transport/session
	// allows 1024 per link by default).
	MaxIncomingStreams int64
	// StreamHeaderTimeout bounds the wait for the kind byte of a new stream.
	// Default 10 s.
	StreamHeaderTimeout time.Duration
}

// DefaultConfig returns the configuration used for zero fields.
func DefaultConfig() Config {
	return Config{
		KeepAlivePeriod:     15 * time.Second,
		MaxIdleTimeout:      45 * time.Second,
		HandshakeTimeout:    10 * time.Second,
		MaxIncomingStreams:  4096,
		StreamHeaderTimeout: 10 * time.Second,
	}
}

func (c Config) complete() Config {
	d := DefaultConfig()
	if c.KeepAlivePeriod <= 0 {
		c.KeepAlivePeriod = d.KeepAlivePeriod
	}
	if c.MaxIdleTimeout <= 0 {
		c.MaxIdleTimeout = d.MaxIdleTimeout
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = d.HandshakeTimeout
	}
	if c.MaxIncomingStreams <= 0 {
		c.MaxIncomingStreams = d.MaxIncomingStreams
	}
	if c.StreamHeaderTimeout <= 0 {
		c.StreamHeaderTimeout = d.StreamHeaderTimeout
	}
	return c
}

// tlsConfig clones c for a link: TLS 1.3 only, ALPN set.
func tlsConfig(c *tls.Config) *tls.Config {
	if c == nil {
		c = &tls.Config{}
	}
	c = c.Clone()
	c.MinVersion = tls.VersionTLS13
	c.NextProtos = []string{ALPN}
	return c
}

func checkALPN(cs tls.ConnectionState) error {
	if cs.NegotiatedProtocol != ALPN {
		return fmt.Errorf("%w (got %q)", ErrWrongALPN, cs.NegotiatedProtocol)
	}
	return nil
}
