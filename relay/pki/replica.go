package pki

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Files of a replicated root (docs/ha.md): the peer certificate that a
// replica presents to the others on its Raft address.
const (
	PeerCertFile = "peer.crt"
	PeerKeyFile  = "peer.key"
)

// SharedFiles are the credentials that every replica of a root must share:
// the CA, the admin token and the ServiceAccount signing key. The serving
// and peer certificates are per replica and issued locally from the CA.
var SharedFiles = []string{CACertFile, CAKeyFile, AdminTokenFile, SigningKeyFile}

// PeerName is the DNS name that only replica certificates of the cluster
// clusterID carry (consensus.PeerTLSConfig's serverName).
func PeerName(clusterID string) string { return "raft." + clusterID }

// ClusterID derives a cluster id from the CA certificate: "canopy-" and the
// first 12 hex digits of its SHA-256. Replicas sharing a CA derive the same
// id; a replica started with another CA gossips under another label and is
// never admitted.
func (ca *CA) ClusterID() string {
	sum := sha256.Sum256(ca.Cert.Raw)
	return "canopy-" + hex.EncodeToString(sum[:6])
}

// EnsurePeer returns the peer certificate stored in dir (DIR/pki), first
// issuing one if there is none, if it does not name exactly
// PeerName(clusterID), if this CA did not issue it or if it expires within
// 30 days. The certificate has both the server and the client extended key
// usages and the DNS name PeerName(clusterID) only, so that neither a user's
// client certificate nor a child relay's certificate (which name
// constraints keep from naming hosts) can pass for a replica.
func (ca *CA) EnsurePeer(dir, clusterID string) (tls.Certificate, error) {
	name := PeerName(clusterID)
	certPath, keyPath := filepath.Join(dir, PeerCertFile), filepath.Join(dir, PeerKeyFile)
	if cert, err := tls.LoadX509KeyPair(certPath, keyPath); err == nil && ca.peerUpToDate(cert.Leaf, name) {
		return cert, nil
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		DNSNames:    []string{name},
		NotBefore:   time.Now().Add(-clockSkew),
		NotAfter:    time.Now().Add(servingValidity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	return ca.issueFiles(tmpl, certPath, keyPath)
}

func (ca *CA) peerUpToDate(leaf *x509.Certificate, name string) bool {
	if leaf == nil || !slices.Equal(leaf.DNSNames, []string{name}) || len(leaf.IPAddresses) > 0 {
		return false
	}
	if time.Now().Add(servingRenewBefore).After(leaf.NotAfter) || leaf.CheckSignatureFrom(ca.Cert) != nil {
		return false
	}
	return slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageClientAuth) && slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
}

// pemBundleFile is the PEM type of one file in a bundle; its "File"
// header names the file.
const pemBundleFile = "CANOPY PKI FILE"

// ExportShared returns the shared credentials of the root whose PKI
// directory is dir (SharedFiles) as one PEM bundle: a block per file, its
// name in a "File" header. The bundle holds the CA key: treat it as the
// secret it is.
func ExportShared(dir string) ([]byte, error) {
	var buf bytes.Buffer
	for _, name := range SharedFiles {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("pki: exporting: %w", err)
		}
		if err := pem.Encode(&buf, &pem.Block{Type: pemBundleFile, Headers: map[string]string{"File": name}, Bytes: data}); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// ErrPKIExists: ImportShared found other credentials in the directory.
var ErrPKIExists = errors.New("pki: the data directory already has other credentials")

// ImportShared writes the credentials of a bundle from ExportShared into
// the PKI directory dir (private keys and the token 0600). It checks the
// bundle first: every shared file, a CA whose key matches. Importing the
// same bundle again is a no-op; a directory holding any other shared
// credential is refused with ErrPKIExists, since replacing it would
// invalidate what it issued.
func ImportShared(dir string, bundle []byte) error {
	files := map[string][]byte{}
	for rest := bundle; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		name := b.Headers["File"]
		if b.Type != pemBundleFile || !slices.Contains(SharedFiles, name) {
			return fmt.Errorf("pki: bundle: unexpected block %s %q", b.Type, name)
		}
		files[name] = b.Bytes
	}
	for _, name := range SharedFiles {
		if files[name] == nil {
			return fmt.Errorf("pki: bundle: no %s (make it with 'relay pki export')", name)
		}
	}
	ca, err := LoadCAFromPEM(files[CACertFile], files[CAKeyFile])
	if err != nil {
		return fmt.Errorf("pki: bundle: %w", err)
	}
	if !ca.Cert.IsCA {
		return errors.New("pki: bundle: ca.crt is not a CA certificate")
	}
	if _, err := parseECKeyPEM(files[SigningKeyFile]); err != nil {
		return fmt.Errorf("pki: bundle: sa.key: %w", err)
	}
	if len(bytes.TrimSpace(files[AdminTokenFile])) == 0 {
		return errors.New("pki: bundle: admin.token is empty")
	}
	for _, name := range SharedFiles {
		have, err := os.ReadFile(filepath.Join(dir, name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return err
		case !bytes.Equal(have, files[name]):
			return fmt.Errorf("%w: %s differs from the bundle's", ErrPKIExists, filepath.Join(dir, name))
		}
	}
	// The CA certificate goes last: LoadOrCreateCA treats a directory
	// without it as empty, so an interrupted import is simply redone.
	for _, name := range []string{CAKeyFile, AdminTokenFile, SigningKeyFile, CACertFile} {
		perm := fs.FileMode(0o600)
		if name == CACertFile {
			perm = 0o644
		}
		if err := writeFileAtomic(filepath.Join(dir, name), files[name], perm); err != nil {
			return err
		}
	}
	return nil
}
