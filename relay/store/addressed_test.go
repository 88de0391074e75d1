package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

var routes = Resource{Group: "canopy.dev", Resource: "routes"}

// specNames reads a test object's spec as a comma-separated list of names:
// both the addresses of a watched object and the set a record holds.
func specNames(o *Object) []string {
	var m struct {
		Spec string `json:"spec"`
	}
	if json.Unmarshal(o.Data, &m) != nil || m.Spec == "" {
		return nil
	}
	return strings.Split(m.Spec, ",")
}

// An Addressed watch gets, live, exactly the events of its selection whose
// object or previous version is addressed to a name of its set as the set
// record stood at that point of the revision order, plus the record's own
// events; its history replay is not narrowed. Checked against a plain
// watch of everything, under random writes, retargets and set changes.
func TestWatchAddressed(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint("seed-", seed), func(t *testing.T) { watchAddressed(t, seed) })
	}
}

func watchAddressed(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 3))
	s := newStore(t, Options{Addresses: specNames})
	ctx := context.Background()
	names := []string{"a", "b", "c", "d", "e"}
	subset := func() string {
		var out []string
		for _, n := range names {
			if rng.IntN(3) == 0 {
				out = append(out, n)
			}
		}
		return strings.Join(out, ",")
	}
	recs := []Key{key("", routes, "", "r0"), key("", routes, "", "r1"), key("", routes, "", "r2")}
	for _, r := range recs[:2] { // r2 starts absent: the empty set
		mustCreate(t, s, r, body("r", nil, subset()))
	}
	// The reference sees every event, in order.
	ref := mustWatch(t, s, WatchOptions{})
	type addressed struct {
		w       Watcher
		rec     Key
		since   int64    // replayed, not narrowed, from here to start
		start   int64    // narrowed after this revision
		initial []string // the set at start
	}
	var ws []*addressed
	watch := func(rec Key, since int64) {
		a := &addressed{rec: rec, since: since, start: s.Revision()}
		if o, err := s.Get(rec); err == nil {
			a.initial = specNames(o)
		}
		if since == 0 {
			a.since = a.start
		}
		a.w = mustWatch(t, s, WatchOptions{Space: "ws", Since: since, Bookmarks: rng.IntN(2) == 0,
			Addressed: &Addressing{Set: rec, Names: specNames}})
		ws = append(ws, a)
	}
	for _, r := range recs {
		watch(r, 0)
	}
	write := func() {
		var ops []Op
		used := map[Key]bool{}
		for range 1 + rng.IntN(3) {
			var k Key
			switch rng.IntN(6) {
			case 0:
				k = recs[rng.IntN(len(recs))]
			case 1:
				k = key("other", pods, "ns", fmt.Sprint("o", rng.IntN(3))) // outside the selection
			default:
				k = key("ws", pods, "ns", fmt.Sprint("o", rng.IntN(8)))
			}
			if used[k] {
				continue
			}
			used[k] = true
			_, err := s.Get(k)
			switch exists := err == nil; {
			case exists && rng.IntN(4) == 0:
				ops = append(ops, Op{Type: OpDelete, Key: k})
			case exists:
				ops = append(ops, Op{Type: OpUpdate, Key: k, Data: body("u", nil, subset())})
			default:
				ops = append(ops, Op{Type: OpCreate, Key: k, Data: body("u", nil, subset())})
			}
		}
		if _, err := s.Txn(ctx, ops...); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 120 {
		write()
		if i == 60 {
			watch(recs[rng.IntN(len(recs))], max(1, s.Revision()-20))
		}
	}
	// Last, every record is written once more: each watch's last event.
	last := map[Key]int64{}
	for _, r := range recs {
		last[r] = mustCreateOrUpdate(t, s, r, body("r", nil, "a")).Revision
	}
	end := s.Revision()

	var all []Event
	for len(all) == 0 || all[len(all)-1].Revision < end {
		if ev := next(t, ref); ev.Type != Bookmark {
			all = append(all, ev)
		}
	}
	for i, a := range ws {
		set := a.initial
		var want []Event
		for _, ev := range all {
			k := ev.Object.Key
			switch {
			case ev.Revision <= a.since:
			case k == a.rec:
				want = append(want, ev)
				if ev.Revision > a.start {
					set = nil
					if ev.Type != Deleted {
						set = specNames(ev.Object)
					}
				}
			case k.Space != "ws":
			case ev.Revision <= a.start || addressedTo(ev.Object, set) || ev.Prev != nil && addressedTo(ev.Prev, set):
				want = append(want, ev)
			}
		}
		var got []Event
		for len(got) == 0 || got[len(got)-1].Revision < last[a.rec] {
			if ev := next(t, a.w); ev.Type != Bookmark {
				got = append(got, ev)
			}
		}
		if len(got) != len(want) {
			t.Errorf("watch %d (set %s, since %d, start %d): %d events, want %d", i, a.rec.Name, a.since, a.start, len(got), len(want))
		}
		for j := range min(len(got), len(want)) {
			g, w := got[j], want[j]
			if g.Type != w.Type || g.Revision != w.Revision || g.Object != w.Object || g.Prev != w.Prev {
				t.Fatalf("watch %d (set %s, since %d, start %d), event %d: got %s %s@%d, want %s %s@%d",
					i, a.rec.Name, a.since, a.start, j, g.Type, g.Object.Key, g.Revision, w.Type, w.Object.Key, w.Revision)
			}
		}
	}
}

func addressedTo(o *Object, set []string) bool {
	return slices.ContainsFunc(specNames(o), func(n string) bool { return slices.Contains(set, n) })
}

func mustCreateOrUpdate(t testing.TB, s *Store, k Key, data []byte) *Object {
	t.Helper()
	if _, err := s.Get(k); err == nil {
		return mustUpdate(t, s, k, data)
	}
	return mustCreate(t, s, k, data)
}

func TestWatchAddressedInvalid(t *testing.T) {
	rec := key("", routes, "", "r0")
	plain := newStore(t, Options{})
	if _, err := plain.Watch(context.Background(), WatchOptions{Addressed: &Addressing{Set: rec, Names: specNames}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Addressed without Options.Addresses: %v, want ErrInvalid", err)
	}
	s := newStore(t, Options{Addresses: specNames})
	o := mustCreate(t, s, key("ws", pods, "ns", "o"), body("u", nil, "a,b"))
	if got := s.Addresses(o); !slices.Equal(got, []string{"a", "b"}) || &got[0] != &s.Addresses(o)[0] {
		t.Fatalf("Addresses = %v, want [a b], computed once per version", got)
	}
	if got := plain.Addresses(o); got != nil {
		t.Fatalf("Addresses without Options.Addresses = %v, want nil", got)
	}
	for _, a := range []*Addressing{{Set: rec}, {Set: Key{Name: "x"}, Names: specNames}} {
		if _, err := s.Watch(context.Background(), WatchOptions{Addressed: a}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Addressed %+v: %v, want ErrInvalid", a, err)
		}
	}
	// An Addressed watch with an empty set is still ended by Close.
	w := mustWatch(t, s, WatchOptions{Addressed: &Addressing{Set: rec, Names: specNames}})
	s.Close()
	if err := ended(t, w); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
}
