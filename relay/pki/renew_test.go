package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/x509"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// csrFor is a certificate request for name made with key.
func csrFor(t *testing.T, key *ecdsa.PrivateKey, name string) []byte {
	t.Helper()
	csr, err := NewCSR(key, name)
	if err != nil {
		t.Fatal(err)
	}
	return csr
}

func leafOf(t *testing.T, chainPEM []byte) []*x509.Certificate {
	t.Helper()
	certs, err := parseCertsPEM(chainPEM)
	if err != nil {
		t.Fatal(err)
	}
	return certs
}

// A renewal keeps the relay's name, role, path and key, with a new serial
// and validity capped at the issuer's; the certificates a renewed region
// issued before still verify under its new certificate, and the renewed
// region signs with it.
func TestRenewChild(t *testing.T) {
	tr := newTestTree(t)

	// region-a at the root, for an hour.
	chainPEM, err := tr.root.RenewChild(tr.regionA.chain[0], csrFor(t, tr.regionA.key, "region-a"), []string{"root"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	renewed := leafOf(t, chainPEM)
	old := tr.regionA.chain[0]
	if len(renewed) != 1 {
		t.Fatalf("the root returned %d certificates, want the leaf alone", len(renewed))
	}
	r := renewed[0]
	if r.SerialNumber.Cmp(old.SerialNumber) == 0 || !bytes.Equal(r.RawSubject, old.RawSubject) ||
		len(r.URIs) != 1 || r.URIs[0].String() != old.URIs[0].String() || !r.IsCA || !r.PublicKey.(*ecdsa.PublicKey).Equal(old.PublicKey) {
		t.Errorf("renewed: serial %v (was %v), subject %s (was %s), URIs %v, CA %v", r.SerialNumber, old.SerialNumber, r.Subject, old.Subject, r.URIs, r.IsCA)
	}
	if d := time.Until(r.NotAfter); d > time.Hour || d < 59*time.Minute {
		t.Errorf("renewed for an hour: valid for %s", d)
	}
	id, err := VerifyChain(tr.root.Cert, renewed)
	if err != nil || !slices.Equal(id.Path, tr.regionA.id.Path) || id.Role != RoleRegion {
		t.Fatalf("renewed chain: %v, %v", id, err)
	}
	// What region-a signed with its key verifies under its new certificate.
	if _, err := VerifyChain(tr.root.Cert, []*x509.Certificate{tr.edge0.chain[0], r}); err != nil {
		t.Errorf("edge-0, issued before the renewal, under the renewed region-a: %v", err)
	}
	if _, err := VerifyChain(tr.root.Cert, []*x509.Certificate{tr.edge1.chain[0], tr.sub1.chain[0], r}); err != nil {
		t.Errorf("edge-1 below sub-1, under the renewed region-a: %v", err)
	}
	ca, err := LoadCAFromPEM(chainPEM, tr.regionA.keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	// The renewed region caps what it issues at its new expiry.
	edge0, err := ca.RenewChild(tr.edge0.chain[0], csrFor(t, tr.edge0.key, "edge-0"), tr.regionA.id.Path, ChildCertValidity)
	if err != nil {
		t.Fatal(err)
	}
	certs := leafOf(t, edge0)
	if len(certs) != 2 || !certs[1].Equal(r) || !certs[0].NotAfter.Equal(r.NotAfter) {
		t.Errorf("edge-0 renewed by the renewed region-a: %d certificates, valid until %s (region-a until %s)", len(certs), certs[0].NotAfter, r.NotAfter)
	}
	if id, err := VerifyChain(tr.root.Cert, certs); err != nil || id.String() != "root/region-a/edge-0" || id.Role != RoleEdge {
		t.Errorf("edge-0 renewed: %v, %v", id, err)
	}
}

func TestRenewChildRefuses(t *testing.T) {
	tr := newTestTree(t)
	stranger, err := NewChildKey()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		ca     *CA
		parent []string
		cur    *x509.Certificate
		csr    []byte
		want   string
	}{
		{"another key", tr.regionA.ca, tr.regionA.id.Path, tr.edge0.chain[0], csrFor(t, stranger, "edge-0"), "not made with the key of its certificate"},
		{"another name", tr.regionA.ca, tr.regionA.id.Path, tr.edge0.chain[0], csrFor(t, tr.edge0.key, "edge-9"), `names "edge-9", the certificate "edge-0"`},
		{"another relay's name", tr.regionA.ca, tr.regionA.id.Path, tr.edge0.chain[0], csrFor(t, tr.edge0.key, "sub-1"), `names "sub-1", the certificate "edge-0"`},
		{"issued under another parent", tr.regionA.ca, tr.regionA.id.Path, tr.edge1.chain[0], csrFor(t, tr.edge1.key, "edge-1"), "issued under root/region-a/sub-1"},
		{"not a relay certificate", tr.root, []string{"root"}, tr.root.Cert, csrFor(t, tr.regionA.key, "region-a"), "relay URIs"},
		{"not a certificate request", tr.regionA.ca, tr.regionA.id.Path, tr.edge0.chain[0], tr.edge0.chainPEM, "no CERTIFICATE REQUEST"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chain, err := tc.ca.RenewChild(tc.cur, tc.csr, tc.parent, ChildCertValidity)
			if err == nil {
				t.Fatalf("renewed: %s", leafOf(t, chain)[0].URIs)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("refused with %q, want it to say %q", err, tc.want)
			}
		})
	}
}

func TestRenewAt(t *testing.T) {
	now := time.Now()
	c := &x509.Certificate{NotBefore: now, NotAfter: now.Add(300 * time.Hour)}
	if got := RenewAt(c, 0); !got.Equal(now.Add(200 * time.Hour)) {
		t.Errorf("RenewAt(0) = %s after issue, want two thirds of the lifetime (200h)", got.Sub(now))
	}
	if got := RenewAt(c, 10*time.Hour); !got.Equal(now.Add(290 * time.Hour)) {
		t.Errorf("RenewAt(10h) = %s after issue, want 290h", got.Sub(now))
	}
}

func TestSaveRenewedChain(t *testing.T) {
	tr := newTestTree(t)
	dataDir := t.TempDir()
	if err := SaveChildIdentity(dataDir, tr.edge0.keyPEM, tr.edge0.chainPEM, tr.root.CertPEM); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(Dir(dataDir), ChildChainFile)
	unchanged := func(what string) {
		t.Helper()
		if got, _ := os.ReadFile(file); !bytes.Equal(got, tr.edge0.chainPEM) {
			t.Errorf("%s changed relay.crt", what)
		}
	}
	// Refused: another relay's chain, a chain of another tree, a
	// certificate expiring before the current one.
	if _, err := SaveRenewedChain(dataDir, tr.edge1.chainPEM); err == nil {
		t.Error("saved another relay's chain")
	}
	unchanged("another relay's chain")
	other, _ := newTestCA(t)
	foreign, err := other.SignChild(csrFor(t, tr.edge0.key, "edge-0"), RoleEdge, []string{"root"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := SaveRenewedChain(dataDir, foreign); err == nil {
		t.Error("saved a chain of another root")
	}
	unchanged("a chain of another root")
	shorter, err := tr.regionA.ca.RenewChild(tr.edge0.chain[0], csrFor(t, tr.edge0.key, "edge-0"), tr.regionA.id.Path, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := SaveRenewedChain(dataDir, shorter); err == nil {
		t.Error("saved a certificate expiring before the current one")
	}
	unchanged("a shorter certificate")

	renewed, err := tr.regionA.ca.RenewChild(tr.edge0.chain[0], csrFor(t, tr.edge0.key, "edge-0"), tr.regionA.id.Path, ChildCertValidity)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := SaveRenewedChain(dataDir, renewed)
	if err != nil {
		t.Fatal(err)
	}
	loaded, _, err := LoadChildIdentity(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if !loaded.Leaf.Equal(cert.Leaf) || loaded.Leaf.Equal(tr.edge0.chain[0]) {
		t.Error("relay.crt does not hold the renewed certificate")
	}
	if got, _ := os.ReadFile(filepath.Join(Dir(dataDir), ChildKeyFile)); !bytes.Equal(got, tr.edge0.keyPEM) {
		t.Error("the key changed")
	}
	checkMode(t, file, 0o644)
}
