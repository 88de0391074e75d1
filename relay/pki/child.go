package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Files of a child relay (region or edge) inside [Dir]. CACertFile holds
// the root CA certificate there, not a CA of the child's own.
const (
	ChildKeyFile   = "relay.key"
	ChildChainFile = "relay.crt"
)

// ChildCertValidity is the usual lifetime of a child certificate; it never
// extends past the issuing CA's.
const ChildCertValidity = 365 * 24 * time.Hour

// LinkALPN is the ALPN protocol of links between relays.
const LinkALPN = "canopy-link/1"

// relayURIScheme and relayURIHost make the URI SAN of a relay certificate,
// canopy://relay/<path>.
const (
	relayURIScheme = "canopy"
	relayURIHost   = "relay"
)

const pemCSR = "CERTIFICATE REQUEST"

// ChildRole is the role a relay certificate grants. The zero value is no
// role (in [JoinClaims], any role).
type ChildRole int

const (
	// RoleRegion relays between its parent and its children: its
	// certificate is an intermediate CA that signs its children's.
	RoleRegion ChildRole = iota + 1
	// RoleEdge syncs a cluster and has no children: its certificate is a
	// leaf.
	RoleEdge
)

func (r ChildRole) valid() bool { return r == RoleRegion || r == RoleEdge }

// String returns "region", "edge", or "ChildRole(N)".
func (r ChildRole) String() string {
	switch r {
	case RoleRegion:
		return "region"
	case RoleEdge:
		return "edge"
	}
	return fmt.Sprintf("ChildRole(%d)", int(r))
}

// ParseChildRole parses "region" or "edge".
func ParseChildRole(s string) (ChildRole, error) {
	switch s {
	case "region":
		return RoleRegion, nil
	case "edge":
		return RoleEdge, nil
	}
	return 0, fmt.Errorf("pki: unknown relay role %q: want region or edge", s)
}

// Identity is what a relay certificate says about its holder.
type Identity struct {
	// Name is the relay's name, a DNS label; it is Path's last element.
	Name string
	Role ChildRole
	// Path runs from the root relay's name to Name: [root region-a edge-1].
	Path []string
}

// String returns the path joined with "/", as in root/region-a/edge-1.
func (id Identity) String() string { return strings.Join(id.Path, "/") }

// Contains reports whether path is id's own path or a path below it: what a
// parent checks before accepting a report about path from the child id.
func (id Identity) Contains(path []string) bool {
	return len(id.Path) > 0 && len(path) >= len(id.Path) && slices.Equal(path[:len(id.Path)], id.Path)
}

// relayURI returns the URI SAN of the relay at path.
func relayURI(path []string) *url.URL {
	return &url.URL{Scheme: relayURIScheme, Host: relayURIHost, Path: "/" + strings.Join(path, "/")}
}

// checkPath checks that every element of path is a DNS label.
func checkPath(path []string) error {
	for _, name := range path {
		if len(validation.IsDNS1123Label(name)) > 0 {
			return fmt.Errorf("relay name %q is not a DNS label", name)
		}
	}
	return nil
}

// NewChildKey returns a new ECDSA P-256 key for a joining relay.
func NewChildKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

// JoinKey returns the key a relay joins with: the one in DIR/pki/relay.key
// if a join left it there, else a new one, written there (0600) before it
// is used. A relay whose join was answered, but whose answer was lost, so
// asks again with the same key, which the root answers as the same join;
// with a new key it would be refused for good (the name is joined).
func JoinKey(dataDir string) (*ecdsa.PrivateKey, error) {
	path := filepath.Join(Dir(dataDir), ChildKeyFile)
	data, err := readFile(path)
	switch {
	case err == nil:
		key, err := parseECKeyPEM(data)
		if err != nil {
			return nil, fmt.Errorf("%w (in %s)", err, path)
		}
		return key, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	key, err := NewChildKey()
	if err != nil {
		return nil, err
	}
	data, err = encodeKey(key)
	if err != nil {
		return nil, err
	}
	if err := writeFileAtomic(path, data, 0o600); err != nil {
		return nil, err
	}
	return key, nil
}

// EncodeKeyPEM returns key as PKCS#8 PEM, as [SaveChildIdentity] and
// [LoadCAFromPEM] take it.
func EncodeKeyPEM(key *ecdsa.PrivateKey) ([]byte, error) { return encodeKey(key) }

// NewCSR returns a PEM certificate request by key for the relay name (a
// DNS label). It only carries the name and proves possession of the key:
// the parent decides everything else in the certificate.
func NewCSR(key *ecdsa.PrivateKey, name string) ([]byte, error) {
	if err := checkPath([]string{name}); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: name},
	}, key)
	if err != nil {
		return nil, fmt.Errorf("pki: create certificate request: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemCSR, Bytes: der}), nil
}

// parseCSR decodes a PEM certificate request, checks its signature and key
// (ECDSA P-256) and returns it with its name.
func parseCSR(csrPEM []byte) (*x509.CertificateRequest, string, error) {
	b, _ := pem.Decode(csrPEM)
	if b == nil || b.Type != pemCSR {
		return nil, "", errors.New("pki: no CERTIFICATE REQUEST PEM block")
	}
	csr, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		return nil, "", fmt.Errorf("pki: certificate request: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, "", fmt.Errorf("pki: certificate request: %w", err)
	}
	if pub, ok := csr.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		return nil, "", errors.New("pki: certificate request: not an ECDSA P-256 key")
	}
	name := csr.Subject.CommonName
	if err := checkPath([]string{name}); err != nil {
		return nil, "", fmt.Errorf("pki: certificate request: %w", err)
	}
	return csr, name, nil
}

// CSRName returns the relay name that a certificate request asks for, after
// checking the request's signature. A parent compares it with the name the
// joining child claims before calling [CA.SignChild].
func CSRName(csrPEM []byte) (string, error) {
	_, name, err := parseCSR(csrPEM)
	return name, err
}

// SignChild issues the certificate of a child relay from csrPEM (see
// [NewCSR]) and returns it, PEM encoded, followed by the intermediates
// between ca and the root (none when ca is the root): the chain the child
// presents on its links.
//
// parentPath is the path of the relay that signs: at the root, its name
// alone ([root]); at a region it must equal the region's own path (ca is
// then the region's certificate, see [LoadCAFromPEM]). The child's path is
// parentPath plus the CSR's name, which is also the certificate's CN.
// Nothing else in the CSR is used: requested extensions, SANs or CA status
// are ignored. The certificate carries:
//
//   - Subject CN=name, OU=role ("region" or "edge"), and one URI SAN
//     canopy://relay/<path>, e.g. canopy://relay/root/region-a/edge-1.
//   - RoleRegion: one certificate that is both an intermediate CA (key usage
//     CertSign, so the region signs its own children without the root) and
//     the region's TLS identity (DigitalSignature, extended key usage
//     ServerAuth and ClientAuth). Name constraints confine what it signs to
//     relay identities: URI SANs under canopy://relay only, no DNS name (but
//     under .invalid), IP address or e-mail address, so a region cannot
//     issue a server certificate that kubectl or a relay would accept for a
//     host name.
//   - RoleEdge: a leaf, DigitalSignature and ClientAuth only.
//
// It is valid from an hour ago (clock skew) for ttl, but never past ca's
// own expiry; ttl is usually [ChildCertValidity].
func (ca *CA) SignChild(csrPEM []byte, role ChildRole, parentPath []string, ttl time.Duration) (chainPEM []byte, err error) {
	if !role.valid() {
		return nil, fmt.Errorf("pki: sign child: unknown role %d", int(role))
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("pki: child certificate TTL %s is not positive", ttl)
	}
	if len(parentPath) == 0 {
		return nil, errors.New("pki: sign child: empty parent path")
	}
	if err := checkPath(parentPath); err != nil {
		return nil, fmt.Errorf("pki: sign child: parent path: %w", err)
	}
	if !ca.Cert.IsCA || ca.Cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, errors.New("pki: sign child: this certificate is not a CA")
	}
	if isRoot(ca.Cert) {
		if len(parentPath) != 1 {
			return nil, fmt.Errorf("pki: sign child: the root CA signs for children of the root, not of %s", strings.Join(parentPath, "/"))
		}
	} else {
		own, err := IdentityFromCert(ca.Cert)
		if err != nil {
			return nil, fmt.Errorf("pki: sign child: %w", err)
		}
		if !slices.Equal(own.Path, parentPath) {
			return nil, fmt.Errorf("pki: sign child: this CA is %s, not %s", own, strings.Join(parentPath, "/"))
		}
	}
	csr, name, err := parseCSR(csrPEM)
	if err != nil {
		return nil, err
	}
	path := append(slices.Clone(parentPath), name)

	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name, OrganizationalUnit: []string{role.String()}},
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     now.Add(ttl),
		URIs:         []*url.URL{relayURI(path)},
	}
	if tmpl.NotAfter.After(ca.Cert.NotAfter) {
		tmpl.NotAfter = ca.Cert.NotAfter
	}
	switch role {
	case RoleRegion:
		tmpl.BasicConstraintsValid = true
		tmpl.IsCA = true
		tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		tmpl.PermittedDNSDomainsCritical = true
		tmpl.PermittedURIDomains = []string{relayURIHost}
		tmpl.PermittedDNSDomains = []string{"invalid"}
		tmpl.PermittedEmailAddresses = []string{"invalid"}
		tmpl.ExcludedIPRanges = []*net.IPNet{
			{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)},
			{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)},
		}
	case RoleEdge:
		tmpl.BasicConstraintsValid = true
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, csr.PublicKey, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("pki: issue certificate for %s: %w", relayURI(path), err)
	}
	chain := encodeCert(der)
	if !isRoot(ca.Cert) {
		// An intermediate's CertPEM is its own chain, itself first.
		chain = append(chain, ca.CertPEM...)
	}
	return chain, nil
}

// LoadCAFromPEM returns the CA whose certificate is the first in certPEM and
// whose key is keyPEM (PKCS#8 ECDSA P-256). A region loads its intermediate
// CA from its relay.crt and relay.key this way ([LoadChildCA]); certPEM may
// then hold the whole chain, which the returned CA keeps in CertPEM so that
// [CA.SignChild] can append it. The certificate must be a CA, match the key
// and not be expired.
func LoadCAFromPEM(certPEM, keyPEM []byte) (*CA, error) {
	certs, err := parseCertsPEM(certPEM)
	if err != nil {
		return nil, err
	}
	key, err := parseECKeyPEM(keyPEM)
	if err != nil {
		return nil, err
	}
	cert := certs[0]
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("pki: CA key does not match the CA certificate")
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("pki: certificate %q is not a CA certificate", cert.Subject.CommonName)
	}
	if time.Now().After(cert.NotAfter) {
		return nil, fmt.Errorf("pki: CA %q expired on %s", cert.Subject.CommonName, cert.NotAfter.Format(time.RFC3339))
	}
	var out []byte
	for _, c := range certs {
		out = append(out, encodeCert(c.Raw)...)
	}
	return &CA{Cert: cert, Key: key, CertPEM: out}, nil
}

// IdentityFromCert returns the relay identity that cert states (see
// [CA.SignChild] for the encoding), checking it is well formed: one
// canopy://relay URI whose last path element is the CN, an OU naming the
// role, and CA status matching the role. It does not verify the
// certificate: see [VerifyChain].
func IdentityFromCert(cert *x509.Certificate) (Identity, error) {
	var uris []*url.URL
	for _, u := range cert.URIs {
		if u.Scheme == relayURIScheme {
			uris = append(uris, u)
		}
	}
	if len(uris) != 1 {
		return Identity{}, fmt.Errorf("pki: certificate %q has %d relay URIs, want 1", cert.Subject.CommonName, len(uris))
	}
	u := uris[0]
	if u.Host != relayURIHost || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" || !strings.HasPrefix(u.Path, "/") {
		return Identity{}, fmt.Errorf("pki: certificate %q: malformed relay URI %s", cert.Subject.CommonName, u)
	}
	path := strings.Split(u.Path[1:], "/")
	if len(path) < 2 {
		return Identity{}, fmt.Errorf("pki: certificate %q: relay URI %s names no parent", cert.Subject.CommonName, u)
	}
	if err := checkPath(path); err != nil {
		return Identity{}, fmt.Errorf("pki: certificate %q: %w", cert.Subject.CommonName, err)
	}
	name := path[len(path)-1]
	if cert.Subject.CommonName != name {
		return Identity{}, fmt.Errorf("pki: certificate CN %q does not match its relay URI %s", cert.Subject.CommonName, u)
	}
	if len(cert.Subject.OrganizationalUnit) != 1 {
		return Identity{}, fmt.Errorf("pki: certificate %q names no relay role", name)
	}
	role, err := ParseChildRole(cert.Subject.OrganizationalUnit[0])
	if err != nil {
		return Identity{}, fmt.Errorf("pki: certificate %q: %w", name, err)
	}
	if (role == RoleRegion) != cert.IsCA {
		return Identity{}, fmt.Errorf("pki: certificate %q: role %s does not match its CA status", name, role)
	}
	return Identity{Name: name, Role: role, Path: path}, nil
}

// VerifyChain verifies a relay certificate chain as presented on a link,
// leaf first and then its intermediates (the root may follow; it is
// ignored), against the root CA certificate root, and returns the leaf's
// identity. Besides X.509 validation (signatures, validity, CA constraints,
// name constraints, client-auth usage), every certificate between the
// root and the leaf must be a relay certificate whose path is its issuer's
// path plus its own name, so a region can only certify relays below itself.
func VerifyChain(root *x509.Certificate, chain []*x509.Certificate) (Identity, error) {
	return verifyChain(root, chain, x509.ExtKeyUsageClientAuth, time.Now())
}

func verifyChain(root *x509.Certificate, chain []*x509.Certificate, usage x509.ExtKeyUsage, now time.Time) (Identity, error) {
	if len(chain) == 0 {
		return Identity{}, errors.New("pki: no certificate")
	}
	leaf := chain[0]
	opts := x509.VerifyOptions{
		Roots:         x509.NewCertPool(),
		Intermediates: x509.NewCertPool(),
		KeyUsages:     []x509.ExtKeyUsage{usage},
		CurrentTime:   now,
	}
	opts.Roots.AddCert(root)
	for _, c := range chain[1:] {
		opts.Intermediates.AddCert(c)
	}
	id, err := IdentityFromCert(leaf)
	if err != nil {
		return Identity{}, err
	}
	chains, err := leaf.Verify(opts)
	if err != nil {
		return Identity{}, fmt.Errorf("pki: relay %s: %w", id, err)
	}
	// Any verified chain will do; check the paths along the first that
	// holds.
	var pathErr error
	for _, c := range chains {
		if pathErr = checkChainPaths(c); pathErr == nil {
			return id, nil
		}
	}
	return Identity{}, pathErr
}

// checkChainPaths checks a verified chain (leaf first, root last): each
// certificate below the root is a relay certificate whose path extends its
// issuer's by its own name; those the root issued have paths of length 2.
func checkChainPaths(chain []*x509.Certificate) error {
	var parent []string
	for i := len(chain) - 2; i >= 0; i-- {
		id, err := IdentityFromCert(chain[i])
		if err != nil {
			return err
		}
		if parent == nil {
			if len(id.Path) != 2 {
				return fmt.Errorf("pki: relay %s was issued by the root CA, which certifies only children of the root", id)
			}
		} else if len(id.Path) != len(parent)+1 || !slices.Equal(id.Path[:len(parent)], parent) {
			return fmt.Errorf("pki: relay %s was issued by %s, which may only certify relays right below it", id, strings.Join(parent, "/"))
		}
		parent = id.Path
	}
	return nil
}

// SaveChildIdentity stores what a child relay received when it joined in
// its data directory: keyPEM in DIR/pki/relay.key (0600), the root
// certificate rootPEM in DIR/pki/ca.crt and chainPEM (its certificate and
// intermediates, as [CA.SignChild] returns them) in DIR/pki/relay.crt, last,
// so that relay.crt exists only once the identity is complete. It checks
// first that the key matches the certificate and that the chain verifies
// against the root.
func SaveChildIdentity(dataDir string, keyPEM, chainPEM, rootPEM []byte) error {
	cert, root, err := parseChildIdentity(keyPEM, chainPEM, rootPEM)
	if err != nil {
		return err
	}
	if _, err := VerifyChain(root, certsOf(cert)); err != nil {
		return err
	}
	dir := Dir(dataDir)
	if err := writeFileAtomic(filepath.Join(dir, ChildKeyFile), keyPEM, 0o600); err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, CACertFile), rootPEM, 0o644); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, ChildChainFile), chainPEM, 0o644)
}

// LoadChildIdentity returns the TLS certificate (chain and key, Leaf set)
// and the root CA certificate that [SaveChildIdentity] stored in dataDir.
// If the relay never joined (no DIR/pki/relay.crt) the error matches
// fs.ErrNotExist. The chain is checked against the root; an expired
// certificate is an error that says so.
func LoadChildIdentity(dataDir string) (tls.Certificate, *x509.Certificate, error) {
	dir := Dir(dataDir)
	chainPEM, err := readFile(filepath.Join(dir, ChildChainFile))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return tls.Certificate{}, nil, fmt.Errorf("pki: relay has not joined a tree yet (no %s): %w", filepath.Join(dir, ChildChainFile), fs.ErrNotExist)
		}
		return tls.Certificate{}, nil, err
	}
	keyPEM, err := readFile(filepath.Join(dir, ChildKeyFile))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	rootPEM, err := readFile(filepath.Join(dir, CACertFile))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert, root, err := parseChildIdentity(keyPEM, chainPEM, rootPEM)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("%w (in %s)", err, dir)
	}
	if _, err := VerifyChain(root, certsOf(cert)); err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("%w (in %s)", err, dir)
	}
	return cert, root, nil
}

// LoadChildCA returns the intermediate CA of a region that joined a tree:
// its relay.crt and relay.key read with [LoadCAFromPEM].
func LoadChildCA(dataDir string) (*CA, error) {
	dir := Dir(dataDir)
	chainPEM, err := readFile(filepath.Join(dir, ChildChainFile))
	if err != nil {
		return nil, err
	}
	keyPEM, err := readFile(filepath.Join(dir, ChildKeyFile))
	if err != nil {
		return nil, err
	}
	return LoadCAFromPEM(chainPEM, keyPEM)
}

func parseChildIdentity(keyPEM, chainPEM, rootPEM []byte) (tls.Certificate, *x509.Certificate, error) {
	cert, err := tls.X509KeyPair(chainPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("pki: relay certificate and key: %w", err)
	}
	roots, err := parseCertsPEM(rootPEM)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("pki: root CA: %w", err)
	}
	if len(roots) != 1 || !isRoot(roots[0]) {
		return tls.Certificate{}, nil, errors.New("pki: root CA: want one self-signed certificate")
	}
	return cert, roots[0], nil
}

// certsOf returns the parsed chain of cert, which tls.X509KeyPair built.
func certsOf(cert tls.Certificate) []*x509.Certificate {
	out := []*x509.Certificate{cert.Leaf}
	for _, der := range cert.Certificate[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			continue // X509KeyPair parsed only the leaf; verification will fail
		}
		out = append(out, c)
	}
	return out
}

// parseCertsPEM returns the CERTIFICATE blocks of data, at least one.
func parseCertsPEM(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != pemCertificate {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("pki: %w", err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("pki: no CERTIFICATE PEM block")
	}
	return certs, nil
}

// parseECKeyPEM decodes a PKCS#8 ECDSA P-256 private key.
func parseECKeyPEM(data []byte) (*ecdsa.PrivateKey, error) {
	b, _ := pem.Decode(data)
	if b == nil || b.Type != pemPrivateKey {
		return nil, errors.New("pki: no PRIVATE KEY PEM block")
	}
	key, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("pki: private key: %w", err)
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, errors.New("pki: private key: not an ECDSA P-256 key")
	}
	return ec, nil
}

func readFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	return data, nil
}

// LinkServerTLS returns the TLS configuration of a relay's downlink
// listener, where children dial in: TLS 1.3, ALPN [LinkALPN], cert as the
// relay's identity. A client certificate is optional, since a joining child
// has none yet and may only send a JoinRequest; one that is presented must
// pass [VerifyChain] against root, or the handshake fails. After the
// handshake, [PeerIdentity] says who the child is, or that it is not
// authenticated.
func LinkServerTLS(cert tls.Certificate, root *x509.Certificate) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		NextProtos:   []string{LinkALPN},
		Certificates: []tls.Certificate{cert},
		// Verified by VerifyConnection, which also runs on resumption.
		ClientAuth: tls.RequestClientCert,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return nil
			}
			_, err := VerifyChain(root, cs.PeerCertificates)
			return err
		},
	}
}

// LinkClientTLS returns the TLS configuration of a relay's uplink to its
// parent: TLS 1.3, ALPN [LinkALPN], cert as the client certificate (nil
// while joining). The parent must be either
//
//   - a region: a relay certificate with the server-auth usage that
//     [VerifyChain] accepts against root (region certificates name no host,
//     so serverName is not checked against them), or
//   - the root: a server certificate issued directly by root for
//     serverName, the host the child dialed (the root's serving
//     certificate, see [CA.EnsureServing]).
//
// serverName is also sent as SNI.
func LinkClientTLS(cert *tls.Certificate, root *x509.Certificate, serverName string) *tls.Config {
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{LinkALPN},
		ServerName: serverName,
		// Verified by VerifyConnection: a region's certificate names no
		// host, so the standard host name check cannot apply.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyParent(root, cs.PeerCertificates, serverName)
		},
	}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return cfg
}

// VerifyParent checks the certificate chain a relay's parent presented: a
// region's relay certificate, or the root's serving certificate for
// serverName. A joining child, which could not verify its parent during
// the handshake, calls it once it has learned the root certificate.
func VerifyParent(root *x509.Certificate, chain []*x509.Certificate, serverName string) error {
	return verifyParent(root, chain, serverName)
}

// verifyParent checks the certificate chain of a relay's parent; see
// LinkClientTLS.
func verifyParent(root *x509.Certificate, chain []*x509.Certificate, serverName string) error {
	if len(chain) == 0 {
		return errors.New("pki: parent presented no certificate")
	}
	if _, err := IdentityFromCert(chain[0]); err == nil {
		id, err := verifyChain(root, chain, x509.ExtKeyUsageServerAuth, time.Now())
		if err != nil {
			return err
		}
		if id.Role != RoleRegion {
			return fmt.Errorf("pki: parent %s is an edge relay, which has no children", id)
		}
		return nil
	}
	if serverName == "" {
		return errors.New("pki: no server name to check the root's certificate against")
	}
	opts := x509.VerifyOptions{
		Roots:     x509.NewCertPool(),
		DNSName:   serverName,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		// No intermediates: the root's serving certificate is issued by the
		// root CA itself.
	}
	opts.Roots.AddCert(root)
	if _, err := chain[0].Verify(opts); err != nil {
		return fmt.Errorf("pki: parent certificate: %w", err)
	}
	return nil
}

// PeerIdentity returns the relay identity of the peer of a connection made
// with [LinkServerTLS] or [LinkClientTLS], whose handshake verified it, and
// whether there is one: false for a joining child without a certificate,
// and for a root parent, whose serving certificate names no relay.
func PeerIdentity(cs tls.ConnectionState) (Identity, bool) {
	if len(cs.PeerCertificates) == 0 {
		return Identity{}, false
	}
	id, err := IdentityFromCert(cs.PeerCertificates[0])
	return id, err == nil
}

// KeyID identifies a public key: the SHA-256 of its PKIX (SubjectPublicKeyInfo)
// encoding, lower-case hex. The root records it for every joined relay
// (relay/transport/registry), so that a certificate for a joined name with another
// key is refused.
func KeyID(pub any) (string, error) {
	der, err := PublicKeyDER(pub)
	if err != nil {
		return "", err
	}
	return KeyIDOfDER(der), nil
}

// Link proofs. A relay that links to a parent signs, with its own key, the
// path it links at and the time: the root accepts that a relay moved to
// another parent (relay/transport/registry) only with such a proof, newer than the
// last it accepted, so that no parent on the way (however it got its
// certificate) can move another relay's destination to itself.

// linkProofDomain separates link proofs from anything else the key signs.
const linkProofDomain = "canopy link proof v1\x00"

// linkProofDigest is what a link proof signs.
func linkProofDigest(path []string, unixNano int64) []byte {
	h := sha256.New()
	h.Write([]byte(linkProofDomain))
	h.Write([]byte(strings.Join(path, "/")))
	h.Write([]byte{0})
	h.Write([]byte(strconv.FormatInt(unixNano, 10)))
	return h.Sum(nil)
}

// SignLinkProof signs that the relay holding key links at path (from the
// root's name to its own) at unixNano.
func SignLinkProof(key crypto.Signer, path []string, unixNano int64) ([]byte, error) {
	sig, err := key.Sign(rand.Reader, linkProofDigest(path, unixNano), crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("pki: sign link proof: %w", err)
	}
	return sig, nil
}

// VerifyLinkProof checks a link proof against pubDER, a PKIX public key.
func VerifyLinkProof(pubDER []byte, path []string, unixNano int64, sig []byte) error {
	pub, err := x509.ParsePKIXPublicKey(pubDER)
	if err != nil {
		return fmt.Errorf("pki: link proof: public key: %w", err)
	}
	ec, ok := pub.(*ecdsa.PublicKey)
	if !ok {
		return errors.New("pki: link proof: not an ECDSA key")
	}
	if !ecdsa.VerifyASN1(ec, linkProofDigest(path, unixNano), sig) {
		return errors.New("pki: link proof does not verify")
	}
	return nil
}

// PublicKeyDER returns pub in PKIX form, as [VerifyLinkProof] takes it.
func PublicKeyDER(pub any) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("pki: public key: %w", err)
	}
	return der, nil
}

// CSRPublicKey returns the public key of a certificate request in PKIX
// form, after checking the request's signature.
func CSRPublicKey(csrPEM []byte) ([]byte, error) {
	csr, _, err := parseCSR(csrPEM)
	if err != nil {
		return nil, err
	}
	return PublicKeyDER(csr.PublicKey)
}

// KeyIDOfDER is [KeyID] of a public key in PKIX form.
func KeyIDOfDER(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}
