package consensus

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Every connection to a node's RaftAddr is TLS (1.3, both sides present a
// certificate the other verifies) and its first byte, sent by the dialer
// right after the handshake, selects the protocol on it:
const (
	protoRaft    byte = 'R' // hashicorp/raft's NetworkTransport RPCs
	protoForward byte = 'F' // write forwarding and read index (forward.go)
)

// handshakeTimeout bounds the TLS handshake and the protocol byte of an
// accepted connection.
const handshakeTimeout = 10 * time.Second

// PeerTLSConfig returns a TLS configuration for Config.TLS: this node
// presents cert (as server and as client: it needs both the server and the
// client extended key usage) and trusts peers whose certificate chains to
// ca.
//
// serverName, when set, is a name (DNS SAN) that every replica's
// certificate carries and others do not, such as "raft.<cluster-id>": a
// server checks it in its clients' certificates too. Set it whenever ca
// also issues certificates to anyone but the replicas (users, child
// relays): otherwise any holder of such a certificate could speak Raft.
// When empty, a server's certificate must name the host of the RaftAddr it
// advertises, and any client certificate of ca is accepted: use a CA
// dedicated to the replicas.
func PeerTLSConfig(cert tls.Certificate, ca *x509.CertPool, serverName string) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      ca,
		ClientCAs:    ca,
		ServerName:   serverName,
		MinVersion:   tls.VersionTLS13,
	}
}

// peerTLS derives the server and client side configurations from
// Config.TLS: both require TLS 1.3; the server requires and verifies a
// client certificate (against ClientCAs, or RootCAs when ClientCAs is nil),
// the client verifies the server against RootCAs (or ClientCAs).
func peerTLS(c *tls.Config) (server, client *tls.Config, err error) {
	if c == nil {
		return nil, nil, errors.New("consensus: Config.TLS is required with RaftAddr")
	}
	if len(c.Certificates) == 0 && c.GetCertificate == nil {
		return nil, nil, errors.New("consensus: Config.TLS has no certificate")
	}
	server, client = c.Clone(), c.Clone()
	if server.ClientCAs == nil {
		server.ClientCAs = c.RootCAs
	}
	if client.RootCAs == nil {
		client.RootCAs = c.ClientCAs
	}
	if server.ClientCAs == nil {
		return nil, nil, errors.New("consensus: Config.TLS has no CA to verify peers (RootCAs or ClientCAs)")
	}
	server.ClientAuth = tls.RequireAndVerifyClientCert
	server.MinVersion, client.MinVersion = tls.VersionTLS13, tls.VersionTLS13
	if name := c.ServerName; name != "" {
		// The client checks the server's name itself; the server checks
		// that the client's certificate carries the same peer name, so
		// other certificates of the CA (users, child relays) are refused.
		userVerify := c.VerifyConnection
		server.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("consensus: peer presented no certificate")
			}
			if err := cs.PeerCertificates[0].VerifyHostname(name); err != nil {
				return fmt.Errorf("consensus: peer certificate is not a replica's: %w", err)
			}
			if userVerify != nil {
				return userVerify(cs)
			}
			return nil
		}
	}
	return server, client, nil
}

// muxLayer is the raft.StreamLayer of a node: one TCP listener on RaftAddr,
// TLS on every connection, and a first byte that sends the connection to
// raft (Accept) or to the forward handler. Dial opens raft connections.
type muxLayer struct {
	ln        net.Listener
	advertise advertisedAddr
	serverTLS *tls.Config
	clientTLS *tls.Config
	log       *slog.Logger
	// forward serves one forwarding connection; it runs on its own
	// goroutine and owns the connection.
	forward func(net.Conn)

	raftConns chan net.Conn
	closeOnce sync.Once
	closed    chan struct{}
	wg        sync.WaitGroup
}

var _ raft.StreamLayer = (*muxLayer)(nil)

// advertisedAddr is the address peers dial, which may differ from the
// listener's (when bound to all interfaces).
type advertisedAddr string

func (a advertisedAddr) Network() string { return "tcp" }
func (a advertisedAddr) String() string  { return string(a) }

func newMuxLayer(ln net.Listener, advertise string, serverTLS, clientTLS *tls.Config, log *slog.Logger, forward func(net.Conn)) *muxLayer {
	m := &muxLayer{
		ln: ln, advertise: advertisedAddr(advertise), serverTLS: serverTLS, clientTLS: clientTLS,
		log: log, forward: forward, raftConns: make(chan net.Conn), closed: make(chan struct{}),
	}
	m.wg.Add(1)
	go m.acceptLoop()
	return m
}

func (m *muxLayer) acceptLoop() {
	defer m.wg.Done()
	var backoff time.Duration
	for {
		c, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.closed:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			m.log.Warn("raft listener: accept failed", "error", err)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.dispatch(c)
		}()
	}
}

// dispatch completes the TLS handshake of an accepted connection, reads its
// protocol byte and hands it over.
func (m *muxLayer) dispatch(c net.Conn) {
	tc := tls.Server(c, m.serverTLS)
	_ = tc.SetDeadline(time.Now().Add(handshakeTimeout))
	var proto [1]byte
	if err := tc.Handshake(); err != nil {
		m.log.Warn("raft listener: TLS handshake failed", "peer", c.RemoteAddr().String(), "error", err)
		_ = c.Close()
		return
	}
	if _, err := io.ReadFull(tc, proto[:]); err != nil {
		_ = tc.Close()
		return
	}
	_ = tc.SetDeadline(time.Time{})
	switch proto[0] {
	case protoRaft:
		select {
		case m.raftConns <- tc:
		case <-m.closed:
			_ = tc.Close()
		}
	case protoForward:
		m.forward(tc)
	default:
		m.log.Warn("raft listener: unknown protocol", "peer", c.RemoteAddr().String(), "byte", proto[0])
		_ = tc.Close()
	}
}

// Accept returns the next raft connection.
func (m *muxLayer) Accept() (net.Conn, error) {
	select {
	case c := <-m.raftConns:
		return c, nil
	case <-m.closed:
		return nil, net.ErrClosed
	}
}

// Close stops accepting; connections already handed over stay open (raft
// and the forward server close theirs).
func (m *muxLayer) Close() error {
	var err error
	m.closeOnce.Do(func() {
		close(m.closed)
		err = m.ln.Close()
	})
	return err
}

// stopAccepting closes the TCP listener: peers' dials fail from now on,
// while raft's Accept keeps waiting until Close (so raft does not log a
// failing listener during shutdown).
func (m *muxLayer) stopAccepting() { _ = m.ln.Close() }

// wait waits for the accept loop and handshakes in progress to end; the
// forward handlers they started are waited for by the node.
func (m *muxLayer) wait() { m.wg.Wait() }

func (m *muxLayer) Addr() net.Addr { return m.advertise }

// Dial opens a raft connection to a peer.
func (m *muxLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return m.dial(string(address), protoRaft, timeout)
}

// dial opens a TLS connection to address and selects proto on it.
func (m *muxLayer) dial(address string, proto byte, timeout time.Duration) (net.Conn, error) {
	cfg := m.clientTLS
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return nil, fmt.Errorf("consensus: dialing %s: %w", address, err)
		}
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: cfg}
	c, err := d.Dial("tcp", address)
	if err != nil {
		return nil, err
	}
	_ = c.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte{proto}); err != nil {
		_ = c.Close()
		return nil, err
	}
	_ = c.SetWriteDeadline(time.Time{})
	return c, nil
}
