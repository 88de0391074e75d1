package session

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/internal/wire"
	"github.com/canopy-dev/canopy/relay/transport/join"
	"github.com/canopy-dev/canopy/relay/transport/link"
	"github.com/canopy-dev/canopy/relay/transport/registry"
	"github.com/canopy-dev/canopy/relay/transport/tree"
	"github.com/canopy-dev/canopy/test/poll"
)

// startRegisteredRoot is startRoot with the root's registry: joins and
// links are recorded, children's claims checked, and its token recorded.
// tweaks change the downlink's configuration further.
func startRegisteredRoot(t *testing.T, tweaks ...func(*DownlinkConfig)) *rootRelay {
	t.Helper()
	r := startRootWith(t, func(cfg *DownlinkConfig) {
		reg := registry.New(registry.Config{Store: cfg.Store, Root: cfg.Authority.Root, RootName: "root", Logger: quiet})
		cfg.Registrar, cfg.Authority.Registrar = reg, reg
		for _, tweak := range tweaks {
			tweak(cfg)
		}
	})
	tok, claims, err := pki.IssueLimitedJoinToken(r.ca, pki.JoinLimits{}, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := registry.RecordToken(context.Background(), r.st, claims); err != nil {
		t.Fatal(err)
	}
	r.token = tok
	return r
}

// subtree is a region's announcement that a test sets.
type subtree struct {
	mu      sync.Mutex
	dests   []wire.Destination
	changed chan struct{}
}

func newSubtree() *subtree { return &subtree{changed: make(chan struct{})} }

func (s *subtree) get() ([]wire.Destination, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.dests), s.changed
}

func (s *subtree) set(dests ...wire.Destination) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dests = dests
	close(s.changed)
	s.changed = make(chan struct{})
}

// startRegion runs a region's uplink (no children: the test announces for
// it) until the test ends.
func startRegion(t *testing.T, root *rootRelay, name string, sub *subtree) *Uplink {
	t.Helper()
	up := NewUplink(UplinkConfig{
		Name: name, Role: pki.RoleRegion, DataDir: t.TempDir(), Parents: []string{root.addr}, JoinToken: root.token,
		Store: newStore(t), Inbox: "inbox", Outbox: "outbox", Subtree: sub.get, Mode: link.ModeQUICOnly, Logger: quiet,
		Backoff: link.Backoff{Min: 20 * time.Millisecond, Max: 200 * time.Millisecond},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = up.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	poll.True(t, name+" linked", up.Connected)
	return up
}

// edgeKey is an edge's key, for link proofs a test makes.
type edgeKey struct {
	key *ecdsa.PrivateKey
	der []byte
}

func newEdgeKey(t *testing.T) edgeKey {
	t.Helper()
	k, err := pki.NewChildKey()
	if err != nil {
		t.Fatal(err)
	}
	der, err := pki.PublicKeyDER(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	return edgeKey{key: k, der: der}
}

// link is the registration a parent sends for an edge linked at path,
// with the edge's proof.
func (k edgeKey) link(t *testing.T, path ...string) join.Registration {
	t.Helper()
	r := join.Registration{Name: path[len(path)-1], Role: pki.RoleEdge, Path: path, PublicKey: k.der, ProofTime: time.Now().UnixNano()}
	var err error
	if r.Proof, err = pki.SignLinkProof(k.key, path, r.ProofTime); err != nil {
		t.Fatal(err)
	}
	return r
}

func routeNames(t *testing.T, st *store.Store, child string) []string {
	t.Helper()
	rt, _, err := tree.ReadRoute(st, tree.RouteKey(downsync, child))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range rt.Destinations {
		out = append(out, d.Name)
	}
	return out
}

func childStatus(root *rootRelay, name string) ChildStatus {
	for _, c := range root.down.Children() {
		if c.Identity.Name == name {
			return c
		}
	}
	return ChildStatus{}
}

// A name joins once. An impostor with a valid token, joining as a
// connected edge's name, is refused with a message naming the name; the
// real edge's link is never replaced, and the refusal is counted.
func TestJoinedNameCannotJoinAgain(t *testing.T) {
	root := startRegisteredRoot(t)
	edgeStore := newStore(t)
	up, _ := startEdge(t, root.addr, t.TempDir(), root.token, edgeStore)
	poll.True(t, "edge-1 linked", up.Connected)
	send(t, root.st, "edge-1", "secret", "for edge-1 only")
	inSync(t, root, "edge-1", edgeStore)

	impostor := NewUplink(UplinkConfig{Name: "edge-1", Role: pki.RoleEdge, DataDir: t.TempDir(), Parents: []string{root.addr},
		JoinToken: root.token, Store: newStore(t), Inbox: "inbox", Outbox: "outbox", Subtree: edgeSubtree("edge-1"),
		Mode: link.ModeQUICOnly, Logger: quiet})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := impostor.Start(ctx)
	if !errors.Is(err, join.ErrRefused) || !strings.Contains(err.Error(), `relay name "edge-1" is joined already`) {
		t.Fatalf("the impostor's join: %v; want a refusal naming edge-1", err)
	}
	if c := childStatus(root, "edge-1"); !c.Connected || c.Links != 1 {
		t.Errorf("the real edge after the impostor: %+v; want its one link, connected", c)
	}
	if n := root.down.RegistrationsRefused(); n == 0 {
		t.Error("the refused join was not counted")
	}
}

// A region claims only destinations the root registered below it, with
// the generation it was given: a destination never linked below it, a
// destination of another region, or a forged generation are refused,
// logged and counted, and do not supersede the real claim. A link below
// another region needs the edge's own proof; with it, the destination
// moves, and the newer claim wins.
func TestRegionClaimsOnlyWhatWasGranted(t *testing.T) {
	root := startRegisteredRoot(t)
	subA, subB := newSubtree(), newSubtree()
	a := startRegion(t, root, "region-a", subA)
	b := startRegion(t, root, "region-b", subB)
	ctx := context.Background()
	e1 := newEdgeKey(t)

	gen1, err := a.Register(ctx, e1.link(t, "root", "region-a", "e1"))
	if err != nil {
		t.Fatal(err)
	}
	// Paths are relative to the region, which prepends its name.
	subA.set(wire.Destination{Name: "e1", Path: []string{"e1"}, Since: gen1, Connected: true},
		wire.Destination{Name: "e2", Path: []string{"e2"}, Since: gen1, Connected: true}, // never registered
		wire.Destination{Name: "region-a", Since: gen1, Connected: true})                 // itself
	poll.True(t, "region-a's claim of e1 recorded", func() bool { return slices.Equal(routeNames(t, root.st, "region-a"), []string{"e1"}) })
	if n := childStatus(root, "region-a").ClaimsRefused; n < 2 {
		t.Errorf("region-a: %d claims refused, want 2", n)
	}

	// region-b may not register e1 where it is not, nor move it without
	// e1's proof, nor claim it.
	if _, err := b.Register(ctx, e1.link(t, "root", "region-a", "e1")); !errors.Is(err, join.ErrRefused) {
		t.Errorf("region-b registering below region-a: %v", err)
	}
	forged := newEdgeKey(t).link(t, "root", "region-b", "e1")
	forged.PublicKey = e1.der
	if _, err := b.Register(ctx, forged); !errors.Is(err, join.ErrRefused) {
		t.Errorf("region-b moving e1 with another key's proof: %v", err)
	}
	subB.set(wire.Destination{Name: "e1", Path: []string{"e1"}, Since: 1 << 62, Connected: true})
	poll.True(t, "region-b's claim refused", func() bool { return childStatus(root, "region-b").ClaimsRefused > 0 })
	if names := routeNames(t, root.st, "region-b"); len(names) != 0 {
		t.Errorf("region-b's route %v, want none", names)
	}
	if c := childStatus(root, "region-a"); c.Superseded {
		t.Error("region-a's claim of e1 is superseded by a refused one")
	}

	// e1 really moves to region-b: its proof, a newer generation, region-b
	// wins.
	gen2, err := b.Register(ctx, e1.link(t, "root", "region-b", "e1"))
	if err != nil || gen2 <= gen1 {
		t.Fatalf("e1 moving to region-b: generation %d (was %d), %v", gen2, gen1, err)
	}
	subB.set(wire.Destination{Name: "e1", Path: []string{"e1"}, Since: gen2, Connected: true})
	poll.True(t, "region-a superseded", func() bool { return childStatus(root, "region-a").Superseded })
	if names := routeNames(t, root.st, "region-b"); !slices.Equal(names, []string{"e1"}) {
		t.Errorf("region-b's route %v, want e1", names)
	}
}
