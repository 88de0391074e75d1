package session

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/transport/internal/wire"
	"github.com/canopy-dev/canopy/relay/transport/join"
	"github.com/canopy-dev/canopy/relay/transport/link"
	"github.com/canopy-dev/canopy/test/poll"
)

// A child authenticated as edge-1 cannot open the mailbox of edge-2 by
// claiming its name: the parent answers with an error and serves nothing.
func TestChildCannotReadAnotherMailbox(t *testing.T) {
	root := startRoot(t)
	send(t, root.st, "edge-2", "secret", "for edge-2 only")
	dataDir := t.TempDir()
	_, stop := startEdge(t, root.addr, dataDir, root.token, newStore(t))
	waitConnected(t, root, "edge-1")
	stop()

	cert, rootCert, err := pki.LoadChildIdentity(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	d := &link.Dialer{TLS: pki.LinkClientTLS(&cert, rootCert, join.ServerNameOf(root.addr)), Mode: link.ModeQUICOnly}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := d.Dial(ctx, []string{root.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close("test")
	control, err := conn.OpenStream(ctx, link.StreamControl)
	if err != nil {
		t.Fatal(err)
	}
	w := wire.NewWriter(control, nil)
	if err := w.Send(&wire.Hello{Name: "edge-2", Role: wire.RoleEdge, Versions: []uint32{wire.ProtocolVersion}}); err != nil {
		t.Fatal(err)
	}
	m, err := wire.NewReader(control, nil).Read()
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	e, ok := m.(*wire.Error)
	if !ok || e.Code != wire.CodePermissionDenied {
		t.Fatalf("answer to a Hello naming another child: %#v, want a permission-denied Error", m)
	}
	for _, c := range root.down.Children() {
		if c.Identity.Name == "edge-2" {
			t.Fatal("the parent created state for edge-2 on edge-1's link")
		}
	}
}

// connectProxy is a minimal HTTP CONNECT proxy that counts tunnels.
type connectProxy struct{ tunnels atomic.Int64 }

func (p *connectProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
		return
	}
	up, err := net.Dial("tcp", r.Host)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	hj, _ := w.(http.Hijacker)
	w.WriteHeader(http.StatusOK)
	down, buf, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	p.tunnels.Add(1)
	go func() { _, _ = io.Copy(up, buf); up.Close() }()
	_, _ = io.Copy(down, up)
	down.Close()
}

// With a proxy configured the link runs over TLS/TCP through it, and the
// protocol above is the same.
func TestLinkThroughConnectProxy(t *testing.T) {
	root := startRoot(t)
	proxy := &connectProxy{}
	ps := httptest.NewServer(proxy)
	t.Cleanup(ps.Close)
	purl, _ := url.Parse(ps.URL)
	send(t, root.st, "edge-1", "cm-1", "v1")

	edgeStore := newStore(t)
	up := NewUplink(UplinkConfig{
		Name: "edge-1", Role: pki.RoleEdge, DataDir: t.TempDir(), Parents: []string{root.addr}, JoinToken: root.token,
		Store: edgeStore, Inbox: "inbox", Outbox: "outbox", Subtree: edgeSubtree("edge-1"), Proxy: purl, Logger: quiet,
		Backoff: link.Backoff{Min: 20 * time.Millisecond, Max: 200 * time.Millisecond},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- up.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	inSync(t, root, "edge-1", edgeStore)
	waitConnected(t, root, "edge-1")
	for _, c := range root.down.Children() {
		if c.Identity.Name == "edge-1" && c.Transport != link.TransportTCP {
			t.Fatalf("transport through the proxy = %q, want tcp", c.Transport)
		}
	}
	if proxy.tunnels.Load() < 2 {
		t.Fatalf("proxy saw %d tunnels, want the join and the session", proxy.tunnels.Load())
	}
}

func waitConnected(t *testing.T, root *rootRelay, name string) {
	t.Helper()
	poll.Until(t, name+" connected", func() error {
		var children []string
		for _, c := range root.down.Children() {
			if c.Identity.Name == name && c.Connected {
				return nil
			}
			children = append(children, c.Identity.String())
		}
		return fmt.Errorf("children: %v", children)
	})
}
