package pki

import (
	"bytes"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func newTestCA(t *testing.T) (*CA, string) {
	t.Helper()
	dir := Dir(t.TempDir())
	ca, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ca, dir
}

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s: mode %v, want %v", filepath.Base(path), got, want)
	}
}

func TestLoadOrCreateCAReloads(t *testing.T) {
	ca, dir := newTestCA(t)
	if !ca.Cert.IsCA {
		t.Error("CA certificate is not a CA")
	}
	if d := time.Until(ca.Cert.NotAfter); d < caValidity-2*time.Hour {
		t.Errorf("CA valid for %v, want about 10 years", d)
	}
	checkMode(t, filepath.Join(dir, CAKeyFile), 0o600)

	again, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Cert.Equal(ca.Cert) || !bytes.Equal(again.CertPEM, ca.CertPEM) {
		t.Error("reloaded CA has a different certificate")
	}
	if !again.Cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool }).Equal(again.Key.Public()) {
		t.Error("reloaded CA key does not match its certificate")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("PKI dir holds %d entries, want ca.crt and ca.key only", len(entries))
	}
}

func TestLoadOrCreateCARefusesCertWithoutKey(t *testing.T) {
	_, dir := newTestCA(t)
	if err := os.Remove(filepath.Join(dir, CAKeyFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateCA(dir); err == nil {
		t.Fatal("LoadOrCreateCA replaced a CA whose key is missing")
	}
}

func TestLoadOrCreateCAReplacesKeyWithoutCert(t *testing.T) {
	ca, dir := newTestCA(t)
	if err := os.Remove(filepath.Join(dir, CACertFile)); err != nil {
		t.Fatal(err)
	}
	again, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if again.Cert.Equal(ca.Cert) {
		t.Error("want a new CA")
	}
}

func verifyServing(t *testing.T, ca *CA, cert tls.Certificate, host string) {
	t.Helper()
	_, err := cert.Leaf.Verify(x509.VerifyOptions{
		DNSName:   host,
		Roots:     ca.Pool(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		t.Errorf("verify for %q: %v", host, err)
	}
}

func TestEnsureServing(t *testing.T) {
	ca, dir := newTestCA(t)
	hosts := []string{"relay-a", "relay.example.com", "10.1.2.3", "fd00::7"}
	cert, err := ca.EnsureServing(dir, hosts)
	if err != nil {
		t.Fatal(err)
	}
	checkMode(t, filepath.Join(dir, ServingKeyFile), 0o600)
	for _, h := range append(hosts, "localhost", "127.0.0.1", "::1") {
		verifyServing(t, ca, cert, h)
	}
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{DNSName: "other.example.com", Roots: ca.Pool()}); err == nil {
		t.Error("serving certificate verifies for a host it was not issued for")
	}

	// Same hosts, in another order and spelling: the certificate is kept.
	same, err := ca.EnsureServing(dir, []string{"[fd00:0::7]", "RELAY.example.com", "10.1.2.3", "relay-a", "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	if !same.Leaf.Equal(cert.Leaf) {
		t.Error("serving certificate re-issued although the hosts did not change")
	}

	changed, err := ca.EnsureServing(dir, []string{"relay-a", "10.9.9.9"})
	if err != nil {
		t.Fatal(err)
	}
	if changed.Leaf.Equal(cert.Leaf) {
		t.Fatal("serving certificate not re-issued after the hosts changed")
	}
	verifyServing(t, ca, changed, "10.9.9.9")
	if slices.Contains(changed.Leaf.DNSNames, "relay.example.com") {
		t.Error("re-issued certificate still names a removed host")
	}
	reloaded, err := ca.EnsureServing(dir, []string{"relay-a", "10.9.9.9"})
	if err != nil {
		t.Fatal(err)
	}
	if !reloaded.Leaf.Equal(changed.Leaf) {
		t.Error("re-issued certificate was not stored")
	}
}

func TestEnsureServingRenewsNearExpiry(t *testing.T) {
	ca, dir := newTestCA(t)
	hosts := []string{"relay-a"}
	sans, err := normalizeHosts(append(slices.Clone(hosts), loopbackHosts...))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		NotBefore:   time.Now().Add(-time.Hour),
		NotAfter:    time.Now().Add(servingRenewBefore - time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "relay-a"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
	}
	der, key, err := ca.issue(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	old, _ := x509.ParseCertificate(der)
	if ca.servingUpToDate(old, sans) {
		t.Fatal("test certificate is not about to expire")
	}
	if err := writeKey(filepath.Join(dir, ServingKeyFile), key); err != nil {
		t.Fatal(err)
	}
	if err := writeFileAtomic(filepath.Join(dir, ServingCertFile), encodeCert(der), 0o644); err != nil {
		t.Fatal(err)
	}
	cert, err := ca.EnsureServing(dir, hosts)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Leaf.Equal(old) || time.Until(cert.Leaf.NotAfter) < servingRenewBefore {
		t.Error("serving certificate about to expire was not renewed")
	}
}

func TestEnsureServingReissuesForNewCA(t *testing.T) {
	ca, dir := newTestCA(t)
	cert, err := ca.EnsureServing(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := newTestCA(t)
	fresh, err := other.EnsureServing(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.Leaf.Equal(cert.Leaf) {
		t.Fatal("serving certificate of another CA was kept")
	}
	verifyServing(t, other, fresh, "localhost")
}

func TestEnsureServingRejectsBadHost(t *testing.T) {
	ca, dir := newTestCA(t)
	for _, h := range []string{"not a host", "fe80::1%eth0", "under_score.example"} {
		if _, err := ca.EnsureServing(dir, []string{h}); err == nil {
			t.Errorf("EnsureServing accepted host %q", h)
		}
	}
}

func TestServingHosts(t *testing.T) {
	got, err := ServingHosts("relay-a", "127.0.0.1:6443", "relay.example.com:7443", "[fd00::7]:7443")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"relay-a", "127.0.0.1", "relay.example.com", "fd00::7"}
	if !slices.Equal(got, want) {
		t.Errorf("ServingHosts = %q, want %q", got, want)
	}
	wild, err := ServingHosts("relay-a", ":6443", "0.0.0.0:7443")
	if err != nil {
		t.Fatal(err)
	}
	if wild[0] != "relay-a" || slices.Contains(wild, "") || slices.Contains(wild, "0.0.0.0") {
		t.Errorf("ServingHosts with wildcard listeners = %q", wild)
	}
	if _, err := ServingHosts("relay-a", "no-port"); err == nil {
		t.Error("ServingHosts accepted an address without a port")
	}
}

func TestIssueClient(t *testing.T) {
	ca, _ := newTestCA(t)
	certPEM, keyPEM, err := ca.IssueClient("alice", []string{"team-a", "system:masters"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	leaf := pair.Leaf
	if leaf.Subject.CommonName != "alice" {
		t.Errorf("CN = %q, want alice", leaf.Subject.CommonName)
	}
	// DER sorts the members of a SET, so the groups come back sorted.
	if want := []string{"system:masters", "team-a"}; !slices.Equal(slices.Sorted(slices.Values(leaf.Subject.Organization)), want) {
		t.Errorf("O = %q, want %q", leaf.Subject.Organization, want)
	}
	if !slices.Equal(leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
		t.Errorf("ExtKeyUsage = %v, want client auth only", leaf.ExtKeyUsage)
	}
	if d := time.Until(leaf.NotAfter); d > time.Hour || d < 59*time.Minute {
		t.Errorf("client certificate valid for %v, want 1h", d)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate does not verify: %v", err)
	}
	if b, _ := pem.Decode(keyPEM); b == nil || b.Type != "PRIVATE KEY" {
		t.Error("key is not a PEM PKCS#8 private key")
	}

	if _, _, err := ca.IssueClient("", nil, time.Hour); err == nil {
		t.Error("IssueClient accepted an empty common name")
	}
	if _, _, err := ca.IssueClient("bob", nil, 0); err == nil {
		t.Error("IssueClient accepted a zero TTL")
	}
	long, _, err := ca.IssueClient("bob", nil, 100*365*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(long)
	if c, _ := x509.ParseCertificate(b.Bytes); c.NotAfter.After(ca.Cert.NotAfter) {
		t.Error("client certificate outlives the CA")
	}
}
