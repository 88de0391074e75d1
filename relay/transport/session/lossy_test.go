package session

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/transport/join"
	"github.com/canopy-dev/canopy/relay/transport/link"
	"github.com/canopy-dev/canopy/relay/transport/link/memnet"
	"github.com/canopy-dev/canopy/test/poll"
)

// Over an in-memory network with latency and 5 % loss in both directions,
// and a partition healed later, the child's inbox converges to the
// mailbox (compared by content hash).
func TestConvergesOverLossyNetwork(t *testing.T) {
	net := memnet.NewSeeded(7)
	t.Cleanup(func() { _ = net.Close() })
	const parentAddr, childAddr = "127.0.2.1:7443", "127.0.2.2:40000"
	if err := net.SetLink(parentAddr, childAddr, memnet.Link{Latency: 10 * time.Millisecond, Loss: 0.05}); err != nil {
		t.Fatal(err)
	}
	ppc, err := net.Listen(parentAddr)
	if err != nil {
		t.Fatal(err)
	}
	cpc, err := net.Listen(childAddr)
	if err != nil {
		t.Fatal(err)
	}
	root := startRootOn(t, link.ListenConfig{PacketConn: ppc, DisableTCP: true, Config: fastLink()})

	for i := range 30 {
		send(t, root.st, "edge-1", fmt.Sprintf("cm-%d", i), "v1")
	}
	edgeStore := newStore(t)
	tr := &quic.Transport{Conn: cpc}
	t.Cleanup(func() { _ = tr.Close() })
	up := NewUplink(UplinkConfig{
		Name: "edge-1", Role: pki.RoleEdge, DataDir: t.TempDir(), Parents: []string{parentAddr}, JoinToken: root.token,
		Store: edgeStore, Inbox: "inbox", Outbox: "outbox", Subtree: edgeSubtree("edge-1"), Mode: link.ModeQUICOnly, Transport: tr, Link: fastLink(),
		Logger: quiet, Backoff: link.Backoff{Min: 20 * time.Millisecond, Max: 300 * time.Millisecond},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- up.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	inSync(t, root, "edge-1", edgeStore)

	// Partition; change things; heal: the child converges again.
	if err := net.Partition(parentAddr, childAddr); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "the partition noticed", func() bool { return !up.Connected() })
	for i := range 30 {
		send(t, root.st, "edge-1", fmt.Sprintf("cm-%d", i%10), fmt.Sprintf("v%d", i))
	}
	if err := net.Heal(parentAddr, childAddr); err != nil {
		t.Fatal(err)
	}
	inSync(t, root, "edge-1", edgeStore)
}

// fastLink notices a dead link quickly, for tests.
func fastLink() link.Config {
	c := link.DefaultConfig()
	c.KeepAlivePeriod = 200 * time.Millisecond
	c.MaxIdleTimeout = 2 * time.Second
	c.HandshakeTimeout = 3 * time.Second
	return c
}

// startRootOn is startRoot with a given listener configuration.
func startRootOn(t *testing.T, lc link.ListenConfig) *rootRelay {
	t.Helper()
	return restartOn(t, startRoot(t), lc)
}

// restartOn starts another parent with r's CA, store and configuration,
// listening as lc says: r restarted (stop r's own downlink first to take
// its place).
func restartOn(t *testing.T, r *rootRelay, lc link.ListenConfig) *rootRelay {
	t.Helper()
	dir := t.TempDir()
	serving, err := r.ca.EnsureServing(dir, []string{"127.0.2.1"})
	if err != nil {
		t.Fatal(err)
	}
	lc.TLS = pki.LinkServerTLS(serving, r.ca.Cert)
	ln, err := link.Listen(lc)
	if err != nil {
		t.Fatal(err)
	}
	down := NewDownlink(DownlinkConfig{
		Name: "root", Path: []string{"root"}, Store: r.st, Listener: ln, Logger: quiet,
		Authority: &join.Authority{CA: r.ca, Root: r.ca.Cert, Path: []string{"root"}},
		Mailboxes: r.down.cfg.Mailboxes, Reports: r.down.cfg.Reports,
	})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { _ = down.Start(ctx); close(stopped) }()
	t.Cleanup(func() { cancel(); _ = ln.Close(); <-stopped })
	return &rootRelay{ca: r.ca, st: r.st, down: down, addr: ln.Addr().String(), token: r.token}
}
