package mailbox

import (
	"context"
	"maps"
	"reflect"
	"testing"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/tree"
)

// A destination claimed by two children belongs to the newer claim; the
// older claimant is superseded for it alone. Equal or absent Since
// supersede nothing; what the parent says moved away (above) supersedes
// older claims too; another space's records are not looked at.
func TestSuperseded(t *testing.T) {
	s := newStore(t, store.Options{})
	put := func(space, child string, dests ...tree.RouteDestination) {
		k := tree.RouteKey(space, child)
		data, err := tree.EncodeRoute(k.Name, dests)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Create(context.Background(), k, data); err != nil {
			t.Fatal(err)
		}
	}
	put(shared, "r1", tree.RouteDestination{Name: "e1", Since: 10}, tree.RouteDestination{Name: "e2", Since: 10}, tree.RouteDestination{Name: "e3", Since: 5})
	put(shared, "r2", tree.RouteDestination{Name: "e1", Since: 20}, tree.RouteDestination{Name: "e3", Since: 5}, tree.RouteDestination{Name: "e4"})
	put(shared, "r3", tree.RouteDestination{Name: "e4"}, tree.RouteDestination{Name: "e5", Since: 7})
	put("other", "r9", tree.RouteDestination{Name: "e2", Since: 99})

	got, err := superseded(s, shared, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]int64{"r1": {"e1": 20}}
	if !maps.EqualFunc(got, want, maps.Equal) {
		t.Fatalf("Superseded = %v, want %v", got, want)
	}

	got, err = superseded(s, shared, map[string]int64{"e5": 8, "e2": 3})
	if err != nil {
		t.Fatal(err)
	}
	want = map[string]map[string]int64{"r1": {"e1": 20}, "r3": {"e5": 8}}
	if !maps.EqualFunc(got, want, maps.Equal) {
		t.Fatalf("Superseded with above = %v, want %v", got, want)
	}
}

// A routeCache gives what Routes gives, decoding a record only when its
// stored version is new to it.
func TestRouteCache(t *testing.T) {
	st := newStore(t, store.Options{})
	setRoute(t, st, "c1", "d1", "d2")
	setRoute(t, st, "c2", "d3")
	var c routeCache
	first, err := c.routes(st, shared)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Routes(st, shared)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(first, want) {
		t.Fatalf("cached %v, Routes %v", first, want)
	}
	setRoute(t, st, "c2", "d3", "d4")
	second, err := c.routes(st, shared)
	if err != nil {
		t.Fatal(err)
	}
	if &second["c1"][0] != &first["c1"][0] {
		t.Error("c1's unchanged record was decoded again")
	}
	if got := len(second["c2"]); got != 2 || second["c2"][1].Name != "d4" {
		t.Errorf("c2 after its change: %v", second["c2"])
	}
	if len(c.decoded) != 2 {
		t.Errorf("cache holds %d versions, want the 2 listed last", len(c.decoded))
	}
}

// A routeCache answers Superseded again without walking the claims while
// the route records stay the same, and anew once one changes or when
// asked with above.
func TestRouteCacheSuperseded(t *testing.T) {
	st := newStore(t, store.Options{})
	set := func(child string, dests ...tree.RouteDestination) {
		k := tree.RouteKey(shared, child)
		data, err := tree.EncodeRoute(k.Name, dests)
		if err != nil {
			t.Fatal(err)
		}
		put(t, st, k, data)
	}
	set("r1", tree.RouteDestination{Name: "e1", Since: 10}, tree.RouteDestination{Name: "e2", Since: 10})
	set("r2", tree.RouteDestination{Name: "e1", Since: 20})
	var c routeCache
	ask := func(above map[string]int64) map[string]map[string]int64 {
		t.Helper()
		got, err := c.supersededOf(st, shared, above)
		if err != nil {
			t.Fatal(err)
		}
		want, err := superseded(st, shared, above)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.EqualFunc(got, want, maps.Equal) {
			t.Fatalf("cached Superseded(%v) = %v, Superseded %v", above, got, want)
		}
		return got
	}
	first := ask(nil)
	if len(first["r1"]) != 1 || first["r1"]["e1"] != 20 {
		t.Fatalf("Superseded = %v, want r1's e1 at 20", first)
	}
	if again := ask(nil); reflect.ValueOf(again).UnsafePointer() != reflect.ValueOf(first).UnsafePointer() {
		t.Error("the records did not change, yet the claims were walked again")
	}
	if withAbove := ask(map[string]int64{"e2": 30}); len(withAbove["r1"]) != 2 {
		t.Errorf("with e2 moved above at 30: %v, want r1's e1 and e2", withAbove)
	}
	set("r1", tree.RouteDestination{Name: "e2", Since: 10}) // r1 dropped e1
	if after := ask(nil); len(after) != 0 {
		t.Errorf("after r1 dropped e1: %v, want nothing superseded", after)
	}
}

// A claim of a connected destination beats any claim of a disconnected
// one, whatever their Since: a stale claim of a relay that is gone (or a
// forged Since on it) never takes a destination from the child it is
// connected to. What the parent says moved away leaves a connected
// claim alone.
func TestSupersededPrefersConnected(t *testing.T) {
	claims := Claims{
		"gone":  {{Name: "e3", Since: 1 << 60}, {Name: "e4", Since: 9}},
		"live":  {{Name: "e3", Since: 5, Connected: true}, {Name: "e4", Since: 3}},
		"other": {{Name: "e5", Since: 4, Connected: true}, {Name: "e6", Since: 4}},
	}
	got := claims.Superseded(map[string]int64{"e5": 7, "e6": 7})
	want := map[string]map[string]int64{
		"gone":  {"e3": 5},
		"live":  {"e4": 9},
		"other": {"e6": 7},
	}
	if !maps.EqualFunc(got, want, maps.Equal) {
		t.Fatalf("Superseded = %v, want %v", got, want)
	}
}
