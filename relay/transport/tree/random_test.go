package tree

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/poll"
)

// Routed downsync under random interleavings: objects created, retargeted
// and deleted, subtrees changed, links cut (some mid-burst), parents
// restarted (a new Sender) — while two children come and go. Whatever
// happened, once linked again each child converges to exactly its share.
// (It found three bugs of resuming after route changes: what the child
// held judged by the subtree of now instead of the one at its cursor, or
// without the frames a link sent past its last Progress; a replayed route
// change coalesced with a live one; a delete skipped after a route change
// re-sent the key.)
//
// The parent's store addresses objects (store.Options.Addresses), as a
// relay's does, so each Sender watches only what is addressed to its
// child's subtree; the first seeds run again without, where each Sender
// judges every event of the space.
func TestRoutedRandomized(t *testing.T) {
	for seed := range uint64(60) {
		t.Run(fmt.Sprint("seed-", seed), func(t *testing.T) { routedRandomized(t, seed, store.Options{Addresses: targetsOf}) })
	}
	for seed := range uint64(20) {
		t.Run(fmt.Sprint("unaddressed-seed-", seed), func(t *testing.T) { routedRandomized(t, seed, store.Options{}) })
	}
}

func routedRandomized(t *testing.T, seed uint64, opts store.Options) {
	rng := rand.New(rand.NewPCG(seed, 7))
	parent := newStore(t, opts)
	dests := []string{"d1", "d2", "d3", "d4", "d5"}
	subset := func() []string {
		var out []string
		for _, d := range dests {
			if rng.IntN(3) == 0 {
				out = append(out, d)
			}
		}
		return out
	}
	type child struct {
		*routedChild
		snd    *Sender
		sess   *session
		routes []string
	}
	var children []*child
	for _, name := range []string{"c1", "c2"} {
		c := &child{routedChild: newRoutedChild(t, name), snd: routedSender(parent, name), routes: subset()}
		setRoute(t, parent, name, c.routes...)
		children = append(children, c)
	}
	link := func(c *child, mayCut bool) {
		if mayCut && rng.IntN(4) == 0 {
			// Cut mid-burst, after a few hundred bytes.
			limit := int64(200 + rng.IntN(3000))
			c.sess = down(t, c.snd, c.rcv, func(p *pipe) io.ReadWriteCloser {
				return &slowConn{Conn: p.parent, p: p, limit: limit}
			})
			return
		}
		c.sess = down(t, c.snd, c.rcv, nil)
	}
	for _, c := range children {
		link(c, true)
	}
	for version := 1; version <= 60; version++ {
		switch op := rng.IntN(10); {
		case op < 5:
			name := fmt.Sprint("o", rng.IntN(12))
			to := subset()
			rev := put(t, parent, key(shared, "ns", name), targeted(name, fmt.Sprint(version), to...))
			t.Logf("%d: put %s targeting %v at %d", version, name, to, rev)
		case op < 6:
			k := key(shared, "ns", fmt.Sprint("o", rng.IntN(12)))
			if _, err := parent.Get(k); err == nil {
				t.Logf("%d: delete %s at %d", version, k.Name, del(t, parent, k))
			}
		case op < 8:
			c := children[rng.IntN(len(children))]
			c.routes = subset()
			rev := setRoute(t, parent, c.name, c.routes...)
			t.Logf("%d: %s's routes %v at %d", version, c.name, c.routes, rev)
		default:
			c := children[rng.IntN(len(children))]
			c.sess.cut()
			cursor, _ := c.rcv.Cursor()
			t.Logf("%d: %s's link cut (parent restarted: %v), its cursor %d, the parent at %d", version, c.name, op == 9, cursor, parent.Revision())
			if op == 9 {
				c.snd = routedSender(parent, c.name) // the parent restarted
			}
			link(c, true)
		}
	}
	for _, c := range children {
		c.sess.cut()
		link(c, false)
		want := routedHash(t, parent, c.routes...)
		// The cursor may stay below the parent's last revision (another
		// child's route record): the content is what counts.
		poll.Until(t, c.name+" to converge", func() error {
			if hash(t, c.store, inbox) == want {
				return nil
			}
			cursor, _ := c.rcv.Cursor()
			return fmt.Errorf("routes %v, cursor %d, parent at %d: %s",
				c.routes, cursor, parent.Revision(), routedDiff(t, parent, c.store, c.routes))
		})
	}
}

// routedDiff says how the child's inbox differs from what the parent
// routes to dests: keys missing, extra, or held at another version (the
// data compared without resourceVersion, which each store sets).
func routedDiff(t *testing.T, parent, child *store.Store, dests []string) string {
	lr, err := parent.List(store.ListOptions{Space: shared})
	if err != nil {
		t.Fatal(err)
	}
	cr, err := child.List(store.ListOptions{Space: inbox})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]*store.Object{}
	for _, o := range cr.Items {
		have[o.Key.Namespace+"/"+o.Key.Name] = o
	}
	var out []string
	for _, o := range lr.Items {
		if !slices.ContainsFunc(targetsOf(o), func(d string) bool { return slices.Contains(dests, d) }) {
			continue
		}
		n := o.Key.Namespace + "/" + o.Key.Name
		h, ok := have[n]
		delete(have, n)
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("missing %s (rev %d)", n, o.Revision))
		case !bytes.Equal(mustStrip(t, h.Data), mustStrip(t, o.Data)):
			out = append(out, fmt.Sprintf("%s differs: has %s, want %s (rev %d)", n, h.Data, o.Data, o.Revision))
		}
	}
	for n, o := range have {
		out = append(out, fmt.Sprintf("extra %s: %s", n, o.Data))
	}
	return strings.Join(out, "; ")
}

// mustStrip is stripResourceVersion (what ContentHash compares) for a test.
func mustStrip(t *testing.T, data []byte) []byte {
	t.Helper()
	b, err := stripResourceVersion(data)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
