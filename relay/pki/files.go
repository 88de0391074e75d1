package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/canopy-dev/canopy/relay/atomicfile"
)

// File names inside [Dir] (the first group) and inside the data directory
// (AdminKubeconfigFile).
const (
	CACertFile      = "ca.crt"
	CAKeyFile       = "ca.key"
	ServingCertFile = "serving.crt"
	ServingKeyFile  = "serving.key"
	AdminTokenFile  = "admin.token"
	SigningKeyFile  = "sa.key"

	AdminKubeconfigFile = "admin.kubeconfig"
)

// Dir returns the PKI directory of the data directory dataDir.
func Dir(dataDir string) string { return filepath.Join(dataDir, "pki") }

const (
	pemCertificate = "CERTIFICATE"
	pemPrivateKey  = "PRIVATE KEY"
)

// writeFileAtomic replaces path with data (atomicfile.WriteFile), creating
// missing parent directories 0700.
func writeFileAtomic(path string, data []byte, perm fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, data, perm)
}

// exists reports whether path exists; errors other than "not found" are
// returned.
func exists(path string) (bool, error) {
	_, err := os.Stat(path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, err
	}
}

// readPEM reads the first PEM block of type typ from path.
func readPEM(path, typ string) (*pem.Block, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, fmt.Errorf("pki: no %s PEM block in %s", typ, path)
		}
		if b.Type == typ {
			return b, nil
		}
	}
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: der})
}

func encodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPrivateKey, Bytes: der}), nil
}

func readCert(path string) (*x509.Certificate, []byte, error) {
	b, err := readPEM(path, pemCertificate)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: %s: %w", path, err)
	}
	return cert, encodeCert(b.Bytes), nil
}

// readECKey reads a PKCS#8 ECDSA P-256 private key written by writeKey.
func readECKey(path string) (*ecdsa.PrivateKey, error) {
	b, err := readPEM(path, pemPrivateKey)
	if err != nil {
		return nil, err
	}
	key, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("pki: %s: %w", path, err)
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, fmt.Errorf("pki: %s: not an ECDSA P-256 key", path)
	}
	return ec, nil
}

func writeKey(path string, key crypto.Signer) error {
	data, err := encodeKey(key)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, data, 0o600)
}
