package link

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"
)

func TestQUICOnlyFailsWithoutUDP(t *testing.T) {
	pki := newTestPKI(t)
	ctx := testCtx(t, 10*time.Second)
	l := listenLoopback(t, pki, func(lc *ListenConfig) { lc.DisableQUIC = true })
	if l.Addr().Network() != "tcp" {
		t.Fatalf("Addr %v", l.Addr())
	}
	d := &Dialer{TLS: pki.client, Mode: ModeQUICOnly, QUICTimeout: 300 * time.Millisecond}
	if c, err := d.Dial(ctx, []string{l.TCPAddr().String()}); err == nil {
		_ = c.Close("")
		t.Fatal("QUIC dial succeeded with no UDP served")
	}
}

// blackholeUDP returns a bound UDP socket that reads and drops everything.
func blackholeUDP(t *testing.T) net.PacketConn {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	go func() {
		b := make([]byte, 2048)
		for {
			if _, _, err := pc.ReadFrom(b); err != nil {
				return
			}
		}
	}()
	return pc
}

func TestAutoFallsBackToTCP(t *testing.T) {
	pki := newTestPKI(t)
	ctx := testCtx(t, 10*time.Second)
	// UDP on the port swallows packets; TLS/TCP is served on the same port.
	hole := blackholeUDP(t)
	tl, err := net.Listen("tcp", hole.LocalAddr().String())
	if err != nil {
		t.Skipf("TCP port of the UDP socket is taken: %v", err)
	}
	l := listenLoopback(t, pki, func(lc *ListenConfig) { lc.Addr = ""; lc.TCP = tl })
	addr := hole.LocalAddr().String()
	d := &Dialer{TLS: pki.client, IgnoreProxyEnv: true, QUICTimeout: 300 * time.Millisecond, Config: fastConfig()}
	start := time.Now()
	c, err := d.Dial(ctx, []string{addr})
	if err != nil {
		t.Fatal(err)
	}
	first := time.Since(start)
	defer c.Close("")
	if c.Transport() != TransportTCP || d.Worked(addr) != TransportTCP {
		t.Fatalf("transport %q, remembered %q", c.Transport(), d.Worked(addr))
	}
	p := acceptOne(t, ctx, l)
	go serveEcho(ctx, p, nil)
	echoRoundTrip(t, ctx, c, StreamControl, []byte("hello"))

	// The address is remembered: the second dial skips the QUIC wait.
	start = time.Now()
	c2, err := d.Dial(ctx, []string{addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close("")
	if second := time.Since(start); c2.Transport() != TransportTCP || second >= 300*time.Millisecond {
		t.Fatalf("second dial: %q in %v (first %v)", c2.Transport(), second, first)
	}
}

func TestMultipleAddrsInOrder(t *testing.T) {
	pki := newTestPKI(t)
	ctx := testCtx(t, 10*time.Second)
	l := listenLoopback(t, pki, nil)
	dead := blackholeUDP(t).LocalAddr().String()
	d := &Dialer{TLS: pki.client, Mode: ModeQUICOnly, QUICTimeout: 200 * time.Millisecond}
	c, err := d.Dial(ctx, []string{dead, l.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close("")
	if _, err := d.Dial(ctx, nil); err != ErrNoAddress {
		t.Fatalf("no addrs: %v", err)
	}
}

// connectProxy is an HTTP CONNECT proxy recording the targets asked for.
type connectProxy struct {
	mu      sync.Mutex
	targets []string
}

func (p *connectProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
		return
	}
	p.mu.Lock()
	p.targets = append(p.targets, r.Host)
	p.mu.Unlock()
	up, err := net.Dial("tcp", r.Host)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer up.Close()
	w.WriteHeader(http.StatusOK)
	down, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer down.Close()
	if n := buf.Reader.Buffered(); n > 0 {
		b, _ := buf.Reader.Peek(n)
		_, _ = up.Write(b)
	}
	go func() { _, _ = io.Copy(up, down); _ = up.(*net.TCPConn).CloseWrite() }()
	_, _ = io.Copy(down, up)
}

func (p *connectProxy) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.targets...)
}

func startProxy(t *testing.T) (*connectProxy, *url.URL) {
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &connectProxy{}
	srv := &http.Server{Handler: p}
	go func() { _ = srv.Serve(pl) }()
	t.Cleanup(func() { _ = srv.Close() })
	return p, &url.URL{Scheme: "http", Host: pl.Addr().String()}
}

func TestThroughCONNECTProxy(t *testing.T) {
	pki := newTestPKI(t)
	ctx := testCtx(t, 10*time.Second)
	l := listenLoopback(t, pki, nil) // QUIC would work: the proxy wins
	proxy, u := startProxy(t)
	d := &Dialer{TLS: pki.client, Proxy: u, Config: fastConfig()}
	target := l.Addr().String()
	c, err := d.Dial(ctx, []string{target})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close("")
	if c.Transport() != TransportTCP {
		t.Fatalf("transport %q", c.Transport())
	}
	if got := proxy.seen(); len(got) != 1 || got[0] != target {
		t.Fatalf("proxy saw %v, want [%s]", got, target)
	}
	p := acceptOne(t, ctx, l)
	if cn := p.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "child" {
		t.Fatalf("peer %q", cn)
	}
	go serveEcho(ctx, p, nil)
	echoRoundTrip(t, ctx, c, StreamUpsync, randomBytes(256<<10))

	// A proxy refusing the tunnel is an error, not a hang.
	bad := &Dialer{TLS: pki.client, Mode: ModeTCPOnly, Proxy: u}
	if _, err := bad.Dial(ctx, []string{"127.0.0.1:1"}); err == nil {
		t.Fatal("tunnel to a closed port succeeded")
	}
}

func TestProxyFromEnvironment(t *testing.T) {
	t.Setenv("HTTPS_PROXY", "http://proxy.example:3128")
	t.Setenv("https_proxy", "")
	t.Setenv("NO_PROXY", "direct.example")
	t.Setenv("no_proxy", "")
	d := &Dialer{}
	for addr, want := range map[string]string{
		"parent.example:443": "http://proxy.example:3128",
		"direct.example:443": "",
		"127.0.0.1:443":      "", // never for loopback
	} {
		u, err := d.proxyFor(addr)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if u != nil {
			got = u.String()
		}
		if got != want {
			t.Errorf("proxy for %s = %q, want %q", addr, got, want)
		}
	}
	d.IgnoreProxyEnv = true
	if u, _ := d.proxyFor("parent.example:443"); u != nil {
		t.Errorf("IgnoreProxyEnv: %v", u)
	}
}
