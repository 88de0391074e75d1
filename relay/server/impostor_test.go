package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/join"
	"github.com/canopy-dev/canopy/relay/transport/session"
	"github.com/canopy-dev/canopy/relay/transport/tree"
	"github.com/canopy-dev/canopy/test/poll"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// A tree of root, region-a with edge e3, and region-b, and a Secret
// placed for e3 alone. An impostor holding a join token starts as e3
// under region-b: its join is refused. An impostor with a certificate for
// e3 that region-b's CA signed (as a relay that joined before the root
// kept a registry would hold, or one a region signed without asking) is
// refused when it links. Neither gets e3's Secret into region-b, moves
// e3's SyncTarget or makes e3 lose what it applied.
func TestImpostorCannotTakeOverADestination(t *testing.T) {
	root := startTestRoot(t)
	token := joinToken(t, root)
	region := func(name string) *Child {
		c := startTestChild(t, ChildConfig{Role: pki.RoleRegion, Name: name, DataDir: t.TempDir(), Parents: []string{root.LinkAddr()},
			JoinToken: token, LinkAddr: "127.0.0.1:0", InMemory: true})
		poll.True(t, name+" serving", func() bool { return c.LinkAddr() != "" && c.Uplink().Connected() })
		return c
	}
	a, b := region("region-a"), region("region-b")
	e3 := startTestChild(t, ChildConfig{Role: pki.RoleEdge, Name: "e3", DataDir: t.TempDir(), Parents: []string{a.LinkAddr()},
		JoinToken: token, InMemory: true})
	data := fmt.Sprintf(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"only-e3","namespace":"default","annotations":{%q:"e3"}},"data":{"k":"c2VjcmV0"}}`,
		edgev1alpha1.DestinationsAnnotation)
	k := store.Key{Space: layout.DownsyncSpace, Resource: store.Resource{Resource: "secrets"}, Namespace: "default", Name: "only-e3"}
	if _, err := root.Store().Create(context.Background(), k, []byte(data)); err != nil {
		t.Fatal(err)
	}
	secret := "secrets/default/only-e3"
	poll.True(t, "e3 holding its Secret", func() bool { return slices.Contains(inbox(e3), secret) })

	// With a token: the join is refused, naming the name.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	impostor, err := OpenChild(ChildConfig{Role: pki.RoleEdge, Name: "e3", DataDir: t.TempDir(), Parents: []string{b.LinkAddr()},
		JoinToken: token, InMemory: true}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	err = impostor.Serve(ctx)
	if !errors.Is(err, join.ErrRefused) || !strings.Contains(err.Error(), `relay name "e3" is joined already (at root/region-a/e3)`) {
		t.Fatalf("the impostor's join: %v; want a refusal naming e3", err)
	}

	// With a certificate region-b signed: the root refuses its key.
	dir := t.TempDir()
	forgeIdentity(t, b, dir, "e3")
	before := b.Downlink().RegistrationsRefused()
	startTestChild(t, ChildConfig{Role: pki.RoleEdge, Name: "e3", DataDir: dir, Parents: []string{b.LinkAddr()}, InMemory: true})
	poll.True(t, "region-b refusing the forged e3", func() bool { return b.Downlink().RegistrationsRefused() > before })

	// Nothing moved: the Secret is not below region-b, e3 is where it was,
	// connected, and still holds it. (The forged link was refused before
	// region-b served it anything.)
	if slices.Contains(inbox(b), secret) {
		t.Error("region-b received e3's Secret")
	}
	if rt, _, err := tree.ReadRoute(root.Store(), tree.RouteKey(layout.DownsyncSpace, "region-b")); err != nil || len(rt.Destinations) != 0 {
		t.Errorf("region-b's route at the root: %+v, %v; want no destination", rt.Destinations, err)
	}
	dests, _ := root.down.Subtree()
	if len(dests) != 1 || !slices.Equal(dests[0].Path, []string{"region-a", "e3"}) || !dests[0].Connected {
		t.Errorf("the root's subtree %+v, want e3 connected through region-a", dests)
	}
	if !slices.Contains(inbox(e3), secret) {
		t.Error("e3 lost its Secret")
	}
}

// forgeIdentity writes into dir a certificate for name signed by region
// r's CA, with a key of its own, without the root knowing.
func forgeIdentity(t *testing.T, r *Child, dir, name string) {
	t.Helper()
	ca, err := pki.LoadChildCA(r.cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	key, err := pki.NewChildKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := pki.NewCSR(key, name)
	if err != nil {
		t.Fatal(err)
	}
	own, err := pki.IdentityFromCert(ca.Cert)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := ca.SignChild(csr, pki.RoleEdge, own.Path, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := pki.EncodeKeyPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	rootCA, err := os.ReadFile(filepath.Join(pki.Dir(r.cfg.DataDir), pki.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := pki.SaveChildIdentity(dir, keyPEM, chain, rootCA); err != nil {
		t.Fatal(err)
	}
}

// A stale claim never empties a connected edge. The root's route record
// of region-b, which is gone, claims e3 with a far later Since, as an
// impostor's claim left from before the registry did. After the root
// restarts, region-a, to which e3 is connected, keeps e3: e3 never
// deletes what it applied, and once region-a has announced e3 again it is
// not superseded (until then both claims are disconnected, and the later
// Since wins for a moment).
func TestStaleClaimNeverEmptiesAConnectedEdge(t *testing.T) {
	root, cfg, stopRoot := startStoppableRoot(t)
	token := joinToken(t, root)
	region := func(name string) (*Child, func()) {
		cfg := ChildConfig{Role: pki.RoleRegion, Name: name, DataDir: t.TempDir(), Parents: []string{root.LinkAddr()},
			JoinToken: token, LinkAddr: "127.0.0.1:0", InMemory: true}
		c, err := OpenChild(cfg, quiet)
		if err != nil {
			t.Fatal(err)
		}
		stop := serveInBackground(t, name, c.Serve)
		poll.True(t, name+" serving", func() bool { return c.LinkAddr() != "" && c.Uplink().Connected() })
		return c, stop
	}
	a, _ := region("region-a")
	_, stopB := region("region-b")
	e3 := startTestChild(t, ChildConfig{Role: pki.RoleEdge, Name: "e3", DataDir: t.TempDir(), Parents: []string{a.LinkAddr()},
		JoinToken: token, InMemory: true})
	k := store.Key{Space: layout.DownsyncSpace, Resource: store.Resource{Resource: "configmaps"}, Namespace: "default", Name: "kept"}
	data := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"kept","namespace":"default","annotations":{%q:"e3"}}}`, edgev1alpha1.DestinationsAnnotation)
	if _, err := root.Store().Create(context.Background(), k, []byte(data)); err != nil {
		t.Fatal(err)
	}
	kept := "configmaps/default/kept"
	poll.True(t, "e3 holding its ConfigMap", func() bool { return slices.Contains(inbox(e3), kept) })
	deleted := make(chan struct{}, 1)
	w, err := e3.Store().Watch(t.Context(), store.WatchOptions{Space: layout.InboxSpace, Since: e3.Store().Revision()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	go func() {
		for ev := range w.Events() {
			if ev.Type == store.Deleted && ev.Prev != nil && ev.Prev.Key.Name == "kept" {
				deleted <- struct{}{}
			}
		}
	}()

	stopB()
	poll.True(t, "region-b gone", func() bool { return !childStatusOf(root, "region-b").Connected })
	stale, err := tree.EncodeRoute(tree.RouteKey(layout.DownsyncSpace, "region-b").Name, []tree.RouteDestination{
		{Name: "e3", Path: []string{"region-b", "e3"}, Since: 1 << 62, Connected: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.Store().Update(context.Background(), tree.RouteKey(layout.DownsyncSpace, "region-b"), stale, 0); err != nil {
		t.Fatal(err)
	}
	root = reopenRoot(t, cfg, root, stopRoot)
	poll.True(t, "region-a linked again", func() bool { return childStatusOf(root, "region-a").Connected })

	// Something new for e3 goes through: the tree has moved on since the
	// restart, and the old ConfigMap was never deleted meanwhile.
	k.Name = "later"
	if _, err := root.Store().Create(context.Background(), k, []byte(strings.ReplaceAll(data, "kept", "later"))); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "e3 receiving a new ConfigMap", func() bool { return slices.Contains(inbox(e3), "configmaps/default/later") })
	select {
	case <-deleted:
		t.Fatal("e3 deleted what it applied because of a stale claim")
	default:
	}
	poll.True(t, "region-a no longer superseded by region-b's stale claim", func() bool {
		return !childStatusOf(root, "region-a").Superseded
	})
	dests, _ := root.down.Subtree()
	if len(dests) != 1 || !slices.Equal(dests[0].Path, []string{"region-a", "e3"}) || !dests[0].Connected {
		t.Errorf("the root's subtree %+v, want e3 connected through region-a", dests)
	}
}

func childStatusOf(r *Root, name string) session.ChildStatus {
	for _, c := range r.Children() {
		if c.Identity.Name == name {
			return c
		}
	}
	return session.ChildStatus{}
}
