package link

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
)

// ListenConfig configures a [Listener].
type ListenConfig struct {
	// TLS is the server-side configuration: certificate, and the client
	// certificate policy (ClientAuth, ClientCAs), which is the caller's. It is
	// cloned; MinVersion is forced to TLS 1.3 and NextProtos to [ALPN].
	TLS *tls.Config
	// Addr is where to bind what is not given below: UDP for QUIC and TCP on
	// the same host:port. With port 0 both get the same free port.
	Addr string
	// PacketConn, if set, carries QUIC instead of binding UDP (an in-memory
	// network, a socket shared with a Dialer). It is not closed by Close.
	PacketConn net.PacketConn
	// Transport, if set, carries QUIC instead (and takes precedence over
	// PacketConn); the same Transport may also dial. It is not closed by Close.
	Transport *quic.Transport
	// StatelessResetKey is the key of the stateless resets (RFC 9000
	// section 10.3) the listener's own QUIC transport sends for packets of
	// connections it does not know, such as the links of a previous run on
	// the same address: their children then see the link end at their next
	// packet and redial instead of waiting for the idle timeout. Resets
	// work across restarts only if the key stays the same. If nil, it is
	// derived from the private key of TLS's first certificate (none if
	// there is none). Unused with Transport, whose key is the caller's.
	StatelessResetKey *quic.StatelessResetKey
	// TCP, if set, serves the TCP fallback instead of binding TCP. Close
	// closes it.
	TCP net.Listener
	// DisableQUIC and DisableTCP turn one side off.
	DisableQUIC, DisableTCP bool
	// Config holds timers and limits; zero fields take defaults.
	Config Config
}

// Listener accepts links over QUIC and over TLS/TCP on the same address.
// Its methods are safe for concurrent use.
type Listener struct {
	cfg     Config
	tls     *tls.Config
	ql      *quic.Listener
	tr      *quic.Transport // owned, nil if the caller's
	udp     net.PacketConn  // owned, nil if the caller's
	tl      net.Listener
	conns   chan Conn
	closed  chan struct{}
	closeMu sync.Once
	wg      sync.WaitGroup

	mu    sync.Mutex
	links map[Conn]struct{} // accepted and not yet gone
}

func quicConfig(cfg Config, handshake time.Duration) *quic.Config {
	return &quic.Config{
		HandshakeIdleTimeout:  handshake,
		MaxIdleTimeout:        cfg.MaxIdleTimeout,
		KeepAlivePeriod:       cfg.KeepAlivePeriod,
		MaxIncomingStreams:    cfg.MaxIncomingStreams,
		MaxIncomingUniStreams: -1,
		// Dialed links send probe datagrams (quicConn.probe).
		EnableDatagrams: true,
	}
}

// Listen starts a Listener. See [ListenConfig] for what it binds.
func Listen(lc ListenConfig) (*Listener, error) {
	l := &Listener{
		cfg:    lc.Config.complete(),
		tls:    tlsConfig(lc.TLS),
		conns:  make(chan Conn),
		closed: make(chan struct{}),
		links:  make(map[Conn]struct{}),
	}
	wantQUIC := !lc.DisableQUIC && (lc.Transport != nil || lc.PacketConn != nil || lc.Addr != "")
	wantTCP := !lc.DisableTCP && (lc.TCP != nil || lc.Addr != "")
	if !wantQUIC && !wantTCP {
		return nil, ErrNoTransport
	}
	if err := l.bind(lc, wantQUIC, wantTCP); err != nil {
		return nil, err
	}
	if l.ql != nil {
		l.wg.Add(1)
		go l.serveQUIC()
	}
	if l.tl != nil {
		l.wg.Add(1)
		go l.serveTCP()
	}
	return l, nil
}

func (l *Listener) bind(lc ListenConfig, wantQUIC, wantTCP bool) error {
	// With port 0, UDP picks a port and TCP must get the same one; another
	// process may hold it on TCP, so try a few times.
	const attempts = 8
	var err error
	for range attempts {
		err = l.bindOnce(lc, wantQUIC, wantTCP)
		if err == nil || !errors.Is(err, errTCPPortTaken) {
			return err
		}
	}
	return err
}

var errTCPPortTaken = errors.New("tcp port taken")

// listenTCP is net.Listen; tests replace it.
var listenTCP = net.Listen

func (l *Listener) bindOnce(lc ListenConfig, wantQUIC, wantTCP bool) error {
	tcpAddr := lc.Addr
	if wantQUIC {
		resetKey := lc.StatelessResetKey
		if resetKey == nil {
			resetKey = deriveResetKey(l.tls)
		}
		tr := lc.Transport
		switch {
		case tr != nil:
		case lc.PacketConn != nil:
			l.tr = &quic.Transport{Conn: lc.PacketConn, StatelessResetKey: resetKey}
			tr = l.tr
		default:
			pc, err := net.ListenPacket("udp", lc.Addr)
			if err != nil {
				return fmt.Errorf("link: listen udp: %w", err)
			}
			l.udp = pc
			l.tr = &quic.Transport{Conn: pc, StatelessResetKey: resetKey}
			tr = l.tr
			host, _, _ := net.SplitHostPort(lc.Addr)
			tcpAddr = net.JoinHostPort(host, strconv.Itoa(pc.LocalAddr().(*net.UDPAddr).Port))
		}
		ql, err := tr.Listen(l.tls, quicConfig(l.cfg, l.cfg.HandshakeTimeout))
		if err != nil {
			l.closeQUIC()
			return fmt.Errorf("link: listen quic: %w", err)
		}
		l.ql = ql
	}
	if wantTCP {
		if lc.TCP != nil {
			l.tl = lc.TCP
		} else {
			tl, err := listenTCP("tcp", tcpAddr)
			if err != nil {
				picked := l.udp != nil && lc.Addr != tcpAddr // UDP chose the port
				l.closeQUIC()
				if !picked {
					return fmt.Errorf("link: listen tcp: %w", err)
				}
				return fmt.Errorf("%w: %w", errTCPPortTaken, err)
			}
			l.tl = tl
		}
	}
	return nil
}

func (l *Listener) closeQUIC() {
	if l.ql != nil {
		_ = l.ql.Close()
		l.ql = nil
	}
	if l.tr != nil {
		_ = l.tr.Close()
		l.tr = nil
	}
	if l.udp != nil {
		_ = l.udp.Close()
		l.udp = nil
	}
}

func (l *Listener) deliver(c Conn) {
	l.mu.Lock()
	l.links[c] = struct{}{}
	l.mu.Unlock()
	AfterClose(c, func() {
		l.mu.Lock()
		delete(l.links, c)
		l.mu.Unlock()
	})
	select {
	case l.conns <- c:
	case <-l.closed:
		_ = c.Close("listener closed")
	}
}

func (l *Listener) serveQUIC() {
	defer l.wg.Done()
	for {
		qc, err := l.ql.Accept(context.Background())
		if err != nil {
			return
		}
		if err := checkALPN(qc.ConnectionState().TLS); err != nil {
			_ = qc.CloseWithError(codeNoError, err.Error())
			continue
		}
		c := newQUICConn(qc, l.cfg, nil)
		c.drainDatagrams(l.cfg)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.deliver(c)
		}()
	}
}

func (l *Listener) serveTCP() {
	defer l.wg.Done()
	var delay time.Duration
	for {
		nc, err := l.tl.Accept()
		if err != nil {
			select {
			case <-l.closed:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Temporary failure (out of file descriptors...): back off.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(delay):
			case <-l.closed:
				return
			}
			continue
		}
		delay = 0
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			c, err := l.handshakeTCP(nc)
			if err != nil {
				_ = nc.Close()
				return
			}
			l.deliver(c)
		}()
	}
}

func (l *Listener) handshakeTCP(nc net.Conn) (Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.HandshakeTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Now()) })
	defer stop()
	go func() {
		select {
		case <-l.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	tc := tls.Server(nc, l.tls)
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, err
	}
	if !stop() {
		return nil, ctx.Err()
	}
	if err := checkALPN(tc.ConnectionState()); err != nil {
		return nil, err
	}
	return newTCPConn(tc, l.cfg, true)
}

// Accept returns the next authenticated link, over either transport.
func (l *Listener) Accept(ctx context.Context) (Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.closed:
		return nil, ErrListenerClosed
	}
}

// Addr is the QUIC (UDP) address, or the TCP address if QUIC is not served.
func (l *Listener) Addr() net.Addr {
	if l.ql != nil {
		return l.ql.Addr()
	}
	return l.tl.Addr()
}

// TCPAddr is the TCP address, nil if TCP is not served.
func (l *Listener) TCPAddr() net.Addr {
	if l.tl == nil {
		return nil
	}
	return l.tl.Addr()
}

// Close stops accepting and closes every link this listener accepted (a
// parent going away). A caller's PacketConn or Transport stays open.
func (l *Listener) Close() error {
	l.closeMu.Do(func() {
		close(l.closed)
		if l.ql != nil {
			_ = l.ql.Close()
		}
		if l.tl != nil {
			_ = l.tl.Close()
		}
		l.wg.Wait()
		l.mu.Lock()
		links := make([]Conn, 0, len(l.links))
		for c := range l.links {
			links = append(links, c)
		}
		l.mu.Unlock()
		for _, c := range links {
			_ = c.Close("listener closed")
		}
		if l.tr != nil {
			_ = l.tr.Close()
		}
		if l.udp != nil {
			_ = l.udp.Close()
		}
	})
	return nil
}
