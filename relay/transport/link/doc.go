// Package link is the transport of relay links: the multiplexed, mutually
// authenticated connection that a child relay dials toward its parent, and the
// typed streams carried on it.
//
// # What it owns
//
//   - Transport. QUIC (quic-go, TLS 1.3, ALPN [ALPN]) with keep-alives suited to
//     NAT, and a fallback of TLS 1.3 over TCP multiplexed with hashicorp/yamux,
//     optionally through an HTTP CONNECT proxy ([Dialer.Proxy] or the
//     HTTPS_PROXY / NO_PROXY environment). [Dialer] picks one per [Mode] and
//     remembers per address which one worked; [Listener] serves both on the same
//     address (UDP and TCP).
//   - Multiplexing. A [Conn] carries bidirectional [Stream]s; the first byte of
//     every stream is its [StreamKind], written by [Conn.OpenStream] and consumed
//     by [Conn.AcceptStream].
//   - Shared sockets. A [Dialer] and a [Listener] can run over a caller-owned
//     net.PacketConn or *quic.Transport, so that one UDP socket carries many links
//     in both directions (a 10 000-edge simulation cannot give every link its own
//     socket). Package memnet provides an in-memory packet network for tests.
//   - Reconnection. [KeepConnected] / [Redialer] keep a link up with exponential
//     backoff and full jitter. A listener's QUIC transport sends stateless
//     resets (RFC 9000 section 10.3) with a key derived from its TLS key
//     ([ListenConfig.StatelessResetKey]), and a dialed link sends a probe
//     datagram every keep-alive period, large enough to draw one: a parent
//     restarted on the same address ends its children's old links within a
//     keep-alive period rather than the idle timeout, and they redial.
//   - Byte counters per connection ([Conn.Stats]).
//
// # What it must not do
//
// It knows nothing about frames, revisions, mailboxes or who may talk to whom:
// the bytes of a stream after its kind are opaque. It makes no authorization
// decision beyond what the caller's *tls.Config enforces (client certificate
// policy, trusted CAs); callers inspect [Conn.ConnectionState] for the peer's
// identity. It does not decide which side may open which [StreamKind]
// ([StreamKind.ParentOpened] only names the reserved range).
//
// # Concurrency
//
// All methods of [Conn], [Listener] and [Dialer] are safe for concurrent use. A
// [Stream] may be read by one goroutine while another writes to it.
package link
