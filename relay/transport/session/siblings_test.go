package session

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/internal/wire"
	"github.com/canopy-dev/canopy/relay/transport/join"
	"github.com/canopy-dev/canopy/relay/transport/link"
	"github.com/canopy-dev/canopy/relay/transport/mailbox"
	"github.com/canopy-dev/canopy/test/poll"
)

// siblingSet is a DownlinkConfig.Siblings that a test changes.
type siblingSet struct {
	mu      sync.Mutex
	addrs   []string
	changed chan struct{}
}

func newSiblingSet(addrs ...string) *siblingSet {
	return &siblingSet{addrs: addrs, changed: make(chan struct{})}
}

func (s *siblingSet) get() ([]string, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.addrs), s.changed
}

func (s *siblingSet) set(addrs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addrs = addrs
	close(s.changed)
	s.changed = make(chan struct{})
}

// startSiblingParents starts two parents of one tree (one CA, both at the
// top, each with its own store): stand-ins for two sibling regions. The
// first tells its children the siblings of set.
func startSiblingParents(t *testing.T, set *siblingSet) (a, b *rootRelay, stopA func()) {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.EnsureServing(dir, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	token, err := pki.IssueJoinToken(ca, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	start := func(siblings func() ([]string, <-chan struct{})) (*rootRelay, func()) {
		ln, err := link.Listen(link.ListenConfig{TLS: pki.LinkServerTLS(serving, ca.Cert), Addr: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		st := newStore(t)
		down := NewDownlink(DownlinkConfig{
			Name: "root", Path: []string{"root"}, Store: st, Listener: ln, Logger: quiet,
			Authority: &join.Authority{CA: ca, Root: ca.Cert, Path: []string{"root"}},
			Mailboxes: mailbox.New(mailbox.Config{Store: st, Space: downsync}), Siblings: siblings,
			Reports: func(_ context.Context, c pki.Identity) (string, error) { return "reports-" + c.Name, nil },
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = down.Start(ctx); close(done) }()
		var once sync.Once
		stop := func() { once.Do(func() { cancel(); _ = ln.Close(); <-done }) }
		t.Cleanup(stop)
		return &rootRelay{ca: ca, st: st, down: down, addr: ln.Addr().String(), token: token}, stop
	}
	a, stopA = start(set.get)
	b, _ = start(nil)
	return a, b, stopA
}

// startEdgeQuick runs edge-1's uplink (joined already) with a short
// handshake timeout, so that a dead parent is passed over quickly.
func startEdgeQuick(t *testing.T, parent, dataDir string, st *store.Store) *Uplink {
	t.Helper()
	up := NewUplink(UplinkConfig{
		Name: "edge-1", Role: pki.RoleEdge, DataDir: dataDir, Parents: []string{parent},
		Store: st, Inbox: "inbox", Outbox: "outbox", Subtree: edgeSubtree("edge-1"), Mode: link.ModeQUICOnly, Logger: quiet,
		Link: link.Config{HandshakeTimeout: time.Second}, Backoff: link.Backoff{Min: 20 * time.Millisecond, Max: 200 * time.Millisecond},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- up.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return up
}

func waitSiblings(t *testing.T, up *Uplink, want ...string) {
	t.Helper()
	poll.Until(t, "the child's siblings", func() error {
		if got := up.Siblings(); !slices.Equal(got, want) {
			return fmt.Errorf("%v, want %v", got, want)
		}
		return nil
	})
}

// A child learns its parent's siblings (after Welcome, and when they
// change), keeps them in its store, and, restarted while its parent is
// down with only that parent configured, is served by the sibling.
func TestSiblingsLearnedAndUsed(t *testing.T) {
	set := newSiblingSet()
	a, b, stopA := startSiblingParents(t, set)
	for _, p := range []*rootRelay{a, b} {
		send(t, p.st, "edge-1", "cm-1", "v1")
	}
	send(t, b.st, "edge-1", "cm-2", "v2") // b is ahead: fetched from above in a real tree
	edgeStore, dataDir := newStore(t), t.TempDir()

	up, stop := startEdge(t, a.addr, dataDir, a.token, edgeStore)
	inSync(t, a, "edge-1", edgeStore)
	waitSiblings(t, up) // told: none
	if got := up.DialOrder(); !slices.Equal(got, []string{a.addr}) {
		t.Fatalf("dial order %v, want only the parent", got)
	}
	// A sibling appears while the link is up.
	set.set("192.0.2.1:7443", b.addr, b.addr) // sorted, duplicates dropped; any address is only a candidate
	waitSiblings(t, up, b.addr, "192.0.2.1:7443")
	if got, want := up.DialOrder(), []string{a.addr, b.addr, "192.0.2.1:7443"}; !slices.Equal(got, want) {
		t.Fatalf("dial order %v, want %v", got, want)
	}
	set.set(b.addr)
	waitSiblings(t, up, b.addr)
	stop()

	// The parent dies; the child restarts with only it configured, and
	// finds the sibling in its store.
	probe := NewUplink(UplinkConfig{Parents: []string{a.addr}, Store: edgeStore, Logger: quiet})
	if err := probe.loadSiblings(); err != nil {
		t.Fatal(err)
	}
	if got, want := probe.DialOrder(), []string{a.addr, b.addr}; !slices.Equal(got, want) {
		t.Fatalf("dial order from the store %v, want %v", got, want)
	}
	stopA()
	up2 := startEdgeQuick(t, a.addr, dataDir, edgeStore)
	waitConnected(t, b, "edge-1")
	inSync(t, b, "edge-1", edgeStore)
	// b has no siblings: the child forgets a's, and stays with b.
	waitSiblings(t, up2)
	if got := up2.DialOrder(); !slices.Equal(got, []string{b.addr, a.addr}) {
		t.Fatalf("dial order at the sibling %v, want it first, then the configured parent", got)
	}
}

// A child of protocol version 1 is welcomed with version 1 and never sent
// Siblings (a message type it would not know); one of version 2 is sent
// Siblings right after Welcome.
func TestSiblingsOnlyForVersion2(t *testing.T) {
	set := newSiblingSet("10.0.0.2:7443")
	a, _, _ := startSiblingParents(t, set)
	dataDir := t.TempDir()
	_, stop := startEdge(t, a.addr, dataDir, a.token, newStore(t))
	waitConnected(t, a, "edge-1")
	stop()
	cert, rootCert, err := pki.LoadChildIdentity(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, versions := range [][]uint32{{1}, {2, 1}} {
		d := &link.Dialer{TLS: pki.LinkClientTLS(&cert, rootCert, join.ServerNameOf(a.addr)), Mode: link.ModeQUICOnly}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		conn, err := d.Dial(ctx, []string{a.addr})
		if err != nil {
			t.Fatal(err)
		}
		control, err := conn.OpenStream(ctx, link.StreamControl)
		if err != nil {
			t.Fatal(err)
		}
		if err := wire.NewWriter(control, nil).Send(&wire.Hello{Name: "edge-1", Role: wire.RoleEdge, Versions: versions}); err != nil {
			t.Fatal(err)
		}
		r := wire.NewReader(control, nil)
		welcome, err := wire.Expect[*wire.Welcome](r)
		if err != nil {
			t.Fatal(err)
		}
		if welcome.Version != versions[0] {
			t.Errorf("Hello.Versions %v: Welcome.Version %d", versions, welcome.Version)
		}
		// The parent's control loops start once downsync and upsync are
		// open.
		for _, kind := range []link.StreamKind{link.StreamDownsync, link.StreamUpsync} {
			if _, err := conn.OpenStream(ctx, kind); err != nil {
				t.Fatal(err)
			}
		}
		got := make(chan wire.Message, 1)
		go func() {
			m, err := r.Read()
			if err != nil {
				close(got)
				return
			}
			got <- m
		}()
		if welcome.Version >= 2 {
			m := <-got // the parent sends it at once; the link's end unblocks this
			if s, ok := m.(*wire.Siblings); !ok || !slices.Equal(s.Addrs, []string{"10.0.0.2:7443"}) {
				t.Errorf("version 2 link: the parent sent %#v, want Siblings [10.0.0.2:7443]", m)
			}
		} else {
			// Nothing may follow Welcome on a version 1 link. This can only
			// miss a wrong message, never fail a right parent.
			select {
			case m, ok := <-got:
				if ok {
					t.Errorf("version 1 link: the parent sent %s", m.Type())
				}
			case <-time.After(500 * time.Millisecond):
			}
		}
		_ = conn.Close("test")
		_ = d.Close()
		cancel()
	}
}
