// Package memnet is an in-memory packet network for tests and simulations of
// relay links: endpoints are net.PacketConn values that quic-go accepts as
// the Conn of a quic.Transport, connected by links with per-pair latency,
// jitter and loss, and cut by partitions.
//
// It owns packet delivery only: no TCP, no congestion, no MTU (packets of any
// size pass). Delivery order between two endpoints is preserved unless
// jitter reorders it. Loss and jitter are drawn from one generator seeded at
// construction: a run is deterministic for a given order of sends.
//
// quic-go asks nothing more of a net.PacketConn than its methods: without
// SyscallConn it uses no OOB, GSO nor path MTU discovery; Conn has no-op
// SetReadBuffer / SetWriteBuffer so that quic-go does not warn about buffer
// sizes.
//
// Evaluated and not used: quic-go's testutils/simnet (v0.65.0) gives each
// endpoint its own link with latency and bandwidth, run by goroutines per
// endpoint, but has no loss, no per-pair settings and no partitions; here one
// scheduler goroutine serves the whole network, which suits 10 000 endpoints.
//
// All methods are safe for concurrent use.
package memnet
