package session

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/internal/wire"
	"github.com/canopy-dev/canopy/relay/transport/join"
	"github.com/canopy-dev/canopy/relay/transport/link"
	"github.com/canopy-dev/canopy/relay/transport/mailbox"
	"github.com/canopy-dev/canopy/relay/transport/tree"
	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// newStore returns a store in memory that reads objects' destinations
// (mailbox.Targets), as a relay's does.
func newStore(t *testing.T) *store.Store {
	t.Helper()
	st := store.New(store.Options{Fields: mailbox.Fields(nil), Addresses: mailbox.Targets})
	st.SetLog(store.NewMemLog(st))
	t.Cleanup(st.Close)
	return st
}

type rootRelay struct {
	ca    *pki.CA
	st    *store.Store
	down  *Downlink
	addr  string
	token string
}

// startRoot starts a parent at the top of a tree: CA, serving
// certificate, link listener and downlink.
func startRoot(t *testing.T) *rootRelay { return startRootWith(t, nil) }

// startRootWith is startRoot with the downlink's configuration changed
// by tweak.
func startRootWith(t *testing.T, tweak func(*DownlinkConfig)) *rootRelay {
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
	ln, err := link.Listen(link.ListenConfig{TLS: pki.LinkServerTLS(serving, ca.Cert), Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	st := newStore(t)
	cfg := DownlinkConfig{
		Name: "root", Path: []string{"root"}, Store: st, Listener: ln, Logger: quiet,
		Authority: &join.Authority{CA: ca, Root: ca.Cert, Path: []string{"root"}},
		Mailboxes: mailbox.New(mailbox.Config{Store: st, Space: downsync}),
		Reports:   func(_ context.Context, c pki.Identity) (string, error) { return "reports-" + c.Name, nil },
	}
	if tweak != nil {
		tweak(&cfg)
	}
	down := NewDownlink(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = down.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); _ = ln.Close(); <-done })
	token, err := pki.IssueJoinToken(ca, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return &rootRelay{ca: ca, st: st, down: down, addr: ln.Addr().String(), token: token}
}

// startEdge runs an edge's uplink with its own store until the returned
// stop is called.
func startEdge(t *testing.T, parent, dataDir, token string, st *store.Store) (*Uplink, func()) {
	t.Helper()
	up := NewUplink(UplinkConfig{
		Name: "edge-1", Role: pki.RoleEdge, DataDir: dataDir, Parents: []string{parent}, JoinToken: token,
		Store: st, Inbox: "inbox", Outbox: "outbox", Subtree: edgeSubtree("edge-1"), Mode: link.ModeQUICOnly, Logger: quiet,
		Backoff: link.Backoff{Min: 20 * time.Millisecond, Max: 200 * time.Millisecond},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- up.Start(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Error("uplink did not stop")
			}
		})
	}
	t.Cleanup(stop)
	return up, stop
}

// put creates or replaces a ConfigMap in space (annotated for dest, when
// set).
func put(t *testing.T, st *store.Store, space, name, value string) {
	upsert(t, st, space, "", name, value)
}

func upsert(t *testing.T, st *store.Store, space, dest, name, value string) {
	t.Helper()
	k := store.Key{Space: space, Resource: store.Resource{Resource: "configmaps"}, Namespace: "default", Name: name}
	ann := ""
	if dest != "" {
		ann = fmt.Sprintf(`,"annotations":{%q:%q}`, v1alpha1.DestinationsAnnotation, dest)
	}
	data := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"default"%s},"data":{"v":%q}}`, name, ann, value)
	if _, err := st.Get(k); err == nil {
		if _, err := st.Update(context.Background(), k, []byte(data), 0); err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := st.Create(context.Background(), k, []byte(data)); err != nil {
		t.Fatal(err)
	}
}

// downsync is the parent's shared space: every object once, annotated
// with the destinations it targets (v1alpha1.DestinationsAnnotation).
const downsync = "downsync"

// send writes a ConfigMap for destination dest into the parent's shared
// space.
func send(t *testing.T, st *store.Store, dest, name, value string) {
	upsert(t, st, downsync, dest, name, value)
}

// inSync waits until child's inbox holds its mailbox at the parent.
func inSync(t *testing.T, root *rootRelay, child string, st *store.Store) {
	t.Helper()
	converge(t, child+"'s mailbox", func() (string, error) {
		rt := root.down.cfg.Mailboxes.Routing(child)
		if _, err := root.st.Get(rt.Record); err != nil {
			return "", fmt.Errorf("%s has not announced: %w", child, err)
		}
		return tree.RoutedContentHash(root.st, downsync, rt)
	}, "inbox", func() (string, error) { return tree.ContentHash(st, "inbox") })
}

func converge(t *testing.T, as string, a func() (string, error), bs string, b func() (string, error)) {
	t.Helper()
	poll.Until(t, as+" and "+bs+" to converge", func() error {
		ha, err1 := a()
		hb, err2 := b()
		if err1 == nil && err2 == nil && ha == hb {
			return nil
		}
		return fmt.Errorf("%s vs %s, %v %v", ha, hb, err1, err2)
	})
}

func sameContent(t *testing.T, a *store.Store, as string, b *store.Store, bs string) {
	t.Helper()
	converge(t, as, func() (string, error) { return tree.ContentHash(a, as) },
		bs, func() (string, error) { return tree.ContentHash(b, bs) })
}

// An edge joins with a token, receives its mailbox, reports upward, and
// after a restart reconnects with its certificate and resumes.
func TestEdgeJoinsSyncsAndResumes(t *testing.T) {
	root := startRoot(t)
	for i := range 20 {
		send(t, root.st, "edge-1", fmt.Sprintf("cm-%d", i), "v1")
	}
	dataDir := t.TempDir()
	edgeStore := newStore(t)
	up, stop := startEdge(t, root.addr, dataDir, root.token, edgeStore)
	inSync(t, root, "edge-1", edgeStore)
	if !up.Connected() {
		t.Fatal("uplink not connected after syncing")
	}

	// Upsync: what the edge puts in its outbox reaches the parent.
	put(t, edgeStore, "outbox", "report-1", "ok")
	sameContent(t, edgeStore, "outbox", root.st, "reports-edge-1")

	// Restart the edge without a token: its certificate is enough, and
	// what changed meanwhile arrives.
	stop()
	// Count from when the parent has seen the old link go, so that sends
	// on the dying link are not counted as the resume's.
	poll.True(t, "the parent to see the edge disconnect", func() bool { return !root.down.Children()[0].Connected })
	before := root.down.Children()[0].Down.Objects
	for i := range 5 {
		send(t, root.st, "edge-1", fmt.Sprintf("cm-%d", i), "v2")
	}
	send(t, root.st, "edge-1", "cm-new", "v1")
	_, _ = startEdge(t, root.addr, dataDir, "", edgeStore)
	inSync(t, root, "edge-1", edgeStore)
	children := root.down.Children()
	if len(children) != 1 || children[0].Identity.String() != "root/edge-1" || children[0].Links < 2 {
		t.Fatalf("children = %+v", children)
	}
	if sent := children[0].Down.Objects - before; sent > 6 {
		t.Fatalf("resume sent %d objects, want the 6 that changed", sent)
	}
}

func TestEdgeWithoutTokenOrIdentity(t *testing.T) {
	root := startRoot(t)
	up := NewUplink(UplinkConfig{Name: "edge-1", Role: pki.RoleEdge, DataDir: t.TempDir(), Parents: []string{root.addr},
		Store: newStore(t), Inbox: "inbox", Outbox: "outbox", Logger: quiet})
	if err := up.Start(context.Background()); err != ErrNoToken {
		t.Fatalf("start without token or identity: %v, want ErrNoToken", err)
	}
}

// edgeSubtree announces an edge's own destination, as the edge relay does.
func edgeSubtree(name string) func() ([]wire.Destination, <-chan struct{}) {
	return func() ([]wire.Destination, <-chan struct{}) {
		return []wire.Destination{{Name: name, Connected: true}}, nil
	}
}

// A parent restarted on the same store knows its children before they
// reconnect: each disconnected, with the destinations it last announced
// (so the parent's own announcement upward does not lose them), and a
// child resuming afterwards is sent only what changed.
func TestRestartedParentReloadsRoutes(t *testing.T) {
	root := startRoot(t)
	for i := range 10 {
		send(t, root.st, "edge-1", fmt.Sprintf("cm-%d", i), "v1")
	}
	dataDir, edgeStore := t.TempDir(), newStore(t)
	_, stop := startEdge(t, root.addr, dataDir, root.token, edgeStore)
	inSync(t, root, "edge-1", edgeStore)
	stop()

	restarted := restartOn(t, root, link.ListenConfig{Addr: "127.0.0.1:0"})
	poll.Until(t, "the restarted parent's subtree", func() error {
		dests, _ := restarted.down.Subtree()
		if len(dests) == 1 && dests[0].Name == "edge-1" && !dests[0].Connected {
			return nil
		}
		return fmt.Errorf("%+v, want edge-1, disconnected", dests)
	})
	send(t, restarted.st, "edge-1", "cm-0", "v2")
	_, _ = startEdge(t, restarted.addr, dataDir, "", edgeStore)
	inSync(t, restarted, "edge-1", edgeStore)
	waitConnected(t, restarted, "edge-1")
	for _, c := range restarted.down.Children() {
		if c.Down.Resyncs != 0 || c.Down.Objects != 1 {
			t.Fatalf("resume under a restarted parent: %d resyncs, %d objects; want 0 and 1", c.Down.Resyncs, c.Down.Objects)
		}
	}
}

// A child keeps the Since of its home across reconnects and restarts under
// the same parent store, and takes a later one when it re-homes (another
// epoch), even if its clock went back.
func TestHomed(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	first, err := homed(ctx, st, "epoch-a")
	if err != nil || first == 0 {
		t.Fatalf("homed = %d, %v", first, err)
	}
	if again, err := homed(ctx, st, "epoch-a"); err != nil || again != first {
		t.Fatalf("same parent: homed = %d, %v; want %d", again, err, first)
	}
	// A record from the future (a clock that went back since).
	k := store.Key{Resource: homeResource, Name: "parent"}
	o, err := st.Get(k)
	if err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Hour).UnixNano()
	if _, err := st.Update(ctx, k, []byte(fmt.Sprintf(`{"metadata":{"name":"parent"},"epoch":"epoch-a","since":%d}`, future)), o.Revision); err != nil {
		t.Fatal(err)
	}
	moved, err := homed(ctx, st, "epoch-b")
	if err != nil || moved <= future {
		t.Fatalf("re-homed: homed = %d, %v; want after %d", moved, err, future)
	}
}
