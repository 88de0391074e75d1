package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
)

// LoadOrCreateToken returns the bearer token stored in path, first writing a
// new one (32 random bytes, base64url without padding, mode 0600) if path
// does not exist. Surrounding white space in the file is ignored.
func LoadOrCreateToken(path string) (string, error) {
	ok, err := exists(path)
	if err != nil {
		return "", err
	}
	if ok {
		data, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		token := strings.TrimSpace(string(data))
		if token == "" {
			return "", fmt.Errorf("pki: token file %s is empty", path)
		}
		return token, nil
	}
	b := make([]byte, 32)
	rand.Read(b) // never fails; see crypto/rand.Read
	token := base64.RawURLEncoding.EncodeToString(b)
	if err := writeFileAtomic(path, []byte(token+"\n"), 0o600); err != nil {
		return "", err
	}
	return token, nil
}

// LoadOrCreateSigningKey returns the ECDSA P-256 key stored in path (PKCS#8,
// PEM), first writing a new one (mode 0600) if path does not exist.
func LoadOrCreateSigningKey(path string) (*ecdsa.PrivateKey, error) {
	ok, err := exists(path)
	if err != nil {
		return nil, err
	}
	if ok {
		return readECKey(path)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	if err := writeKey(path, key); err != nil {
		return nil, err
	}
	return key, nil
}
