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

// writeFileAtomic replaces path with data: it writes a temporary file in the
// same directory with mode perm, syncs it, renames it over path and syncs the
// directory. Missing parent directories are created 0700.
func writeFileAtomic(path string, data []byte, perm fs.FileMode) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
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
