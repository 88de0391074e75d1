package server

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/url"
	"slices"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/canopy-dev/canopy/relay/layout"
)

// The admin kubeconfig lists every space that is not a child's, and the
// mailbox and reports spaces of the first children by name only.
func TestKubeconfigSpaces(t *testing.T) {
	all := []string{"default", "downsync", "inventory", "shop"}
	for _, c := range []string{"edge-3", "edge-1", "edge-2", "edge-0"} {
		all = append(all, layout.MailboxSpace(c), layout.ReportsSpace(c))
	}
	all = append(all, "mailbox-") // no child's name: not a child's space
	got := kubeconfigSpaces(all, 2)
	want := []string{"default", "downsync", "inventory", "shop", "mailbox-edge-1", "reports-edge-1", "mailbox-edge-0", "reports-edge-0", "mailbox-"}
	if !slices.Equal(got, want) {
		t.Errorf("kubeconfigSpaces(…, 2) = %v, want %v", got, want)
	}
	if got := kubeconfigSpaces(all, 100); !slices.Equal(got, all) {
		t.Errorf("kubeconfigSpaces(…, 100) = %v, want all of %v", got, all)
	}
	// Thousands of children: the kubeconfig stays the size of a hundred.
	many := []string{"default"}
	for i := range 5000 {
		c := fmt.Sprintf("e%04d", i)
		many = append(many, layout.MailboxSpace(c), layout.ReportsSpace(c))
	}
	if got := kubeconfigSpaces(many, KubeconfigChildren); len(got) != 1+2*KubeconfigChildren || got[1] != "mailbox-e0000" {
		t.Errorf("with 5000 children: %d spaces listed starting %v, want %d from mailbox-e0000", len(got), got[:2], 1+2*KubeconfigChildren)
	}
}

// The API speaks HTTP/2 and lets one connection carry as many streams as
// kube-apiserver does, so a client's thousand watches share a connection
// as they would with kube.
func TestAPIHTTP2Settings(t *testing.T) {
	r := startTestRoot(t)
	u, err := url.Parse(r.Server())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.Dial("tcp", u.Host, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if p := conn.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN chose %q, want h2", p)
	}
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok {
		t.Fatalf("first frame is %v, want SETTINGS", f.Header())
	}
	if v, ok := sf.Value(http2.SettingMaxConcurrentStreams); !ok || v != apiStreams {
		t.Errorf("SETTINGS_MAX_CONCURRENT_STREAMS = %d (sent: %v), want %d", v, ok, apiStreams)
	}
}
