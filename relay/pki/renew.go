package pki

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Renewal. A child relay's certificate is renewed over its link
// (relay/transport/session): the child sends its parent a certificate
// request made with the key it already holds, and the parent issues a new
// certificate for the same name, role, path and key ([CA.RenewChild]).
// Nothing else changes, so everything that names the relay by its key (the
// root's registry, link proofs) stays valid, and the certificates a region
// issued with its key still verify under its renewed certificate.

// RenewAt returns when the holder of cert asks for a new one: before its
// expiry, or, when before is zero, once two thirds of its lifetime
// (NotBefore to NotAfter) have passed. A third of a year's certificate is
// four months: time for an operator to notice a relay that cannot renew
// (it is cut off, or its parent refuses) long before it drops out of the
// tree; and being relative, the rule fits a certificate cut short by its
// issuer's expiry as well as a short-lived one.
func RenewAt(cert *x509.Certificate, before time.Duration) time.Time {
	if before <= 0 {
		before = cert.NotAfter.Sub(cert.NotBefore) / 3
	}
	return cert.NotAfter.Add(-before)
}

// RenewChild issues a new certificate to the child relay whose current
// certificate is cur (the one it presented on its link, verified by the
// handshake), from csrPEM, a certificate request made with the same key
// ([NewCSR]). The request must name the same relay and carry the same
// public key as cur, and cur must have been issued for a child of
// parentPath, the path of the relay that signs (a relay that re-homed to
// another parent renews where its certificate names it). The new
// certificate is [CA.SignChild]'s for cur's role: same subject, URI SAN
// and key, valid from now for ttl, never past ca's own expiry. It returns
// it with the intermediates, as SignChild does.
func (ca *CA) RenewChild(cur *x509.Certificate, csrPEM []byte, parentPath []string, ttl time.Duration) ([]byte, error) {
	id, err := IdentityFromCert(cur)
	if err != nil {
		return nil, err
	}
	if !slices.Equal(id.Path[:len(id.Path)-1], parentPath) {
		return nil, fmt.Errorf("pki: renew: the certificate of %s was issued under %s; it is renewed there, not by %s",
			id, strings.Join(id.Path[:len(id.Path)-1], "/"), strings.Join(parentPath, "/"))
	}
	csr, name, err := parseCSR(csrPEM)
	if err != nil {
		return nil, err
	}
	if name != id.Name {
		return nil, fmt.Errorf("pki: renew: the certificate request names %q, the certificate %q", name, id.Name)
	}
	if !csr.PublicKey.(*ecdsa.PublicKey).Equal(cur.PublicKey) { // parseCSR checked its type
		return nil, fmt.Errorf("pki: renew: the certificate request of %s is not made with the key of its certificate", id)
	}
	return ca.SignChild(csrPEM, id.Role, parentPath, ttl)
}

// SaveRenewedChain replaces the certificate chain in DIR/pki/relay.crt of
// a child that joined (see [SaveChildIdentity]) with chainPEM, a renewal
// of it, and returns the new TLS certificate (Leaf set). It checks first,
// against the files in dataDir, that chainPEM matches the relay's key,
// verifies against its root, names the same relay (name, role and path)
// and does not expire before the current certificate; the file is
// replaced atomically.
func SaveRenewedChain(dataDir string, chainPEM []byte) (tls.Certificate, error) {
	cur, root, err := LoadChildIdentity(dataDir)
	if err != nil {
		return tls.Certificate{}, err
	}
	dir := Dir(dataDir)
	keyPEM, err := readFile(filepath.Join(dir, ChildKeyFile))
	if err != nil {
		return tls.Certificate{}, err
	}
	cert, err := tls.X509KeyPair(chainPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("pki: renewed certificate and key: %w", err)
	}
	id, err := VerifyChain(root, certsOf(cert))
	if err != nil {
		return tls.Certificate{}, err
	}
	was, err := IdentityFromCert(cur.Leaf)
	if err != nil {
		return tls.Certificate{}, err
	}
	switch {
	case id.Name != was.Name || id.Role != was.Role || !slices.Equal(id.Path, was.Path):
		return tls.Certificate{}, fmt.Errorf("pki: the renewed certificate names %s (%s), not %s (%s)", id, id.Role, was, was.Role)
	case cert.Leaf.NotAfter.Before(cur.Leaf.NotAfter):
		return tls.Certificate{}, errors.New("pki: the renewed certificate expires before the current one")
	}
	if err := writeFileAtomic(filepath.Join(dir, ChildChainFile), chainPEM, 0o644); err != nil {
		return tls.Certificate{}, err
	}
	return cert, nil
}
