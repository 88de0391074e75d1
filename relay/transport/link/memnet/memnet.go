package memnet

import (
	"container/heap"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"
)

// Link describes one direction-symmetric link between two endpoints.
type Link struct {
	Latency time.Duration // one-way delay
	Jitter  time.Duration // extra delay uniform in [0, Jitter]
	Loss    float64       // probability that a packet is dropped, 0..1
}

// Stats counts packets sent from one endpoint to another.
type Stats struct {
	Packets, Bytes uint64 // delivered or in flight
	Dropped        uint64 // lost, partitioned or dropped at a full queue
}

// ErrAddrInUse is returned by Listen for an address already taken.
var ErrAddrInUse = errors.New("memnet: address in use")

// QueueLen is how many packets an endpoint buffers before dropping, as a
// socket buffer would.
const QueueLen = 4096

type pair struct{ a, b netip.AddrPort }

func key(a, b netip.AddrPort) pair {
	if b.Compare(a) < 0 {
		a, b = b, a
	}
	return pair{a, b}
}

// Network is an in-memory packet network.
type Network struct {
	mu       sync.Mutex
	rng      *rand.Rand
	conns    map[netip.AddrPort]*Conn
	links    map[pair]Link
	def      Link
	cut      map[pair]bool
	stats    map[[2]netip.AddrPort]*Stats
	nextPort uint16

	// scheduler
	q      packetHeap
	seq    uint64
	wake   chan struct{}
	closed chan struct{}
	once   sync.Once
}

// New returns a network seeded with 1.
func New() *Network { return NewSeeded(1) }

// NewSeeded returns a network whose loss and jitter draw from seed.
func NewSeeded(seed uint64) *Network {
	n := &Network{
		rng:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		conns:    make(map[netip.AddrPort]*Conn),
		links:    make(map[pair]Link),
		cut:      make(map[pair]bool),
		stats:    make(map[[2]netip.AddrPort]*Stats),
		nextPort: 40000,
		wake:     make(chan struct{}, 1),
		closed:   make(chan struct{}),
	}
	go n.run()
	return n
}

// Close stops the scheduler and closes every endpoint.
func (n *Network) Close() error {
	n.once.Do(func() {
		close(n.closed)
		n.mu.Lock()
		conns := make([]*Conn, 0, len(n.conns))
		for _, c := range n.conns {
			conns = append(conns, c)
		}
		n.mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return nil
}

func parse(addr string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return ap, fmt.Errorf("memnet: address %q: %w", addr, err)
	}
	return ap, nil
}

// Listen creates the endpoint addr ("127.0.1.1:443"; port 0 picks one; nothing is sent on a real network).
func (n *Network) Listen(addr string) (*Conn, error) {
	ap, err := parse(addr)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if ap.Port() == 0 {
		for {
			n.nextPort++
			if n.nextPort == 0 {
				n.nextPort = 1024
			}
			cand := netip.AddrPortFrom(ap.Addr(), n.nextPort)
			if _, taken := n.conns[cand]; !taken {
				ap = cand
				break
			}
		}
	}
	if _, taken := n.conns[ap]; taken {
		return nil, fmt.Errorf("%w: %s", ErrAddrInUse, ap)
	}
	c := &Conn{
		net:    n,
		addr:   ap,
		laddr:  net.UDPAddrFromAddrPort(ap),
		notify: make(chan struct{}, 1),
		closed: make(chan struct{}),
		dl:     make(chan struct{}),
	}
	n.conns[ap] = c
	return c, nil
}

// SetDefault sets the link used between endpoints with no SetLink.
func (n *Network) SetDefault(l Link) {
	n.mu.Lock()
	n.def = l
	n.mu.Unlock()
}

// SetLink sets the link between a and b (both directions).
func (n *Network) SetLink(a, b string, l Link) error {
	pa, pb, err := parse2(a, b)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.links[key(pa, pb)] = l
	n.mu.Unlock()
	return nil
}

// Partition drops every packet between a and b until Heal.
func (n *Network) Partition(a, b string) error { return n.setCut(a, b, true) }

// Heal undoes Partition.
func (n *Network) Heal(a, b string) error { return n.setCut(a, b, false) }

func (n *Network) setCut(a, b string, cut bool) error {
	pa, pb, err := parse2(a, b)
	if err != nil {
		return err
	}
	n.mu.Lock()
	if cut {
		n.cut[key(pa, pb)] = true
	} else {
		delete(n.cut, key(pa, pb))
	}
	n.mu.Unlock()
	return nil
}

// Stats returns what was sent from a to b.
func (n *Network) Stats(from, to string) Stats {
	pa, pb, err := parse2(from, to)
	if err != nil {
		return Stats{}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if s := n.stats[[2]netip.AddrPort{pa, pb}]; s != nil {
		return *s
	}
	return Stats{}
}

func parse2(a, b string) (netip.AddrPort, netip.AddrPort, error) {
	pa, err := parse(a)
	if err != nil {
		return pa, pa, err
	}
	pb, err := parse(b)
	return pa, pb, err
}

type packet struct {
	data []byte
	from netip.AddrPort
	to   *Conn
	at   time.Time
	seq  uint64
}

// send routes one packet; called by Conn.WriteTo.
func (n *Network) send(from netip.AddrPort, to netip.AddrPort, b []byte) {
	n.mu.Lock()
	st := n.stats[[2]netip.AddrPort{from, to}]
	if st == nil {
		st = &Stats{}
		n.stats[[2]netip.AddrPort{from, to}] = st
	}
	dst := n.conns[to]
	k := key(from, to)
	l, ok := n.links[k]
	if !ok {
		l = n.def
	}
	if dst == nil || n.cut[k] || (l.Loss > 0 && n.rng.Float64() < l.Loss) {
		st.Dropped++
		n.mu.Unlock()
		return
	}
	st.Packets++
	st.Bytes += uint64(len(b))
	delay := l.Latency
	if l.Jitter > 0 {
		delay += time.Duration(n.rng.Int64N(int64(l.Jitter) + 1))
	}
	p := packet{data: append([]byte(nil), b...), from: from, to: dst}
	if delay <= 0 {
		n.mu.Unlock()
		if !dst.deliver(p) {
			n.mu.Lock()
			st.Dropped++
			n.mu.Unlock()
		}
		return
	}
	p.at = time.Now().Add(delay)
	n.seq++
	p.seq = n.seq
	first := len(n.q) == 0 || p.at.Before(n.q[0].at)
	heap.Push(&n.q, p)
	n.mu.Unlock()
	if first {
		select {
		case n.wake <- struct{}{}:
		default:
		}
	}
}

// run delivers delayed packets when they are due.
func (n *Network) run() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		n.mu.Lock()
		now := time.Now()
		var due []packet
		for len(n.q) > 0 && !n.q[0].at.After(now) {
			due = append(due, heap.Pop(&n.q).(packet))
		}
		next := time.Hour
		if len(n.q) > 0 {
			next = n.q[0].at.Sub(now)
		}
		n.mu.Unlock()
		for _, p := range due {
			p.to.deliver(p)
		}
		t.Reset(next)
		select {
		case <-t.C:
		case <-n.wake:
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
		case <-n.closed:
			return
		}
	}
}

type packetHeap []packet

func (h packetHeap) Len() int { return len(h) }
func (h packetHeap) Less(i, j int) bool {
	if h[i].at.Equal(h[j].at) {
		return h[i].seq < h[j].seq
	}
	return h[i].at.Before(h[j].at)
}
func (h packetHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *packetHeap) Push(x any)   { *h = append(*h, x.(packet)) }
func (h *packetHeap) Pop() any {
	old := *h
	p := old[len(old)-1]
	old[len(old)-1] = packet{}
	*h = old[:len(old)-1]
	return p
}

// Conn is an endpoint of a Network; it implements net.PacketConn.
type Conn struct {
	net   *Network
	addr  netip.AddrPort
	laddr *net.UDPAddr

	qmu    sync.Mutex
	queue  []packet // received, not yet read; at most QueueLen
	notify chan struct{}

	closeOnce sync.Once
	closed    chan struct{}

	mu       sync.Mutex
	deadline time.Time
	dl       chan struct{} // closed and replaced when the deadline changes
}

var _ net.PacketConn = (*Conn)(nil)

func (c *Conn) deliver(p packet) bool {
	select {
	case <-c.closed:
		return false
	default:
	}
	c.qmu.Lock()
	if len(c.queue) >= QueueLen {
		c.qmu.Unlock()
		return false // queue full: dropped, as by a socket
	}
	c.queue = append(c.queue, p)
	c.qmu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
	return true
}

func (c *Conn) pop() (packet, bool) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if len(c.queue) == 0 {
		return packet{}, false
	}
	p := c.queue[0]
	c.queue[0] = packet{}
	c.queue = c.queue[1:]
	if len(c.queue) == 0 {
		c.queue = nil // let the backing array go
	}
	return p, true
}

// ReadFrom implements net.PacketConn.
func (c *Conn) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		if p, ok := c.pop(); ok {
			n := copy(b, p.data)
			return n, net.UDPAddrFromAddrPort(p.from), nil
		}
		select {
		case <-c.closed:
			return 0, nil, c.opErr("read", net.ErrClosed)
		default:
		}
		c.mu.Lock()
		dl, changed := c.deadline, c.dl
		c.mu.Unlock()
		var (
			timeout <-chan time.Time
			t       *time.Timer
		)
		if !dl.IsZero() {
			d := time.Until(dl)
			if d <= 0 {
				return 0, nil, c.opErr("read", os.ErrDeadlineExceeded)
			}
			t = time.NewTimer(d)
			timeout = t.C
		}
		select {
		case <-c.notify:
		case <-c.closed:
		case <-timeout:
		case <-changed:
		}
		if t != nil {
			t.Stop()
		}
	}
}

// WriteTo implements net.PacketConn. Packets to unknown addresses vanish.
func (c *Conn) WriteTo(b []byte, addr net.Addr) (int, error) {
	select {
	case <-c.closed:
		return 0, c.opErr("write", net.ErrClosed)
	default:
	}
	var to netip.AddrPort
	switch a := addr.(type) {
	case *net.UDPAddr:
		to = a.AddrPort()
	default:
		var err error
		if to, err = netip.ParseAddrPort(addr.String()); err != nil {
			return 0, c.opErr("write", err)
		}
	}
	to = netip.AddrPortFrom(to.Addr().Unmap(), to.Port())
	c.net.send(c.addr, to, b)
	return len(b), nil
}

func (c *Conn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "udp", Addr: c.laddr, Err: err}
}

// Close removes the endpoint from the network.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.net.mu.Lock()
		if c.net.conns[c.addr] == c {
			delete(c.net.conns, c.addr)
		}
		c.net.mu.Unlock()
	})
	return nil
}

// LocalAddr is a *net.UDPAddr.
func (c *Conn) LocalAddr() net.Addr { return c.laddr }

// SetDeadline sets the read deadline; writes never block.
func (c *Conn) SetDeadline(t time.Time) error { return c.SetReadDeadline(t) }

// SetReadDeadline implements net.PacketConn.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	close(c.dl)
	c.dl = make(chan struct{})
	c.mu.Unlock()
	return nil
}

// SetWriteDeadline is a no-op: writes never block.
func (c *Conn) SetWriteDeadline(time.Time) error { return nil }

// SetReadBuffer is a no-op that keeps quic-go from warning.
func (c *Conn) SetReadBuffer(int) error { return nil }

// SetWriteBuffer is a no-op that keeps quic-go from warning.
func (c *Conn) SetWriteBuffer(int) error { return nil }
