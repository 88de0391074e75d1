// Package join runs the first contact between a new child relay and its
// parent: the child proves it holds a join token, and the parent answers
// with a certificate naming the child, chained to the root CA. The same
// Authority renews a child's certificate later (Authority.Renew), for the
// key it joined with.
//
// It owns the join exchange on the control stream of a link, the child's
// after-the-fact verification of its parent, and what a parent signs for
// its children; it must not keep state of its own (identities are files in
// the child's data directory, written by relay/pki) nor run the sync
// streams that follow (relay/transport/session carries renewals).
//
// A joining child has no root certificate yet, so it cannot verify its
// parent during the TLS handshake. It verifies it afterwards: the root
// certificate in the answer must be the one whose key signed the child's
// join token (which only the real root can have produced), and the chain
// the parent presented during the handshake must belong to that root. A
// man in the middle without a certificate of the tree fails that check,
// and the child discards what it received.
package join

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/transport/internal/wire"
	"github.com/canopy-dev/canopy/relay/transport/link"
)

// Sentinel errors.
var (
	// ErrRefused: the parent refused the join; the error text says why.
	ErrRefused = errors.New("join: refused by the parent")
	// ErrUntrustedParent: the parent could not be verified against the
	// root that signed the join token.
	ErrUntrustedParent = errors.New("join: parent not verified")
	// ErrProtocol: the peer did not follow the join exchange.
	ErrProtocol = errors.New("join: protocol error")
)

// Registration is what a parent asks the root to record (relay/transport/registry):
// a relay that joins, before the parent signs its certificate, or a relay
// with a certificate that linked to it.
type Registration struct {
	// Join: the relay asks to join with Token; otherwise it linked with
	// its certificate.
	Join bool
	Name string
	Role pki.ChildRole
	// Path runs from the root's name to the relay's own.
	Path []string
	// PublicKey is the relay's public key, PKIX: of its certificate
	// request (a join) or of its certificate (a link).
	PublicKey []byte
	// Token is the join token (a join).
	Token string
	// ProofTime and Proof are the relay's link proof (a link:
	// pki.SignLinkProof of Path at ProofTime), which the root requires to
	// record a new home.
	ProofTime int64
	Proof     []byte
}

// Registrar records registrations at the root: the root's registry, or a
// region's link to its parent, which forwards them. Register returns the
// relay's generation (relay/transport/registry), or why it was refused.
type Registrar interface {
	Register(ctx context.Context, r Registration) (int64, error)
}

// Authority answers joining children on behalf of one relay: the root, or a
// region holding an intermediate CA. Its methods are safe for concurrent
// use.
type Authority struct {
	// CA signs the children's certificates; SetCA replaces it (a region
	// whose own certificate was renewed).
	CA *pki.CA
	// Validity is how long the certificates it signs are valid, never past
	// CA's expiry (zero: pki.ChildCertValidity).
	Validity time.Duration
	// Root is the tree's root CA certificate; join tokens must verify
	// against it.
	Root *x509.Certificate
	// Path is this relay's path from the root (["root"] at the root).
	Path []string
	// Registrar, when set, must record a joining child's name before the
	// Authority signs its certificate: a name already joined is refused
	// there. Nil signs without asking (tests of the exchange alone).
	Registrar Registrar
	// Now is the clock (nil: time.Now).
	Now func() time.Time

	mu sync.RWMutex // guards CA after construction
}

// SetCA makes ca the CA that signs from now on: a region's intermediate CA
// with its renewed certificate (the same key).
func (a *Authority) SetCA(ca *pki.CA) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.CA = ca
}

func (a *Authority) issuer() *pki.CA {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.CA
}

func (a *Authority) validity() time.Duration { return cmp.Or(a.Validity, pki.ChildCertValidity) }

// Renew issues a new certificate to the child whose current certificate
// is cur (verified by its link's handshake) from csrPEM, a request made
// with the same key, for the same name and path (pki.CA.RenewChild), and
// returns it with the intermediates the child presents. The caller checks
// first that the root still records the child with that key.
func (a *Authority) Renew(cur *x509.Certificate, csrPEM []byte) ([]byte, error) {
	return a.issuer().RenewChild(cur, csrPEM, a.Path, a.validity())
}

func (a *Authority) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// Serve handles the control stream of a child that connected without a
// certificate: it reads Hello and JoinRequest and answers with a
// JoinResponse, carrying either the child's certificate chain and the root
// certificate, or the reason for refusal. It returns the identity it
// certified. The caller should then half-close the stream and leave the
// link open until the child closes it, so that the answer is delivered.
func (a *Authority) Serve(ctx context.Context, rw io.ReadWriter) (pki.Identity, error) {
	r, w := wire.NewReader(rw, nil), wire.NewWriter(rw, nil)
	hello, err := readAs[*wire.Hello](r)
	if err != nil {
		return pki.Identity{}, err
	}
	req, err := readAs[*wire.JoinRequest](r)
	if err != nil {
		return pki.Identity{}, err
	}
	id, chain, err := a.certify(ctx, hello, req)
	if err != nil {
		// The refusal goes to the child verbatim: it is what its
		// operator needs to read.
		_ = w.Send(&wire.JoinResponse{Error: err.Error()})
		return pki.Identity{}, err
	}
	rootPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.Root.Raw})
	if err := w.Send(&wire.JoinResponse{Chain: chain, CA: rootPEM}); err != nil {
		return pki.Identity{}, err
	}
	return id, nil
}

func (a *Authority) certify(ctx context.Context, hello *wire.Hello, req *wire.JoinRequest) (pki.Identity, []byte, error) {
	role, err := childRole(hello.Role)
	if err != nil {
		return pki.Identity{}, nil, err
	}
	claims, err := pki.VerifyJoinToken(a.Root, req.Token, a.now())
	if err != nil {
		return pki.Identity{}, nil, err
	}
	if !claims.Allows(role) {
		return pki.Identity{}, nil, fmt.Errorf("join token is for %s relays, not %s", claims.Role, role)
	}
	name, err := pki.CSRName(req.CSR)
	if err != nil {
		return pki.Identity{}, nil, err
	}
	if name != hello.Name {
		return pki.Identity{}, nil, fmt.Errorf("certificate request names %q but the relay says it is %q", name, hello.Name)
	}
	if !claims.AllowsName(name) {
		return pki.Identity{}, nil, fmt.Errorf("join token %s does not allow the name %q", claims.ID, name)
	}
	path := append(append([]string(nil), a.Path...), name)
	if a.Registrar != nil {
		key, err := pki.CSRPublicKey(req.CSR)
		if err != nil {
			return pki.Identity{}, nil, err
		}
		if err := a.register(ctx, Registration{Join: true, Name: name, Role: role, Path: path, PublicKey: key, Token: req.Token}); err != nil {
			return pki.Identity{}, nil, err
		}
	}
	chain, err := a.issuer().SignChild(req.CSR, role, a.Path, a.validity())
	if err != nil {
		return pki.Identity{}, nil, err
	}
	return pki.Identity{Name: name, Role: role, Path: path}, chain, nil
}

// registerRetry is how long the Authority waits before asking its
// Registrar again after a transient failure (the root changing leader, a
// region's link to its parent coming back).
const registerRetry = 200 * time.Millisecond

// register has the Registrar record r, again after transient failures,
// until it is recorded, refused (an error matching ErrRefused) or ctx
// ends.
func (a *Authority) register(ctx context.Context, r Registration) error {
	for {
		_, err := a.Registrar.Register(ctx, r)
		if err == nil || errors.Is(err, ErrRefused) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the root did not record the join in time: %w", err)
		case <-time.After(registerRetry):
		}
	}
}

// Request is what a child asks for.
type Request struct {
	Name  string
	Role  pki.ChildRole
	Token string
	// ServerName is the host the child dialed, to check the root's
	// serving certificate against when the parent is the root.
	ServerName string
}

// ClientTLS is the TLS configuration of a joining dial: no client
// certificate, and no verification during the handshake (the parent is
// verified by Join once the root certificate is known).
func ClientTLS(serverName string) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		NextProtos:         []string{pki.LinkALPN},
		ServerName:         serverName,
		InsecureSkipVerify: true, // verified after the exchange; see the package doc
	}
}

// Join runs the child side on conn, a link dialed with ClientTLS, asking
// with the key dataDir keeps (pki.JoinKey), and saves the resulting
// identity in dataDir. It closes nothing: the caller
// drops conn and dials again with its new certificate.
func Join(ctx context.Context, conn link.Conn, dataDir string, req Request) error {
	key, err := pki.JoinKey(dataDir)
	if err != nil {
		return err
	}
	csr, err := pki.NewCSR(key, req.Name)
	if err != nil {
		return err
	}
	st, err := conn.OpenStream(ctx, link.StreamControl)
	if err != nil {
		return err
	}
	defer st.Close()
	stop := context.AfterFunc(ctx, func() { _ = st.Close() })
	defer stop()
	w := wire.NewWriter(st, nil)
	if err := w.Write(&wire.Hello{Name: req.Name, Role: wireRole(req.Role), Versions: []uint32{wire.ProtocolVersion}}); err != nil {
		return err
	}
	if err := w.Send(&wire.JoinRequest{Token: req.Token, CSR: csr}); err != nil {
		return err
	}
	resp, err := readAs[*wire.JoinResponse](wire.NewReader(st, nil))
	if err != nil {
		return err
	}
	if resp.Error != "" {
		return fmt.Errorf("%w: %s", ErrRefused, resp.Error)
	}
	root, err := parseRoot(resp.CA)
	if err != nil {
		return err
	}
	// The root that signed our token is the one we trust; the parent we
	// talked to must be part of its tree.
	if _, err := pki.VerifyJoinToken(root, req.Token, time.Now()); err != nil {
		return fmt.Errorf("%w: the root certificate it sent did not sign the join token: %v", ErrUntrustedParent, err)
	}
	if err := pki.VerifyParent(root, conn.ConnectionState().PeerCertificates, req.ServerName); err != nil {
		return fmt.Errorf("%w: %v", ErrUntrustedParent, err)
	}
	keyPEM, err := pki.EncodeKeyPEM(key)
	if err != nil {
		return err
	}
	return pki.SaveChildIdentity(dataDir, keyPEM, resp.Chain, resp.CA)
}

// ServerNameOf is the host part of a parent address, for Request.ServerName.
func ServerNameOf(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return host
}

func parseRoot(rootPEM []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(rootPEM)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%w: no root certificate in the answer", ErrProtocol)
	}
	root, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: root certificate: %v", ErrProtocol, err)
	}
	if !root.IsCA || root.CheckSignatureFrom(root) != nil {
		return nil, fmt.Errorf("%w: the root certificate is not a self-signed CA", ErrUntrustedParent)
	}
	return root, nil
}

// readAs reads the next frame as a T: a peer's Error frame is a refusal.
func readAs[T wire.Message](r *wire.Reader) (T, error) {
	t, err := wire.Expect[T](r)
	var remote *wire.RemoteError
	switch {
	case errors.As(err, &remote):
		return t, fmt.Errorf("%w: %s", ErrRefused, remote.Message)
	case errors.Is(err, wire.ErrUnexpected):
		return t, fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	return t, err
}

func childRole(r wire.Role) (pki.ChildRole, error) {
	switch r {
	case wire.RoleRegion:
		return pki.RoleRegion, nil
	case wire.RoleEdge:
		return pki.RoleEdge, nil
	}
	return 0, fmt.Errorf("a relay of role %s cannot join", r)
}

func wireRole(r pki.ChildRole) wire.Role {
	switch r {
	case pki.RoleRegion:
		return wire.RoleRegion
	case pki.RoleEdge:
		return wire.RoleEdge
	}
	return wire.RoleUnknown
}
