package server

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/test/poll"
)

// presented returns the serving certificate the root's API presents to a
// new connection.
func presented(t *testing.T, r *Root) *x509.Certificate {
	t.Helper()
	conn, err := tls.Dial("tcp", r.Addr(), &tls.Config{RootCAs: r.ca.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("TLS to the API: %v", err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

// A root replaces its serving certificate while it serves: once
// serving.crt is removed, new connections to the API and new links get a
// new certificate of the same CA, while a connection and a link opened
// before keep working.
func TestServingCertificateRotates(t *testing.T) {
	old := servingCheckInterval
	servingCheckInterval = 20 * time.Millisecond
	t.Cleanup(func() { servingCheckInterval = old })

	r := startTestRoot(t)
	token := joinToken(t, r)
	before := startTestChild(t, ChildConfig{Role: pki.RoleRegion, Name: "region-a", DataDir: t.TempDir(),
		Parents: []string{r.LinkAddr()}, JoinToken: token, LinkAddr: "127.0.0.1:0"})
	poll.True(t, "region-a connected", func() bool { return before.Uplink().Connected() })
	first := presented(t, r)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: r.ca.Pool(), MinVersion: tls.VersionTLS12}}}
	defer client.CloseIdleConnections()
	healthz := func() error {
		resp, err := client.Get(r.Server() + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := healthz(); err != nil {
		t.Fatal(err)
	}

	certPath := filepath.Join(pki.Dir(r.cfg.DataDir), pki.ServingCertFile)
	if err := os.Remove(certPath); err != nil {
		t.Fatal(err)
	}
	var second *x509.Certificate
	poll.True(t, "a new serving certificate", func() bool {
		second = presented(t, r)
		return !second.Equal(first)
	})
	if err := second.CheckSignatureFrom(r.ca.Cert); err != nil {
		t.Fatalf("the new serving certificate: %v", err)
	}
	if _, err := os.Stat(certPath); err != nil {
		t.Fatalf("the new serving certificate is not on disk: %v", err)
	}
	if err := healthz(); err != nil {
		t.Fatalf("a connection opened before the rotation: %v", err)
	}
	after := startTestChild(t, ChildConfig{Role: pki.RoleRegion, Name: "region-b", DataDir: t.TempDir(),
		Parents: []string{r.LinkAddr()}, JoinToken: token, LinkAddr: "127.0.0.1:0"})
	poll.True(t, "region-b linked after the rotation", func() bool { return after.Uplink().Connected() })
	if !before.Uplink().Connected() {
		t.Fatal("region-a lost its link to the rotation")
	}
}
