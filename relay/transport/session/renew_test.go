package session

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/transport/internal/wire"
	"github.com/canopy-dev/canopy/relay/transport/join"
	"github.com/canopy-dev/canopy/relay/transport/link"
	"github.com/canopy-dev/canopy/relay/transport/registry"
	"github.com/canopy-dev/canopy/test/poll"
)

// logRecorder is a slog handler that keeps the text of every record.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, b.String())
	return nil
}

// find returns the first line holding every one of parts.
func (l *logRecorder) find(parts ...string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return line, true
		}
	}
	return "", false
}

// renewingChild is a link opened by hand with a child's certificate, on
// which a test sends Renew requests.
type renewingChild struct {
	r  *wire.Reader
	w  *wire.Writer
	id pki.Identity
}

// linkAs links to the parent at addr with the identity in dataDir, as the
// child's uplink would, up to its streams.
func linkAs(t *testing.T, addr, dataDir string) *renewingChild {
	t.Helper()
	cert, root, err := pki.LoadChildIdentity(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	id, err := pki.IdentityFromCert(cert.Leaf)
	if err != nil {
		t.Fatal(err)
	}
	d := &link.Dialer{TLS: pki.LinkClientTLS(&cert, root, join.ServerNameOf(addr)), Mode: link.ModeQUICOnly}
	t.Cleanup(func() { d.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := d.Dial(ctx, []string{addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close("test over") })
	control, err := conn.OpenStream(ctx, link.StreamControl)
	if err != nil {
		t.Fatal(err)
	}
	c := &renewingChild{r: wire.NewReader(control, nil), w: wire.NewWriter(control, nil), id: id}
	proof := wire.LinkProof{Time: time.Now().UnixNano()}
	if proof.Signature, err = pki.SignLinkProof(cert.PrivateKey.(crypto.Signer), id.Path, proof.Time); err != nil {
		t.Fatal(err)
	}
	if err := c.w.Send(&wire.Hello{Name: id.Name, Role: wireRole(id.Role), Versions: wire.SupportedVersions(), Proof: proof}); err != nil {
		t.Fatal(err)
	}
	welcome, err := wire.Expect[*wire.Welcome](c.r)
	if err != nil {
		t.Fatal(err)
	}
	if welcome.Version < 4 {
		t.Fatalf("the parent chose protocol version %d", welcome.Version)
	}
	for _, kind := range []link.StreamKind{link.StreamDownsync, link.StreamUpsync} {
		if _, err := conn.OpenStream(ctx, kind); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// ask sends a Renew with csr and returns the parent's answer.
func (c *renewingChild) ask(t *testing.T, id uint64, csr []byte) *wire.Renewed {
	t.Helper()
	if err := c.w.Send(&wire.Renew{ID: id, CSR: csr}); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := c.r.Read()
		if err != nil {
			t.Fatalf("waiting for the answer to renewal %d: %v", id, err)
		}
		if a, ok := m.(*wire.Renewed); ok {
			if a.ID != id {
				t.Fatalf("answer %d to renewal %d", a.ID, id)
			}
			return a
		}
	}
}

func csrOf(t *testing.T, key *ecdsa.PrivateKey, name string) []byte {
	t.Helper()
	csr, err := pki.NewCSR(key, name)
	if err != nil {
		t.Fatal(err)
	}
	return csr
}

// A child renews only its own certificate, with its own key: a request
// for another name, or made with another key, is refused, logged with the
// reason and counted at the parent, and so is one made after the root
// re-keyed the name; its own request is renewed for the same key.
func TestRenewalRefusals(t *testing.T) {
	logs := &logRecorder{}
	root := startRegisteredRoot(t, func(cfg *DownlinkConfig) { cfg.Logger = slog.New(logs) })
	dataDir := t.TempDir()
	_, stop := startEdge(t, root.addr, dataDir, root.token, newStore(t))
	connected := func() bool {
		for _, c := range root.down.Children() {
			if c.Identity.Name == "edge-1" && c.Connected {
				return true
			}
		}
		return false
	}
	poll.True(t, "edge-1 linked", connected)
	stop()
	cur, _, err := pki.LoadChildIdentity(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	own := cur.PrivateKey.(*ecdsa.PrivateKey)
	stranger, err := pki.NewChildKey()
	if err != nil {
		t.Fatal(err)
	}
	c := linkAs(t, root.addr, dataDir)

	refused := func(id uint64, csr []byte, reason string) {
		t.Helper()
		a := c.ask(t, id, csr)
		if a.Code != wire.CodePermissionDenied || len(a.Chain) > 0 || !strings.Contains(a.Message, reason) {
			t.Fatalf("renewal %d: code %s, %d bytes of chain, %q; want refused: %q", id, a.Code, len(a.Chain), a.Message, reason)
		}
		poll.Until(t, "the refusal logged", func() error {
			if _, ok := logs.find("WARN refusing a certificate renewal", "path=root/edge-1", reason); !ok {
				return errors.New("no log line")
			}
			return nil
		})
	}
	refused(1, csrOf(t, stranger, "edge-1"), "not made with the key of its certificate")
	refused(2, csrOf(t, own, "edge-2"), `the certificate request names "edge-2", the certificate "edge-1"`)

	a := c.ask(t, 3, csrOf(t, own, "edge-1"))
	if a.Code != 0 {
		t.Fatalf("renewal of its own certificate refused: %s", a.Message)
	}
	b, _ := pem.Decode(a.Chain)
	if b == nil {
		t.Fatal("no certificate in the answer")
	}
	renewed, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !own.PublicKey.Equal(renewed.PublicKey) || renewed.SerialNumber.Cmp(cur.Leaf.SerialNumber) == 0 || renewed.Subject.String() != cur.Leaf.Subject.String() {
		t.Errorf("renewed: subject %s, serial %v (was %s, %v), same key %v", renewed.Subject, renewed.SerialNumber, cur.Leaf.Subject, cur.Leaf.SerialNumber, own.PublicKey.Equal(renewed.PublicKey))
	}

	// An admin re-keys edge-1 (its data directory was stolen, say): the
	// old key renews nothing from then on, on a link already up.
	tok, claims, err := pki.IssueLimitedJoinToken(root.ca, pki.JoinLimits{Names: []string{"edge-1"}, Rekey: true}, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := registry.RecordToken(context.Background(), root.st, claims); err != nil {
		t.Fatal(err)
	}
	newKey := newEdgeKey(t)
	reg := registry.New(registry.Config{Store: root.st, Root: root.ca.Cert, RootName: "root", Logger: quiet})
	if _, err := reg.Register(context.Background(), join.Registration{Join: true, Name: "edge-1", Role: pki.RoleEdge,
		Path: []string{"root", "edge-1"}, PublicKey: newKey.der, Token: tok}); err != nil {
		t.Fatal(err)
	}
	refused(4, csrOf(t, own, "edge-1"), "not the key the relay joined with")

	if got, want := root.down.renewed.Load(), uint64(1); got != want {
		t.Errorf("%d renewals counted, want %d", got, want)
	}
	if got, want := root.down.renewalsRefused.Load(), uint64(3); got != want {
		t.Errorf("%d refused renewals counted, want %d", got, want)
	}
}
