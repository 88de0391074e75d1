package auth

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/pki"
)

func parseChain(t *testing.T, chainPEM []byte) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	for rest := chainPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return out
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
}

// Relay link certificates, and anything a region's intermediate CA signs,
// are not kube API credentials: only certificates the root CA issues
// directly name users.
func TestRelayCertificatesAreNotAPIUsers(t *testing.T) {
	root, err := pki.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAuthenticator(AuthenticatorConfig{AdminToken: "x", ClientCAs: root.Pool()})
	if err != nil {
		t.Fatal(err)
	}
	authWith := func(chain []*x509.Certificate) error {
		r := httptest.NewRequest("GET", "/api", nil)
		r.TLS = &tls.ConnectionState{PeerCertificates: chain}
		_, err := a.Authenticate(r, "default")
		return err
	}

	// A user certificate from the root authenticates.
	userPEM, _, err := root.IssueClient("alice", []string{"devs"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := authWith(parseChain(t, userPEM)); err != nil {
		t.Fatalf("root-issued user certificate refused: %v", err)
	}

	// A region's link certificate (an intermediate CA) is refused.
	regionKey, _ := pki.NewChildKey()
	csr, _ := pki.NewCSR(regionKey, "region-a")
	regionChain, err := root.SignChild(csr, pki.RoleRegion, []string{"root"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := authWith(parseChain(t, regionChain)); err == nil {
		t.Fatal("a region link certificate authenticated as an API user")
	}

	// What the region signs, even claiming system:masters, is refused.
	keyPEM, _ := pki.EncodeKeyPEM(regionKey)
	regionCA, err := pki.LoadCAFromPEM(regionChain, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	forgedPEM, _, err := regionCA.IssueClient("admin", []string{"system:masters"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := authWith(append(parseChain(t, forgedPEM), parseChain(t, regionChain)...)); err == nil {
		t.Fatal("a certificate signed by a region's intermediate CA authenticated as an API user")
	}
}
