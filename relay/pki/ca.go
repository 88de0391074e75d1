package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"path/filepath"
	"time"
)

const (
	caValidity = 10 * 365 * 24 * time.Hour
	// clockSkew backdates NotBefore so that peers with a slightly slow clock
	// accept a freshly issued certificate.
	clockSkew = time.Hour
)

// CA is the certificate authority of a root relay. It is safe for concurrent
// use: issuing only reads it.
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
}

// LoadOrCreateCA loads the CA from dir (DIR/pki), or creates a new one there
// if dir holds no CA certificate. A certificate without its key is an error,
// and so is an expired CA: replacing either would silently invalidate every
// credential issued from it.
func LoadOrCreateCA(dir string) (*CA, error) {
	certPath, keyPath := filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile)
	ok, err := exists(certPath)
	if err != nil {
		return nil, err
	}
	if !ok {
		// No certificate means nothing was ever issued: a key left by an
		// interrupted creation is safe to replace.
		return createCA(certPath, keyPath)
	}
	cert, certPEM, err := readCert(certPath)
	if err != nil {
		return nil, err
	}
	key, err := readECKey(keyPath)
	if err != nil {
		return nil, fmt.Errorf("pki: CA key: %w", err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("pki: %s does not match %s", keyPath, certPath)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("pki: %s is not a CA certificate", certPath)
	}
	if time.Now().After(cert.NotAfter) {
		return nil, fmt.Errorf("pki: CA %s expired on %s", certPath, cert.NotAfter.Format(time.RFC3339))
	}
	return &CA{Cert: cert, Key: key, CertPEM: certPEM}, nil
}

func createCA(certPath, keyPath string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("canopy-ca@%d", now.Unix())},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("pki: create CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	// The key goes first: a certificate on disk promises its key.
	if err := writeKey(keyPath, key); err != nil {
		return nil, err
	}
	certPEM := encodeCert(der)
	if err := writeFileAtomic(certPath, certPEM, 0o644); err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, CertPEM: certPEM}, nil
}

// Pool returns a new pool holding only the CA certificate.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return pool
}

// IssueClient issues a client certificate valid for ttl (but never past the
// CA's own expiry) to the user commonName in the given groups, as the kube
// API reads them: CN is the user name, each O a group. It returns the
// certificate and a new ECDSA P-256 private key, PEM encoded.
func (ca *CA) IssueClient(commonName string, groups []string, ttl time.Duration) (certPEM, keyPEM []byte, err error) {
	if commonName == "" {
		return nil, nil, errors.New("pki: client certificate needs a common name")
	}
	if ttl <= 0 {
		return nil, nil, fmt.Errorf("pki: client certificate TTL %s is not positive", ttl)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName, Organization: groups},
		NotBefore:   now.Add(-clockSkew),
		NotAfter:    now.Add(ttl),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, key, err := ca.issue(tmpl)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return encodeCert(der), keyPEM, nil
}

// issue signs tmpl with a fresh serial number for a new ECDSA P-256 key,
// capping its validity at the CA's.
func (ca *CA) issue(tmpl *x509.Certificate) ([]byte, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	if tmpl.SerialNumber, err = newSerial(); err != nil {
		return nil, nil, err
	}
	if tmpl.NotAfter.After(ca.Cert.NotAfter) {
		tmpl.NotAfter = ca.Cert.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: issue certificate for %q: %w", tmpl.Subject.CommonName, err)
	}
	return der, key, nil
}

// newSerial returns a random 128-bit serial number.
func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
}
