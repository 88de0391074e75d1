package link

import (
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"golang.org/x/net/http/httpproxy"
)

// Mode chooses the transports a [Dialer] tries.
type Mode int

const (
	// ModeAuto uses TCP through the proxy when one is configured (explicitly
	// or by environment); otherwise QUIC first, TCP if QUIC gets no answer.
	ModeAuto Mode = iota
	// ModeQUICOnly never uses TCP (nor a proxy).
	ModeQUICOnly
	// ModeTCPOnly never uses QUIC; a configured proxy is used.
	ModeTCPOnly
)

func (m Mode) String() string {
	switch m {
	case ModeAuto:
		return "auto"
	case ModeQUICOnly:
		return "quic"
	case ModeTCPOnly:
		return "tcp"
	}
	return fmt.Sprintf("mode(%d)", int(m))
}

// Dialer opens links toward a parent. Set its fields before the first Dial;
// Dial is then safe for concurrent use.
type Dialer struct {
	// TLS is the client-side configuration (client certificate, RootCAs). It
	// is cloned; MinVersion is forced to TLS 1.3 and NextProtos to [ALPN]. An
	// empty ServerName is set to the host of the address dialed.
	TLS *tls.Config
	// Mode chooses QUIC, TCP or both (default ModeAuto).
	Mode Mode
	// Proxy is an HTTP CONNECT proxy (http:// or https://, user:password
	// allowed) for the TCP transport. If nil and IgnoreProxyEnv is false,
	// HTTPS_PROXY / NO_PROXY (and lower-case forms) apply per address, with
	// golang.org/x/net/http/httpproxy semantics (never for loopback).
	Proxy          *url.URL
	IgnoreProxyEnv bool
	// Transport, if set, carries every QUIC dial (one UDP socket for many
	// links, possibly shared with a Listener). Not closed by Close.
	Transport *quic.Transport
	// PacketConn, if set and Transport is nil, is wrapped once in a
	// quic.Transport shared by all dials of this Dialer. Not closed by Close.
	// With neither, each QUIC link gets its own UDP socket.
	PacketConn net.PacketConn
	// DialContext dials TCP (default a net.Dialer with keep-alive).
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// QUICTimeout bounds the QUIC handshake; in ModeAuto it is how long
	// QUIC may take before falling back to TCP. Default 3 s in ModeAuto;
	// in ModeQUICOnly, Config.HandshakeTimeout (with several addresses, a
	// first pass gives each 3 s).
	QUICTimeout time.Duration
	// QUICRetryAfter is how long, after QUIC failed and TCP worked at an
	// address, ModeAuto goes straight to TCP there. Default 5 min.
	QUICRetryAfter time.Duration
	// Config holds timers and limits; zero fields take defaults.
	Config Config

	once   sync.Once
	ownTr  *quic.Transport
	mu     sync.Mutex
	worked map[string]worked
}

type worked struct {
	transport string
	at        time.Time
}

// Dial connects to the first of addrs that answers, trying them in order
// (a parent, then its siblings or root replicas).
func (d *Dialer) Dial(ctx context.Context, addrs []string) (Conn, error) {
	if len(addrs) == 0 {
		return nil, ErrNoAddress
	}
	// QUIC alone, with several addresses: a first pass gives each the
	// short QUIC timeout, so that a dead address costs little; a second
	// gives each the full handshake timeout, for a parent that is alive
	// but slow to answer (busy with a crowd of reconnecting children).
	passes := 1
	if d.Mode == ModeQUICOnly && d.QUICTimeout == 0 && len(addrs) > 1 {
		passes = 2
	}
	var errs []error
	for pass := range passes {
		for _, a := range addrs {
			c, err := d.dialAddr(ctx, a, passes == 2 && pass == 0)
			if err == nil {
				return c, nil
			}
			errs = append(errs, fmt.Errorf("%s: %w", a, err))
			if ctx.Err() != nil {
				return nil, fmt.Errorf("link: dial: %w", JoinErrors(errs...))
			}
		}
	}
	return nil, fmt.Errorf("link: dial: %w", JoinErrors(errs...))
}

// Close releases the quic.Transport the Dialer made from PacketConn, which
// also closes the links dialed through it.
func (d *Dialer) Close() error {
	d.mu.Lock()
	tr := d.ownTr
	d.mu.Unlock()
	if tr != nil {
		return tr.Close()
	}
	return nil
}

// Worked reports which transport last worked at addr ("" if none yet).
func (d *Dialer) Worked(addr string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.worked[addr].transport
}

func (d *Dialer) remember(addr, transport string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.worked == nil {
		d.worked = make(map[string]worked)
	}
	d.worked[addr] = worked{transport, time.Now()}
}

// dialAddr dials one address; quick (QUIC only) gives the handshake the
// short QUIC timeout rather than the full handshake timeout.
func (d *Dialer) dialAddr(ctx context.Context, addr string, quick bool) (Conn, error) {
	cfg := d.Config.complete()
	switch d.Mode {
	case ModeQUICOnly:
		// No fallback to hurry to: unless quick, the handshake gets as
		// long as a TLS handshake on TCP would (a parent busy with a
		// crowd of reconnecting children answers late, not never).
		timeout := cmp.Or(d.QUICTimeout, cfg.HandshakeTimeout)
		if quick {
			timeout = defaultQUICTimeout
		}
		return d.dialQUIC(ctx, addr, cfg, timeout)
	case ModeTCPOnly:
		proxy, err := d.proxyFor(addr)
		if err != nil {
			return nil, err
		}
		return d.dialTCP(ctx, addr, proxy, cfg)
	case ModeAuto:
	default:
		return nil, fmt.Errorf("link: unknown mode %v", d.Mode)
	}
	proxy, err := d.proxyFor(addr)
	if err != nil {
		return nil, err
	}
	if proxy != nil {
		return d.dialTCP(ctx, addr, proxy, cfg)
	}
	d.mu.Lock()
	w := d.worked[addr]
	d.mu.Unlock()
	retry := d.QUICRetryAfter
	if retry <= 0 {
		retry = 5 * time.Minute
	}
	if w.transport == TransportTCP && time.Since(w.at) < retry {
		return d.dialTCP(ctx, addr, nil, cfg)
	}
	c, qerr := d.dialQUIC(ctx, addr, cfg, cmp.Or(d.QUICTimeout, defaultQUICTimeout))
	if qerr == nil {
		return c, nil
	}
	if ctx.Err() != nil || isCryptoError(qerr) {
		// The peer answered and refused us (TLS), or we are told to stop:
		// TCP would not do better.
		return nil, qerr
	}
	c, terr := d.dialTCP(ctx, addr, nil, cfg)
	if terr != nil {
		return nil, JoinErrors(fmt.Errorf("quic: %w", qerr), fmt.Errorf("tcp: %w", terr))
	}
	return c, nil
}

func isCryptoError(err error) bool {
	var te *quic.TransportError
	return errors.As(err, &te) && te.ErrorCode.IsCryptoError()
}

func (d *Dialer) proxyFor(addr string) (*url.URL, error) {
	if d.Proxy != nil {
		return d.Proxy, nil
	}
	if d.IgnoreProxyEnv {
		return nil, nil
	}
	u, err := httpproxy.FromEnvironment().ProxyFunc()(&url.URL{Scheme: "https", Host: addr})
	if err != nil {
		return nil, fmt.Errorf("link: proxy from environment: %w", err)
	}
	return u, nil
}

func (d *Dialer) clientTLS(addr string) *tls.Config {
	c := tlsConfig(d.TLS)
	if c.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			c.ServerName = host
		}
	}
	return c
}

func (d *Dialer) quicTransport() *quic.Transport {
	if d.Transport != nil {
		return d.Transport
	}
	if d.PacketConn == nil {
		return nil
	}
	d.once.Do(func() {
		d.mu.Lock()
		d.ownTr = &quic.Transport{Conn: d.PacketConn}
		d.mu.Unlock()
	})
	return d.ownTr
}

// defaultQUICTimeout is how long ModeAuto gives QUIC before TCP.
const defaultQUICTimeout = 3 * time.Second

func (d *Dialer) dialQUIC(ctx context.Context, addr string, cfg Config, timeout time.Duration) (Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	udpAddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	tlsConf := d.clientTLS(addr)
	qconf := quicConfig(cfg, timeout)
	var (
		qc      *quic.Conn
		onClose func()
	)
	if tr := d.quicTransport(); tr != nil {
		qc, err = tr.Dial(ctx, udpAddr, tlsConf, qconf)
	} else {
		pc, lerr := net.ListenUDP("udp", nil)
		if lerr != nil {
			return nil, lerr
		}
		tr := &quic.Transport{Conn: pc}
		onClose = func() { _ = tr.Close(); _ = pc.Close() }
		qc, err = tr.Dial(ctx, udpAddr, tlsConf, qconf)
		if err != nil {
			onClose()
		}
	}
	if err != nil {
		return nil, err
	}
	if err := checkALPN(qc.ConnectionState().TLS); err != nil {
		_ = qc.CloseWithError(codeNoError, err.Error())
		return nil, err
	}
	d.remember(addr, TransportQUIC)
	c := newQUICConn(qc, cfg, onClose)
	c.probe(cfg)
	return c, nil
}

func (d *Dialer) dialTCP(ctx context.Context, addr string, proxy *url.URL, cfg Config) (Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.HandshakeTimeout)
	defer cancel()
	dial := d.DialContext
	if dial == nil {
		nd := &net.Dialer{KeepAlive: cfg.KeepAlivePeriod}
		dial = nd.DialContext
	}
	var (
		nc  net.Conn
		err error
	)
	if proxy != nil {
		nc, err = dialConnect(ctx, dial, proxy, addr)
	} else {
		nc, err = dial(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	tc := tls.Client(nc, d.clientTLS(addr))
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = nc.Close()
		return nil, err
	}
	if err := checkALPN(tc.ConnectionState()); err != nil {
		_ = nc.Close()
		return nil, err
	}
	c, err := newTCPConn(tc, cfg, false)
	if err != nil {
		_ = nc.Close()
		return nil, err
	}
	d.remember(addr, TransportTCP)
	return c, nil
}

// dialConnect opens a tunnel to target through an HTTP CONNECT proxy.
func dialConnect(ctx context.Context, dial func(context.Context, string, string) (net.Conn, error), proxy *url.URL, target string) (net.Conn, error) {
	host := proxy.Host
	if proxy.Port() == "" {
		port := "80"
		if proxy.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(proxy.Hostname(), port)
	}
	nc, err := dial(ctx, "tcp", host)
	if err != nil {
		return nil, fmt.Errorf("link: dial proxy %s: %w", host, err)
	}
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Now()) })
	defer stop()
	fail := func(err error) (net.Conn, error) {
		_ = nc.Close()
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		return nil, fmt.Errorf("link: proxy %s: %w", host, err)
	}
	switch proxy.Scheme {
	case "https":
		tc := tls.Client(nc, &tls.Config{ServerName: proxy.Hostname(), MinVersion: tls.VersionTLS12})
		if err := tc.HandshakeContext(ctx); err != nil {
			return fail(err)
		}
		nc = tc
	case "http", "":
	default:
		return fail(fmt.Errorf("unsupported proxy scheme %q", proxy.Scheme))
	}
	req := &http.Request{
		Method: http.MethodConnect,
		URL:    &url.URL{Opaque: target},
		Host:   target,
		Header: make(http.Header),
	}
	if u := proxy.User; u != nil {
		pw, _ := u.Password()
		req.Header.Set("Proxy-Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+pw)))
	}
	if err := req.Write(nc); err != nil {
		return fail(err)
	}
	br := bufio.NewReader(nc)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return fail(err)
	}
	// The body of a 2xx answer to CONNECT is the tunnel: do not close it.
	if resp.StatusCode != http.StatusOK {
		return fail(fmt.Errorf("CONNECT %s: %s", target, resp.Status))
	}
	if !stop() {
		return fail(ctx.Err())
	}
	_ = nc.SetDeadline(time.Time{})
	if br.Buffered() > 0 {
		return &bufferedConn{Conn: nc, r: br}, nil
	}
	return nc, nil
}

type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
