package link

import (
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"

	"github.com/quic-go/quic-go"
)

// resetKeyInfo labels the stateless reset key derived from a TLS key.
const resetKeyInfo = "canopy-link/1 quic stateless reset key"

// deriveResetKey derives a stateless reset key from the private key of
// c's first certificate with HKDF-SHA256, so that a listener started again
// with the same identity resets the connections of its previous run; the
// key reveals nothing of the private key. It returns nil if c has no
// certificate or its key cannot be marshalled (a hardware key).
func deriveResetKey(c *tls.Config) *quic.StatelessResetKey {
	if c == nil || len(c.Certificates) == 0 || c.Certificates[0].PrivateKey == nil {
		return nil
	}
	der, err := x509.MarshalPKCS8PrivateKey(c.Certificates[0].PrivateKey)
	if err != nil {
		return nil
	}
	b, err := hkdf.Key(sha256.New, der, nil, resetKeyInfo, len(quic.StatelessResetKey{}))
	if err != nil {
		return nil
	}
	var k quic.StatelessResetKey
	copy(k[:], b)
	return &k
}
