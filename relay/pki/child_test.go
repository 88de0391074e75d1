package pki

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// joined is a relay that joined a test tree.
type joined struct {
	key      *ecdsa.PrivateKey
	keyPEM   []byte
	chainPEM []byte
	cert     tls.Certificate
	chain    []*x509.Certificate
	id       Identity
	ca       *CA // regions only
}

// join has parent (whose path is parentPath) certify a new relay name with
// role, as a join would, and checks the result.
func join(t *testing.T, parent *CA, parentPath []string, name string, role ChildRole) joined {
	t.Helper()
	key, err := NewChildKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := NewCSR(key, name)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := CSRName(csr); err != nil || got != name {
		t.Fatalf("CSRName = %q, %v; want %q", got, err, name)
	}
	chainPEM, err := parent.SignChild(csr, role, parentPath, ChildCertValidity)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := EncodeKeyPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(chainPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	j := joined{key: key, keyPEM: keyPEM, chainPEM: chainPEM, cert: cert, chain: certsOf(cert)}
	if j.id, err = IdentityFromCert(cert.Leaf); err != nil {
		t.Fatal(err)
	}
	if role == RoleRegion {
		if j.ca, err = LoadCAFromPEM(chainPEM, keyPEM); err != nil {
			t.Fatal(err)
		}
	}
	return j
}

// testTree is root → region-a → sub-1 → edge-1, plus edge-0 right under
// region-a.
type testTree struct {
	root                        *CA
	rootDir                     string
	regionA, sub1, edge1, edge0 joined
}

func newTestTree(t *testing.T) testTree {
	t.Helper()
	root, dir := newTestCA(t)
	tr := testTree{root: root, rootDir: dir}
	tr.regionA = join(t, root, []string{"root"}, "region-a", RoleRegion)
	tr.sub1 = join(t, tr.regionA.ca, tr.regionA.id.Path, "sub-1", RoleRegion)
	tr.edge1 = join(t, tr.sub1.ca, tr.sub1.id.Path, "edge-1", RoleEdge)
	tr.edge0 = join(t, tr.regionA.ca, tr.regionA.id.Path, "edge-0", RoleEdge)
	return tr
}

func TestChildChain(t *testing.T) {
	tr := newTestTree(t)
	for _, tc := range []struct {
		j     joined
		want  Identity
		certs int
	}{
		{tr.regionA, Identity{"region-a", RoleRegion, []string{"root", "region-a"}}, 1},
		{tr.sub1, Identity{"sub-1", RoleRegion, []string{"root", "region-a", "sub-1"}}, 2},
		{tr.edge1, Identity{"edge-1", RoleEdge, []string{"root", "region-a", "sub-1", "edge-1"}}, 3},
		{tr.edge0, Identity{"edge-0", RoleEdge, []string{"root", "region-a", "edge-0"}}, 2},
	} {
		t.Run(tc.want.String(), func(t *testing.T) {
			if len(tc.j.chain) != tc.certs {
				t.Errorf("chain of %d certificates, want %d", len(tc.j.chain), tc.certs)
			}
			id, err := VerifyChain(tr.root.Cert, tc.j.chain)
			if err != nil {
				t.Fatal(err)
			}
			if id.Name != tc.want.Name || id.Role != tc.want.Role || !slices.Equal(id.Path, tc.want.Path) {
				t.Errorf("identity %+v, want %+v", id, tc.want)
			}
			// Presenting the root as well changes nothing.
			if _, err := VerifyChain(tr.root.Cert, append(slices.Clone(tc.j.chain), tr.root.Cert)); err != nil {
				t.Errorf("chain with the root appended: %v", err)
			}
			leaf := tc.j.chain[0]
			wantURI := "canopy://relay/" + strings.Join(tc.want.Path, "/")
			if len(leaf.URIs) != 1 || leaf.URIs[0].String() != wantURI {
				t.Errorf("URIs %v, want %s", leaf.URIs, wantURI)
			}
			if leaf.Subject.CommonName != tc.want.Name || !slices.Equal(leaf.Subject.OrganizationalUnit, []string{tc.want.Role.String()}) || len(leaf.Subject.Organization) > 0 {
				t.Errorf("subject %s", leaf.Subject)
			}
			if leaf.NotAfter.After(tr.root.Cert.NotAfter) || time.Until(leaf.NotAfter) < ChildCertValidity-2*time.Hour {
				t.Errorf("valid until %s", leaf.NotAfter)
			}
			switch tc.want.Role {
			case RoleRegion:
				if !leaf.IsCA || leaf.KeyUsage != x509.KeyUsageCertSign|x509.KeyUsageDigitalSignature ||
					!slices.Equal(leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}) {
					t.Errorf("region certificate: CA %v, key usage %v, extended %v", leaf.IsCA, leaf.KeyUsage, leaf.ExtKeyUsage)
				}
				if !slices.Equal(leaf.PermittedURIDomains, []string{"relay"}) || len(leaf.ExcludedIPRanges) != 2 {
					t.Errorf("region certificate: name constraints %v %v", leaf.PermittedURIDomains, leaf.ExcludedIPRanges)
				}
			case RoleEdge:
				if leaf.IsCA || leaf.KeyUsage != x509.KeyUsageDigitalSignature ||
					!slices.Equal(leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
					t.Errorf("edge certificate: CA %v, key usage %v, extended %v", leaf.IsCA, leaf.KeyUsage, leaf.ExtKeyUsage)
				}
			}
		})
	}
	if !tr.edge1.id.Contains(tr.edge1.id.Path) || !tr.sub1.id.Contains(tr.edge1.id.Path) || !tr.regionA.id.Contains(tr.edge1.id.Path) {
		t.Error("a relay does not contain its own subtree")
	}
	if tr.sub1.id.Contains(tr.edge0.id.Path) || tr.edge1.id.Contains(tr.sub1.id.Path) || tr.edge0.id.Contains([]string{"root", "region-a", "edge-00"}) {
		t.Error("a relay contains a path outside its subtree")
	}
	if got := tr.edge1.id.String(); got != "root/region-a/sub-1/edge-1" {
		t.Errorf("String() = %q", got)
	}
}

// forge signs a certificate for a relay at path with role using issuer's
// certificate and key directly, bypassing SignChild's checks, as a
// compromised relay could.
func forge(t *testing.T, issuer *x509.Certificate, issuerKey *ecdsa.PrivateKey, path []string, role ChildRole, mutate func(*x509.Certificate)) *x509.Certificate {
	t.Helper()
	key, err := NewChildKey()
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := newSerial()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: path[len(path)-1], OrganizationalUnit: []string{role.String()}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		URIs:         []*url.URL{relayURI(path)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	}
	if role == RoleRegion {
		tmpl.BasicConstraintsValid, tmpl.IsCA = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	}
	if mutate != nil {
		mutate(tmpl)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, key.Public(), issuerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestVerifyChainRefuses(t *testing.T) {
	tr := newTestTree(t)
	other := newTestTree(t)
	rootKey := tr.root.Key.(*ecdsa.PrivateKey)
	edgeLeaf, edgeChain := tr.edge1.chain[0], tr.edge1.chain

	for _, tc := range []struct {
		name  string
		root  *x509.Certificate
		chain []*x509.Certificate
		want  string
	}{
		{"no certificate", tr.root.Cert, nil, "no certificate"},
		{"other root", tr.root.Cert, other.edge1.chain, "unknown authority"},
		{"verified against other root", other.root.Cert, tr.edge1.chain, "unknown authority"},
		{"missing intermediate", tr.root.Cert, []*x509.Certificate{edgeLeaf, tr.sub1.chain[0]}, "unknown authority"},
		{
			"signed by an edge", tr.root.Cert,
			append([]*x509.Certificate{forge(t, edgeLeaf, tr.edge1.key, append(slices.Clone(tr.edge1.id.Path), "x"), RoleEdge, nil)}, edgeChain...),
			"", // x509 refuses an issuer that is not a CA
		},
		{
			"region signs outside its subtree", tr.root.Cert,
			append([]*x509.Certificate{forge(t, tr.sub1.chain[0], tr.sub1.key, []string{"root", "region-b", "edge-9"}, RoleEdge, nil)}, tr.sub1.chain...),
			"may only certify relays right below it",
		},
		{
			"region signs two levels down", tr.root.Cert,
			append([]*x509.Certificate{forge(t, tr.sub1.chain[0], tr.sub1.key, append(slices.Clone(tr.sub1.id.Path), "a", "b"), RoleEdge, nil)}, tr.sub1.chain...),
			"may only certify relays right below it",
		},
		{
			"root certifies a deep path", tr.root.Cert,
			[]*x509.Certificate{forge(t, tr.root.Cert, rootKey, []string{"root", "region-a", "edge-9"}, RoleEdge, nil)},
			"certifies only children of the root",
		},
		{
			"region signs a certificate without relay identity", tr.root.Cert,
			append([]*x509.Certificate{forge(t, tr.regionA.chain[0], tr.regionA.key, []string{"root", "region-a", "x"}, RoleEdge, func(c *x509.Certificate) { c.URIs = nil })}, tr.regionA.chain...),
			"relay URIs",
		},
		{
			"region signs a non-relay URI", tr.root.Cert,
			append([]*x509.Certificate{forge(t, tr.regionA.chain[0], tr.regionA.key, []string{"root", "region-a", "x"}, RoleEdge, func(c *x509.Certificate) {
				c.URIs = append(c.URIs, &url.URL{Scheme: "spiffe", Host: "example.org", Path: "/x"})
			})}, tr.regionA.chain...),
			"not permitted",
		},
		{
			"role does not match CA status", tr.root.Cert,
			[]*x509.Certificate{forge(t, tr.root.Cert, rootKey, []string{"root", "r"}, RoleEdge, func(c *x509.Certificate) {
				c.BasicConstraintsValid, c.IsCA = true, true
			})},
			"does not match its CA status",
		},
		{
			"expired", tr.root.Cert,
			[]*x509.Certificate{forge(t, tr.root.Cert, rootKey, []string{"root", "e"}, RoleEdge, func(c *x509.Certificate) {
				c.NotBefore, c.NotAfter = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)
			})},
			"expired",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := VerifyChain(tc.root, tc.chain)
			if err == nil {
				t.Fatalf("verified as %+v", id)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestRegionCannotIssueServerCertificates checks the name constraints: a
// region's key cannot make a certificate that standard TLS verification
// against the root accepts for a host name, such as the root API's.
func TestRegionCannotIssueServerCertificates(t *testing.T) {
	tr := newTestTree(t)
	for _, tc := range []struct {
		name   string
		mutate func(*x509.Certificate)
		host   string
	}{
		{"dns", func(c *x509.Certificate) { c.DNSNames = []string{"root.example.com"} }, "root.example.com"},
		{"ip", func(c *x509.Certificate) { c.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)} }, "127.0.0.1"},
		{"ipv6", func(c *x509.Certificate) { c.IPAddresses = []net.IP{net.IPv6loopback} }, "::1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leaf := forge(t, tr.regionA.chain[0], tr.regionA.key, []string{"root", "region-a", "x"}, RoleEdge, func(c *x509.Certificate) {
				c.URIs = nil
				c.Subject = pkix.Name{CommonName: tc.host}
				c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
				tc.mutate(c)
			})
			opts := x509.VerifyOptions{Roots: tr.root.Pool(), Intermediates: x509.NewCertPool(), DNSName: tc.host}
			opts.Intermediates.AddCert(tr.regionA.chain[0])
			if _, err := leaf.Verify(opts); err == nil {
				t.Error("a region issued a server certificate that verifies against the root")
			}
			if err := verifyParent(tr.root.Cert, []*x509.Certificate{leaf, tr.regionA.chain[0]}, tc.host); err == nil {
				t.Error("verifyParent accepted it")
			}
		})
	}
}

func TestSignChildIgnoresCSRRequests(t *testing.T) {
	root, _ := newTestCA(t)
	key, err := NewChildKey()
	if err != nil {
		t.Fatal(err)
	}
	// A greedy CSR: CA status, host names, addresses, URIs, organizations.
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:     pkix.Name{CommonName: "edge-1", Organization: []string{"system:masters"}, OrganizationalUnit: []string{"region"}},
		DNSNames:    []string{"root.example.com"},
		IPAddresses: []net.IP{net.IPv4(10, 0, 0, 1)},
		URIs:        []*url.URL{{Scheme: "canopy", Host: "relay", Path: "/root/region-b/edge-1"}},
		ExtraExtensions: []pkix.Extension{{
			Id: []int{2, 5, 29, 19}, Critical: true, Value: []byte{0x30, 0x03, 0x01, 0x01, 0xff}, // CA:TRUE
		}},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	csr := pem.EncodeToMemory(&pem.Block{Type: pemCSR, Bytes: der})
	chainPEM, err := root.SignChild(csr, RoleEdge, []string{"root"}, ChildCertValidity)
	if err != nil {
		t.Fatal(err)
	}
	certs, err := parseCertsPEM(chainPEM)
	if err != nil {
		t.Fatal(err)
	}
	c := certs[0]
	if c.IsCA || len(c.DNSNames) > 0 || len(c.IPAddresses) > 0 || len(c.Subject.Organization) > 0 ||
		len(c.URIs) != 1 || c.URIs[0].String() != "canopy://relay/root/edge-1" || c.Subject.OrganizationalUnit[0] != "edge" {
		t.Errorf("certificate took content from the CSR: CA %v, DNS %v, IP %v, subject %s, URIs %v",
			c.IsCA, c.DNSNames, c.IPAddresses, c.Subject, c.URIs)
	}
	if !c.PublicKey.(*ecdsa.PublicKey).Equal(&key.PublicKey) {
		t.Error("certificate is not for the CSR's key")
	}
}

func TestSignChildRefuses(t *testing.T) {
	tr := newTestTree(t)
	key, err := NewChildKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := NewCSR(key, "child")
	if err != nil {
		t.Fatal(err)
	}
	edgeCA := &CA{Cert: tr.edge1.chain[0], Key: tr.edge1.key, CertPEM: tr.edge1.chainPEM}
	// A CSR whose signature does not match its key.
	forged := pem.EncodeToMemory(&pem.Block{Type: pemCSR, Bytes: func() []byte {
		b, _ := pem.Decode(csr)
		d := slices.Clone(b.Bytes)
		d[len(d)-5] ^= 1
		return d
	}()})
	for _, tc := range []struct {
		name string
		ca   *CA
		csr  []byte
		role ChildRole
		path []string
		ttl  time.Duration
	}{
		{"unknown role", tr.root, csr, 0, []string{"root"}, time.Hour},
		{"zero TTL", tr.root, csr, RoleEdge, []string{"root"}, 0},
		{"no parent path", tr.root, csr, RoleEdge, nil, time.Hour},
		{"root signing below a region", tr.root, csr, RoleEdge, []string{"root", "region-a"}, time.Hour},
		{"region claiming another path", tr.regionA.ca, csr, RoleEdge, []string{"root", "region-b"}, time.Hour},
		{"bad parent name", tr.root, csr, RoleEdge, []string{"Root"}, time.Hour},
		{"edge signing", edgeCA, csr, RoleEdge, tr.edge1.id.Path, time.Hour},
		{"not a CSR", tr.root, tr.edge1.chainPEM, RoleEdge, []string{"root"}, time.Hour},
		{"bad CSR signature", tr.root, forged, RoleEdge, []string{"root"}, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.ca.SignChild(tc.csr, tc.role, tc.path, tc.ttl); err == nil {
				t.Error("SignChild succeeded")
			}
		})
	}
	if _, err := NewCSR(key, "Not_A_Label"); err == nil {
		t.Error("NewCSR accepted a name that is not a DNS label")
	}
}

func TestSignChildCapsValidity(t *testing.T) {
	tr := newTestTree(t)
	key, _ := NewChildKey()
	csr, _ := NewCSR(key, "long")
	chainPEM, err := tr.sub1.ca.SignChild(csr, RoleEdge, tr.sub1.id.Path, 100*365*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certs, _ := parseCertsPEM(chainPEM)
	if !certs[0].NotAfter.Equal(tr.sub1.chain[0].NotAfter) {
		t.Errorf("valid until %s, past its issuer (%s)", certs[0].NotAfter, tr.sub1.chain[0].NotAfter)
	}
}

func TestLoadCAFromPEMRefuses(t *testing.T) {
	tr := newTestTree(t)
	if _, err := LoadCAFromPEM(tr.edge1.chainPEM, tr.edge1.keyPEM); err == nil {
		t.Error("loaded an edge certificate as a CA")
	}
	if _, err := LoadCAFromPEM(tr.regionA.chainPEM, tr.sub1.keyPEM); err == nil {
		t.Error("loaded a CA with another relay's key")
	}
	if _, err := LoadCAFromPEM(nil, tr.sub1.keyPEM); err == nil {
		t.Error("loaded a CA without a certificate")
	}
}

func TestChildIdentityFiles(t *testing.T) {
	tr := newTestTree(t)
	dataDir := t.TempDir()
	if _, _, err := LoadChildIdentity(dataDir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("LoadChildIdentity before joining: %v, want fs.ErrNotExist", err)
	}
	if err := SaveChildIdentity(dataDir, tr.edge0.keyPEM, tr.edge1.chainPEM, tr.root.CertPEM); err == nil {
		t.Error("saved a key that does not match the certificate")
	}
	other, _ := newTestCA(t)
	if err := SaveChildIdentity(dataDir, tr.sub1.keyPEM, tr.sub1.chainPEM, other.CertPEM); err == nil {
		t.Error("saved a chain that does not verify against the root")
	}
	if _, err := os.Stat(filepath.Join(Dir(dataDir), ChildChainFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Error("a refused identity left relay.crt behind")
	}

	if err := SaveChildIdentity(dataDir, tr.sub1.keyPEM, tr.sub1.chainPEM, tr.root.CertPEM); err != nil {
		t.Fatal(err)
	}
	checkMode(t, filepath.Join(Dir(dataDir), ChildKeyFile), 0o600)
	cert, root, err := LoadChildIdentity(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if !root.Equal(tr.root.Cert) || !cert.Leaf.Equal(tr.sub1.chain[0]) || len(cert.Certificate) != 2 {
		t.Error("LoadChildIdentity returned something else than was saved")
	}
	ca, err := LoadChildCA(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	// The reloaded region CA signs for its children.
	grandchild := join(t, ca, tr.sub1.id.Path, "edge-2", RoleEdge)
	if _, err := VerifyChain(root, grandchild.chain); err != nil {
		t.Error(err)
	}

	// A torn identity is reported, not taken for "never joined".
	if err := os.Remove(filepath.Join(Dir(dataDir), CACertFile)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadChildIdentity(dataDir); err == nil {
		t.Error("loaded an identity without its root")
	}
}

// handshake runs a TLS handshake between a client and a server over
// net.Pipe and returns both sides' states and errors.
func handshake(t *testing.T, server, client *tls.Config) (ss, cs tls.ConnectionState, serr, cerr error) {
	t.Helper()
	sc, cc := net.Pipe()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	srv, cli := tls.Server(sc, server), tls.Client(cc, client)
	done := make(chan struct{})
	go func() {
		defer close(done)
		serr = srv.HandshakeContext(ctx)
		if serr != nil {
			sc.Close()
		}
	}()
	cerr = cli.HandshakeContext(ctx)
	if cerr != nil {
		cc.Close()
	}
	if cerr == nil {
		// The server checks the client's certificate after the client is
		// done; a refusal reaches the client on its first read.
		cli.SetReadDeadline(time.Now().Add(5 * time.Second))
		go cli.Read(make([]byte, 1))
	}
	<-done
	sc.Close()
	cc.Close()
	return srv.ConnectionState(), cli.ConnectionState(), serr, cerr
}

func TestLinkTLS(t *testing.T) {
	tr := newTestTree(t)
	other := newTestTree(t)
	rootServing, err := tr.root.EnsureServing(tr.rootDir, []string{"root.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	root := tr.root.Cert

	t.Run("mutual at depth 3", func(t *testing.T) {
		ss, cs, serr, cerr := handshake(t,
			LinkServerTLS(tr.sub1.cert, root),
			LinkClientTLS(&tr.edge1.cert, root, "sub-1.example"))
		if serr != nil || cerr != nil {
			t.Fatalf("server: %v; client: %v", serr, cerr)
		}
		if ss.Version != tls.VersionTLS13 || ss.NegotiatedProtocol != LinkALPN || cs.NegotiatedProtocol != LinkALPN {
			t.Errorf("version %x, ALPN %q/%q", ss.Version, ss.NegotiatedProtocol, cs.NegotiatedProtocol)
		}
		if id, ok := PeerIdentity(ss); !ok || id.String() != "root/region-a/sub-1/edge-1" || id.Role != RoleEdge {
			t.Errorf("server sees %v %v, want edge root/region-a/sub-1/edge-1", id, ok)
		}
		if id, ok := PeerIdentity(cs); !ok || id.String() != "root/region-a/sub-1" || id.Role != RoleRegion {
			t.Errorf("client sees %v %v, want region root/region-a/sub-1", id, ok)
		}
	})

	t.Run("region to root", func(t *testing.T) {
		ss, cs, serr, cerr := handshake(t,
			LinkServerTLS(rootServing, root),
			LinkClientTLS(&tr.regionA.cert, root, "root.example.com"))
		if serr != nil || cerr != nil {
			t.Fatalf("server: %v; client: %v", serr, cerr)
		}
		if id, ok := PeerIdentity(ss); !ok || id.String() != "root/region-a" {
			t.Errorf("root sees %v %v", id, ok)
		}
		if _, ok := PeerIdentity(cs); ok {
			t.Error("the root's serving certificate has a relay identity")
		}
	})

	t.Run("root under another name", func(t *testing.T) {
		_, _, _, cerr := handshake(t,
			LinkServerTLS(rootServing, root),
			LinkClientTLS(&tr.regionA.cert, root, "evil.example.com"))
		if cerr == nil || !strings.Contains(cerr.Error(), "not evil.example.com") {
			t.Errorf("client: %v, want the root's certificate refused for another host", cerr)
		}
	})

	t.Run("joining without certificate", func(t *testing.T) {
		ss, _, serr, cerr := handshake(t,
			LinkServerTLS(tr.regionA.cert, root),
			LinkClientTLS(nil, root, ""))
		if serr != nil || cerr != nil {
			t.Fatalf("server: %v; client: %v", serr, cerr)
		}
		if id, ok := PeerIdentity(ss); ok {
			t.Errorf("a client without certificate is authenticated as %v", id)
		}
	})

	t.Run("client from another tree", func(t *testing.T) {
		// The client trusts this tree's root but has a certificate from
		// another.
		_, _, serr, _ := handshake(t,
			LinkServerTLS(tr.regionA.cert, root),
			LinkClientTLS(&other.edge0.cert, root, ""))
		if serr == nil || !strings.Contains(serr.Error(), "unknown authority") {
			t.Errorf("server: %v, want a client certificate from another root refused", serr)
		}
	})

	t.Run("server from another tree", func(t *testing.T) {
		_, _, _, cerr := handshake(t,
			LinkServerTLS(other.regionA.cert, other.root.Cert),
			LinkClientTLS(&tr.edge0.cert, root, ""))
		if cerr == nil || !strings.Contains(cerr.Error(), "unknown authority") {
			t.Errorf("client: %v, want a parent from another root refused", cerr)
		}
	})

	t.Run("edge as server", func(t *testing.T) {
		_, _, _, cerr := handshake(t,
			LinkServerTLS(tr.edge1.cert, root),
			LinkClientTLS(nil, root, ""))
		if cerr == nil || !strings.Contains(cerr.Error(), "key usage") {
			t.Errorf("client: %v, want an edge refused as a parent", cerr)
		}
	})
}
