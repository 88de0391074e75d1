package tree

import (
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
)

// Routing makes a Sender's mailbox an index over a space shared by all
// the children (DESIGN.md section 3: a mailbox never copies objects): the
// child receives the objects of that space that target at least one
// destination of its subtree, and an object that stops targeting its
// subtree is deleted at the child.
//
// The subtree is the child's route record (layout.RouteResource in the system
// space), which the parent rewrites when the child announces a different
// set of destinations. The record is in the same store, so its changes
// have revisions like any object: a child resuming from a cursor older
// than a change of its subtree is re-sent what the change moved in and out,
// and nothing else, even across a restart of the parent.
type Routing struct {
	// Record is the key of the child's route record (RouteKey).
	Record store.Key
	// Targets returns the destinations an object targets. It is called
	// for every object the Sender considers, often for the same version:
	// it should read something computed once per version (a store field).
	// When the store has Options.Addresses, Targets must return what it
	// does (Store.Addresses, which shares the store's list): the Sender
	// then watches only the objects addressed to its subtree
	// (store.WatchOptions.Addressed).
	Targets func(o *store.Object) []string
	// Trim, when set, returns an object's data with its list of
	// destinations reduced to keep (those below the child, in the order
	// Targets gave them), so that what crosses a link, and what the child
	// stores, grows with the child's subtree, not with the whole fleet. It
	// is called only when keep leaves some destinations out. It is called
	// for every child the version goes to: what it derives from the
	// version alone should be computed once (store.Object.Memo).
	Trim func(o *store.Object, keep []string) []byte
}

// targets is an object version's destinations as Routing.Targets gives
// them, with an index when there are many: a relay with thousands of
// children checks each child's subtree against them, and would otherwise
// scan the whole fleet's list once per child.
type targets struct {
	names []string
	pos   map[string]int // nil when names is short or has duplicates
}

// indexedTargets is the length from which targets are indexed.
const indexedTargets = 32

// targetsMemo is the store.Object.Memo key of targets.
type targetsMemo struct{}

// targetsOf returns o's targets, derived once per version: Targets must
// depend on the version alone, and every Routing over one store must use
// the same Targets.
func (r *Routing) targetsOf(o *store.Object) *targets {
	return o.Memo(targetsMemo{}, func(o *store.Object) any {
		t := &targets{names: r.Targets(o)}
		if len(t.names) < indexedTargets {
			return t
		}
		t.pos = make(map[string]int, len(t.names))
		for i, n := range t.names {
			if _, dup := t.pos[n]; dup {
				t.pos = nil
				break
			}
			t.pos[n] = i
		}
		return t
	}).(*targets)
}

// matching yields the targets that are keys of set, with their index in
// the list and set's value, looking up the smaller side in the larger
// (in no particular order).
func matching[V any](t *targets, set map[string]V) iter.Seq2[int, V] {
	return func(yield func(int, V) bool) {
		if t.pos != nil && len(set) < len(t.names) {
			for n, v := range set {
				if i, ok := t.pos[n]; ok && !yield(i, v) {
					return
				}
			}
			return
		}
		for i, n := range t.names {
			if v, ok := set[n]; ok && !yield(i, v) {
				return
			}
		}
	}
}

// in returns the targets that set maps to true, in their order.
func (t *targets) in(set map[string]bool) []string {
	var at []int
	for i, yes := range matching(t, set) {
		if yes {
			at = append(at, i)
		}
	}
	slices.Sort(at)
	out := make([]string, len(at))
	for j, i := range at {
		out[j] = t.names[i]
	}
	return out
}

// trimmed returns o's data as the child of this subtree receives it
// (Routing.Trim).
func (r *Routing) trimmed(o *store.Object, subtree map[string]bool) []byte {
	if r.Trim == nil {
		return o.Data
	}
	t := r.targetsOf(o)
	keep := t.in(subtree)
	if len(keep) == len(t.names) {
		return o.Data
	}
	return r.Trim(o, keep)
}

// RouteKey is the key of the route record of child under a mailbox space:
// one record per (space, child), named "<space>.<child>".
func RouteKey(space, child string) store.Key {
	return store.Key{Resource: layout.RouteResource, Name: space + "." + child}
}

// Route is the data of a route record.
type Route struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	// Destinations lists the destinations below the child, sorted by name.
	Destinations []RouteDestination `json:"destinations"`
}

// RouteDestination is one destination of a Route: what the child announced
// of it.
type RouteDestination struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	// Path lists the relays from the child down to the destination's edge.
	Path []string `json:"path,omitempty"`
	// Since is when the destination's edge began to be served along this
	// path (wire.Destination.Since): the newest claim of a destination
	// supersedes the others (relay/transport/mailbox, Claims.Superseded).
	Since int64 `json:"since,omitempty"`
	// Connected and LastSeen are the destination's link state below the
	// child, as the child announced it (wire.Destination): kept here so
	// that every replica of a root sees the whole fleet, whichever replica
	// the child is linked to.
	Connected bool  `json:"connected,omitempty"`
	LastSeen  int64 `json:"lastSeen,omitempty"`
}

// ReadRoute returns the route record at k (a zero Route when absent).
func ReadRoute(r store.Reader, k store.Key) (Route, *store.Object, error) {
	o, err := r.Get(k)
	if errors.Is(err, store.ErrNotFound) {
		return Route{}, nil, nil
	}
	if err != nil {
		return Route{}, nil, err
	}
	rt, err := DecodeRoute(o)
	return rt, o, err
}

// DecodeRoute decodes a route record (a zero Route for nil).
func DecodeRoute(o *store.Object) (Route, error) {
	var rt Route
	if o == nil {
		return rt, nil
	}
	if err := json.Unmarshal(o.Data, &rt); err != nil {
		return rt, fmt.Errorf("tree: route record %s: %w", o.Key.Name, err)
	}
	return rt, nil
}

// names returns the set of destination names of a route.
func (rt Route) names() map[string]bool {
	m := make(map[string]bool, len(rt.Destinations))
	for _, d := range rt.Destinations {
		m[d.Name] = true
	}
	return m
}

// routeNames is store.Addressing.Names over route records: the names of
// a route's destinations (none when it does not decode: the Sender fails
// on it anyway).
func routeNames(o *store.Object) []string {
	rt, err := DecodeRoute(o)
	if err != nil {
		return nil
	}
	out := make([]string, len(rt.Destinations))
	for i, d := range rt.Destinations {
		out[i] = d.Name
	}
	return out
}

// EncodeRoute returns the data of a route record for child, with its
// destinations sorted by name (so equal routes encode equally).
func EncodeRoute(name string, dests []RouteDestination) ([]byte, error) {
	rt := Route{Destinations: slices.Clone(dests)}
	rt.Metadata.Name = name
	slices.SortFunc(rt.Destinations, func(a, b RouteDestination) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return json.Marshal(rt)
}

// rerouted returns the destinations whose membership in the subtree an
// event of a route record changed.
func rerouted(ev store.Event) (map[string]bool, error) {
	var before, after Route
	var err error
	switch ev.Type {
	case store.Added:
		after, err = DecodeRoute(ev.Object)
	case store.Modified:
		if before, err = DecodeRoute(ev.Prev); err == nil {
			after, err = DecodeRoute(ev.Object)
		}
	case store.Deleted:
		before, err = DecodeRoute(ev.Prev)
	}
	if err != nil {
		return nil, err
	}
	b, a := before.names(), after.names()
	out := map[string]bool{}
	for n := range b {
		if !a[n] {
			out[n] = true
		}
	}
	for n := range a {
		if !b[n] {
			out[n] = true
		}
	}
	return out, nil
}

// router is a Sender's view of its child's subtree. It is owned by the
// sending loop.
type router struct {
	Routing
	subtree map[string]bool
	// held lists the keys the child holds (at some version) as far as the
	// sender knows: an object no longer wanted is deleted at the child
	// only if held (or if the key is marked maybe).
	held map[store.Key]bool
}

// wants reports whether o targets the subtree.
func (r *router) wants(o *store.Object) bool {
	for range matching(r.targetsOf(o), r.subtree) {
		return true
	}
	return false
}

// targetsAny reports whether o targets one of dests (the keys of moved),
// and whether one of those it targets maps to true (moved by a replayed
// change).
func (r *router) targetsAny(o *store.Object, moved map[string]bool) (targets, replayed bool) {
	for _, rp := range matching(r.targetsOf(o), moved) {
		targets = true
		replayed = replayed || rp
	}
	return targets, replayed
}

// load reads the child's current subtree.
func (r *router) load(st store.Reader) error {
	rt, _, err := ReadRoute(st, r.Record)
	if err != nil {
		return err
	}
	r.subtree = rt.names()
	return nil
}
