package tree

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/poll"
)

const shared = "inbox-shared"

// targeted returns an object whose annotation "t" lists the destinations
// it targets.
func targeted(name, value string, dests ...string) []byte {
	b, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"name": name, "uid": "uid-" + name,
			"annotations": map[string]string{"t": strings.Join(dests, ",")}},
		"data": map[string]string{"v": value},
	})
	return b
}

func targetsOf(o *store.Object) []string {
	var m struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if json.Unmarshal(o.Data, &m) != nil || m.Metadata.Annotations["t"] == "" {
		return nil
	}
	return strings.Split(m.Metadata.Annotations["t"], ",")
}

func setRoute(t testing.TB, s *store.Store, child string, dests ...string) int64 {
	t.Helper()
	var rd []RouteDestination
	for _, d := range dests {
		rd = append(rd, RouteDestination{Name: d})
	}
	k := RouteKey(shared, child)
	data, err := EncodeRoute(k.Name, rd)
	if err != nil {
		t.Fatal(err)
	}
	return put(t, s, k, data)
}

// routedHash is the content hash a child with these destinations must
// reach: the shared space's objects that target one of them.
func routedHash(t testing.TB, parent *store.Store, dests ...string) string {
	t.Helper()
	scratch := newStore(t, store.Options{})
	lr, err := parent.List(store.ListOptions{Space: shared})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range lr.Items {
		for _, d := range targetsOf(o) {
			if slices.Contains(dests, d) {
				k := o.Key
				k.Space = inbox
				put(t, scratch, k, o.Data)
				break
			}
		}
	}
	return hash(t, scratch, inbox)
}

type routedChild struct {
	name  string
	store *store.Store
	rcv   *Receiver
}

func newRoutedChild(t testing.TB, name string) *routedChild {
	st := newStore(t, store.Options{})
	return &routedChild{name: name, store: st, rcv: NewReceiver(st, inbox, ReceiverOptions{})}
}

func routedSender(parent *store.Store, child string) *Sender {
	return NewSender(parent, shared, SenderOptions{Routing: &Routing{Record: RouteKey(shared, child), Targets: targetsOf}})
}

// routedConverged waits until c's inbox holds what its destinations want
// and its cursor has reached rev.
func routedConverged(t testing.TB, parent *store.Store, c *routedChild, rev int64, dests ...string) {
	t.Helper()
	want := routedHash(t, parent, dests...)
	poll.True(t, c.name+" to converge", func() bool {
		cur, err := c.rcv.Cursor()
		return err == nil && cur >= uint64(rev) && hash(t, c.store, inbox) == want
	})
}

// TestRoutedMailboxes: two children's mailboxes are indexes over one
// shared space. Each child gets exactly the objects targeting its
// subtree; retargeting an object or changing a subtree moves only what it
// touches; and a child resuming under a restarted parent (a new Sender)
// after its subtree changed gets the difference, not a resync.
func TestRoutedMailboxes(t *testing.T) {
	parent := newStore(t, store.Options{Addresses: targetsOf})
	k := func(name string) store.Key { return key(shared, "ns", name) }
	put(t, parent, k("a"), targeted("a", "1", "d1"))
	put(t, parent, k("b"), targeted("b", "1", "d2"))
	put(t, parent, k("c"), targeted("c", "1", "d1", "d2"))
	put(t, parent, k("x"), targeted("x", "1", "d9"))
	for i := range 20 {
		put(t, parent, k(fmt.Sprint("many-", i)), targeted("m", fmt.Sprint(i), "d3"))
	}
	setRoute(t, parent, "c1", "d1")
	rev := setRoute(t, parent, "c2", "d2")

	c1, c2 := newRoutedChild(t, "c1"), newRoutedChild(t, "c2")
	s1, s2 := routedSender(parent, "c1"), routedSender(parent, "c2")
	sess1 := down(t, s1, c1.rcv, nil)
	down(t, s2, c2.rcv, nil)
	routedConverged(t, parent, c1, rev, "d1")
	routedConverged(t, parent, c2, rev, "d2")
	if n := len(list(t, c1.store)); n != 2 {
		t.Fatalf("c1 holds %d objects, want 2 (a, c)", n)
	}

	// Retarget b from d2 to d1: c1 gets it, c2 deletes it.
	rev = put(t, parent, k("b"), targeted("b", "2", "d1"))
	routedConverged(t, parent, c1, rev, "d1")
	routedConverged(t, parent, c2, rev, "d2")

	// A change for nobody below c2 costs c2 nothing.
	before := s2.Stats()
	rev = put(t, parent, k("a"), targeted("a", "2", "d1"))
	routedConverged(t, parent, c2, rev, "d2")
	if d := s2.Stats().Objects - before.Objects; d != 0 {
		t.Fatalf("c2 was sent %d objects for a change targeting c1 only", d)
	}

	// c2's subtree gains d9: only x crosses.
	before = s2.Stats()
	rev = setRoute(t, parent, "c2", "d2", "d9")
	routedConverged(t, parent, c2, rev, "d2", "d9")
	if d := s2.Stats().Objects - before.Objects; d != 1 {
		t.Fatalf("%d objects sent when the subtree gained d9, want 1 (x)", d)
	}

	// c1 goes offline; meanwhile its subtree moves from d1 to d3 and a
	// changes. The parent restarts (a new Sender, no memory of c1): c1
	// resumes from its cursor and gets the 20 objects of d3 and deletes
	// of a, b and c, without a resync.
	sess1.cut()
	setRoute(t, parent, "c1", "d3")
	rev = put(t, parent, k("a"), targeted("a", "3", "d1"))
	s1 = routedSender(parent, "c1")
	cursor, _ := c1.rcv.Cursor()
	if s1.Resync(cursor) {
		t.Fatal("a resume within history would resync")
	}
	down(t, s1, c1.rcv, nil)
	routedConverged(t, parent, c1, rev, "d3")
	st := s1.Stats()
	if st.Resyncs != 0 || st.Objects != 23 {
		t.Fatalf("resume after a route change: %d resyncs, %d objects; want 0 and 23 (20 puts, 3 deletes)", st.Resyncs, st.Objects)
	}
}

// TestRoutedResync: a child with no cursor gets only its share in the
// snapshot, and its subtree's record vanishing empties its inbox.
func TestRoutedResync(t *testing.T) {
	parent := newStore(t, store.Options{Addresses: targetsOf})
	for i := range 10 {
		dest := fmt.Sprint("d", i%2)
		put(t, parent, key(shared, "ns", fmt.Sprint("o", i)), targeted("o", fmt.Sprint(i), dest))
	}
	rev := setRoute(t, parent, "c1", "d1")
	c1 := newRoutedChild(t, "c1")
	s1 := routedSender(parent, "c1")
	down(t, s1, c1.rcv, nil)
	routedConverged(t, parent, c1, rev, "d1")
	if st := s1.Stats(); st.Resyncs != 1 || st.Objects != 5 {
		t.Fatalf("first sync: %d resyncs, %d objects; want 1 and 5", st.Resyncs, st.Objects)
	}
	if _, err := parent.Delete(context.Background(), RouteKey(shared, "c1"), 0, ""); err != nil {
		t.Fatal(err)
	}
	routedConverged(t, parent, c1, parent.Revision())
	if n := len(list(t, c1.store)); n != 0 {
		t.Fatalf("c1 holds %d objects after its route was removed", n)
	}
}

func list(t testing.TB, s *store.Store) []*store.Object {
	t.Helper()
	lr, err := s.List(store.ListOptions{Space: inbox})
	if err != nil {
		t.Fatal(err)
	}
	return lr.Items
}

// With Trim, a child holds an object's destinations cut to its subtree;
// when its subtree grows, the objects it already holds are sent again,
// same version, with the longer list.
func TestRoutedTrim(t *testing.T) {
	parent := newStore(t, store.Options{Addresses: targetsOf})
	put(t, parent, key(shared, "ns", "o"), targeted("o", "1", "d1", "d2", "d3"))
	setRoute(t, parent, "c1", "d1")
	trim := func(o *store.Object, keep []string) []byte {
		var m map[string]any
		_ = json.Unmarshal(o.Data, &m)
		ann := m["metadata"].(map[string]any)["annotations"].(map[string]any)
		ann["t"] = strings.Join(keep, ",")
		out, _ := json.Marshal(m)
		return out
	}
	c1 := newRoutedChild(t, "c1")
	snd := NewSender(parent, shared, SenderOptions{Routing: &Routing{Record: RouteKey(shared, "c1"), Targets: targetsOf, Trim: trim}})
	down(t, snd, c1.rcv, nil)
	held := func() string {
		o, err := c1.store.Get(key(inbox, "ns", "o"))
		if err != nil {
			return ""
		}
		return strings.Join(targetsOf(o), ",")
	}
	poll.True(t, "c1 to hold o for d1 only", func() bool { return held() == "d1" })
	setRoute(t, parent, "c1", "d1", "d3")
	poll.True(t, "c1 to hold o for d1 and d3", func() bool { return held() == "d1,d3" })
	if got, err := RoutedContentHash(parent, shared, Routing{Record: RouteKey(shared, "c1"), Targets: targetsOf, Trim: trim}); err != nil || got != hash(t, c1.store, inbox) {
		t.Fatalf("routed hash %s (%v) differs from the child's inbox", got, err)
	}
}
