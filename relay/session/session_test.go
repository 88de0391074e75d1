package session

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/join"
	"github.com/canopy-dev/canopy/relay/link"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/tree"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func newStore(t *testing.T) *store.Store {
	t.Helper()
	st := store.New(store.Options{})
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
func startRoot(t *testing.T) *rootRelay {
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
	down := NewDownlink(DownlinkConfig{
		Name: "root", Path: []string{"root"}, Store: st, Listener: ln, Logger: quiet,
		Authority: &join.Authority{CA: ca, Root: ca.Cert, Path: []string{"root"}},
		Mailbox:   func(_ context.Context, c pki.Identity) (string, error) { return "mailbox-" + c.Name, nil },
		Reports:   func(_ context.Context, c pki.Identity) (string, error) { return "reports-" + c.Name, nil },
	})
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
		Store: st, Inbox: "inbox", Outbox: "outbox", Mode: link.ModeQUICOnly, Logger: quiet,
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

func put(t *testing.T, st *store.Store, space, name, value string) {
	t.Helper()
	k := store.Key{Space: space, Resource: store.Resource{Resource: "configmaps"}, Namespace: "default", Name: name}
	data := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"default"},"data":{"v":%q}}`, name, value)
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

func sameContent(t *testing.T, a *store.Store, as string, b *store.Store, bs string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ha, err1 := tree.ContentHash(a, as)
		hb, err2 := tree.ContentHash(b, bs)
		if err1 == nil && err2 == nil && ha == hb {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s and %s did not converge (%s vs %s, %v %v)", as, bs, ha, hb, err1, err2)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An edge joins with a token, receives its mailbox, reports upward, and
// after a restart reconnects with its certificate and resumes.
func TestEdgeJoinsSyncsAndResumes(t *testing.T) {
	root := startRoot(t)
	for i := range 20 {
		put(t, root.st, "mailbox-edge-1", fmt.Sprintf("cm-%d", i), "v1")
	}
	dataDir := t.TempDir()
	edgeStore := newStore(t)
	up, stop := startEdge(t, root.addr, dataDir, root.token, edgeStore)
	sameContent(t, root.st, "mailbox-edge-1", edgeStore, "inbox")
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
	deadline := time.Now().Add(10 * time.Second)
	for root.down.Children()[0].Connected {
		if time.Now().After(deadline) {
			t.Fatal("the parent never saw the edge disconnect")
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := root.down.Children()[0].Down.Objects
	for i := range 5 {
		put(t, root.st, "mailbox-edge-1", fmt.Sprintf("cm-%d", i), "v2")
	}
	put(t, root.st, "mailbox-edge-1", "cm-new", "v1")
	_, _ = startEdge(t, root.addr, dataDir, "", edgeStore)
	sameContent(t, root.st, "mailbox-edge-1", edgeStore, "inbox")
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
