package join

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/transport/link"
)

// parent is a relay accepting links: the root (serving certificate) or a
// region (its relay certificate).
type parent struct {
	auth *Authority
	ln   *link.Listener
	// joined receives the identity certified by each join, authed the
	// identity of each child that came back with its certificate.
	joined chan pki.Identity
	authed chan pki.Identity
	errs   chan error
}

func startParent(t *testing.T, auth *Authority, cert tls.Certificate) *parent {
	t.Helper()
	ln, err := link.Listen(link.ListenConfig{TLS: pki.LinkServerTLS(cert, auth.Root), Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	p := &parent{auth: auth, ln: ln, joined: make(chan pki.Identity, 4), authed: make(chan pki.Identity, 4), errs: make(chan error, 4)}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for {
			conn, err := ln.Accept(ctx)
			if err != nil {
				return
			}
			go p.handle(ctx, conn)
		}
	}()
	return p
}

func (p *parent) handle(ctx context.Context, conn link.Conn) {
	defer conn.Close("done")
	if id, ok := pki.PeerIdentity(conn.ConnectionState()); ok {
		p.authed <- id
		return
	}
	st, kind, err := conn.AcceptStream(ctx)
	if err != nil || kind != link.StreamControl {
		p.errs <- err
		return
	}
	defer st.Close()
	id, err := p.auth.Serve(context.Background(), st)
	// Let the answer reach the child before the link goes: the child
	// closes it once it has read the answer.
	_ = st.CloseWrite()
	select {
	case <-conn.Done():
	case <-time.After(5 * time.Second):
	}
	if err != nil {
		p.errs <- err
		return
	}
	p.joined <- id
}

func dial(t *testing.T, addr string, cfg *tls.Config) link.Conn {
	t.Helper()
	d := &link.Dialer{TLS: cfg, Mode: link.ModeQUICOnly}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := d.Dial(ctx, []string{addr})
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = conn.Close("test done") })
	return conn
}

// joinAs joins dataDir as name/role through p and returns the saved
// identity, reconnecting with it to show the parent recognizes it.
func joinAs(t *testing.T, p *parent, dataDir, name string, role pki.ChildRole, token string) (tls.Certificate, pki.Identity) {
	t.Helper()
	addr := p.ln.Addr().String()
	conn := dial(t, addr, ClientTLS(ServerNameOf(addr)))
	req := Request{Name: name, Role: role, Token: token, ServerName: ServerNameOf(addr)}
	if err := Join(context.Background(), conn, dataDir, req); err != nil {
		t.Fatalf("join %s: %v", name, err)
	}
	_ = conn.Close("joined")
	id := <-p.joined
	cert, root, err := pki.LoadChildIdentity(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	// Second contact: mutually authenticated with the new certificate.
	dial(t, addr, pki.LinkClientTLS(&cert, root, ServerNameOf(addr)))
	select {
	case got := <-p.authed:
		if got.String() != id.String() {
			t.Fatalf("parent saw %s on reconnect, certified %s", got, id)
		}
	case err := <-p.errs:
		t.Fatalf("reconnect: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("parent never saw the authenticated reconnect")
	}
	return cert, id
}

func newRoot(t *testing.T) (*pki.CA, tls.Certificate) {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.EnsureServing(dir, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	return ca, serving
}

// A region joins the root, then an edge joins the region with the same
// token: certificates chain to the root and carry the path.
func TestJoinAtDepthTwo(t *testing.T) {
	rootCA, serving := newRoot(t)
	token, err := pki.IssueJoinToken(rootCA, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	root := startParent(t, &Authority{CA: rootCA, Root: rootCA.Cert, Path: []string{"root"}}, serving)

	regionDir := t.TempDir()
	regionCert, regionID := joinAs(t, root, regionDir, "region-a", pki.RoleRegion, token)
	if regionID.String() != "root/region-a" || regionID.Role != pki.RoleRegion {
		t.Fatalf("region identity %v", regionID)
	}
	regionCA, err := pki.LoadChildCA(regionDir)
	if err != nil {
		t.Fatal(err)
	}
	region := startParent(t, &Authority{CA: regionCA, Root: rootCA.Cert, Path: regionID.Path}, regionCert)
	_, edgeID := joinAs(t, region, t.TempDir(), "edge-1", pki.RoleEdge, token)
	if edgeID.String() != "root/region-a/edge-1" || edgeID.Role != pki.RoleEdge {
		t.Fatalf("edge identity %v", edgeID)
	}
}

// A join asks with the key the data directory keeps (pki.JoinKey): one
// that a join whose answer was lost left there is asked with again, and
// is the key of the identity saved.
func TestJoinKeepsItsKey(t *testing.T) {
	rootCA, serving := newRoot(t)
	token, err := pki.IssueJoinToken(rootCA, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	root := startParent(t, &Authority{CA: rootCA, Root: rootCA.Cert, Path: []string{"root"}}, serving)
	dir := t.TempDir()
	left, err := pki.JoinKey(dir) // as a join that got no answer leaves it
	if err != nil {
		t.Fatal(err)
	}
	if again, err := pki.JoinKey(dir); err != nil || !again.Equal(left) {
		t.Fatalf("JoinKey again: a different key (%v)", err)
	}
	cert, _ := joinAs(t, root, dir, "edge-1", pki.RoleEdge, token)
	if !left.Public().(*ecdsa.PublicKey).Equal(cert.Leaf.PublicKey) {
		t.Fatal("the joined certificate is not for the key the data directory kept")
	}
}

func TestJoinRefusals(t *testing.T) {
	rootCA, serving := newRoot(t)
	root := startParent(t, &Authority{CA: rootCA, Root: rootCA.Cert, Path: []string{"root"}}, serving)
	addr := root.ln.Addr().String()
	otherCA, _ := newRoot(t)

	expired, _ := pki.IssueJoinToken(rootCA, time.Minute, time.Now().Add(-time.Hour))
	foreign, _ := pki.IssueJoinToken(otherCA, time.Hour, time.Now())
	edgeOnly, _ := pki.IssueJoinTokenForRole(rootCA, pki.RoleEdge, time.Hour, time.Now())
	cases := []struct {
		name, token string
		role        pki.ChildRole
		want        error
		wantText    string
	}{
		{"expired", expired, pki.RoleEdge, ErrRefused, "expired"},
		{"forged", foreign, pki.RoleEdge, ErrRefused, "does not verify"},
		{"garbage", "cnp1.nonsense", pki.RoleEdge, ErrRefused, "malformed"},
		{"wrong role", edgeOnly, pki.RoleRegion, ErrRefused, "edge"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			conn := dial(t, addr, ClientTLS(ServerNameOf(addr)))
			err := Join(context.Background(), conn, dir, Request{Name: "x", Role: c.role, Token: c.token, ServerName: ServerNameOf(addr)})
			_ = conn.Close("refused")
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.wantText) {
				t.Fatalf("join: %v, want %v mentioning %q", err, c.want, c.wantText)
			}
			if _, _, err := pki.LoadChildIdentity(dir); err == nil {
				t.Fatal("a refused join left an identity behind")
			}
		})
	}
}

// A parent that is not part of the tree that signed the token is not
// trusted, even if it answers with a certificate.
func TestJoinRejectsImpostorParent(t *testing.T) {
	realCA, _ := newRoot(t)
	token, _ := pki.IssueJoinToken(realCA, time.Hour, time.Now())
	fakeCA, fakeServing := newRoot(t)
	// The impostor signs with its own CA but claims the real root.
	impostor := startParent(t, &Authority{CA: fakeCA, Root: realCA.Cert, Path: []string{"root"}}, fakeServing)
	addr := impostor.ln.Addr().String()
	dir := t.TempDir()
	conn := dial(t, addr, ClientTLS(ServerNameOf(addr)))
	err := Join(context.Background(), conn, dir, Request{Name: "edge-1", Role: pki.RoleEdge, Token: token, ServerName: ServerNameOf(addr)})
	if !errors.Is(err, ErrUntrustedParent) {
		t.Fatalf("join through an impostor: %v, want ErrUntrustedParent", err)
	}
	if _, _, err := pki.LoadChildIdentity(filepath.Clean(dir)); err == nil {
		t.Fatal("an identity from an impostor was saved")
	}
}
