package server

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/session"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
	"github.com/canopy-dev/canopy/topology/reports"
)

// The links of the tree, as the root serves them (kind Relay in the
// inventory space): every relay with children writes one report of its
// links (reports.Links: a Relay per child) into layout.LinksSpace of its
// store of reports (reportLinks); a region's summarizer forwards it with
// its children's reports (summary.Child.Own), so that every such report
// below reaches the root in its reports-<child> spaces; the root serves
// each link of its own and of those reports as a Relay, from a store in
// memory (relayView). Nothing of them is written to a log. One report per
// relay, not per link, so that a region whose hundred children all fall
// behind in a busy rollout sends one report a second, not a hundred.

// linkSample is how often a relay looks at its links to report them.
const linkSample = time.Second

// relaysResource is the served Relays' resource in relayView's store.
var relaysResource = store.Resource{Group: v1alpha1.GroupName, Resource: v1alpha1.ResourceRelays}

// reportLinks keeps the report of the links of self (down's children) in
// layout.LinksSpace of st, sampled every linkSample, until ctx is done. It
// changes when a link connects or drops, or while a child is behind by
// v1alpha1.RelayLagThreshold or more, so that a healthy tree sends none
// up.
func reportLinks(ctx context.Context, self string, down *session.Downlink, st *store.Store, log *slog.Logger) error {
	links := reportSpace{st: st, space: layout.LinksSpace, resource: reports.LinksResource}
	t := time.NewTicker(linkSample)
	defer t.Stop()
	for {
		var l reports.Links
		now := time.Now()
		for _, c := range down.Children() { // sorted by name
			l.Relays = append(l.Relays, relayOf(c, now))
		}
		want := map[string][]byte{}
		if len(l.Relays) > 0 {
			b, err := reports.Encode(reports.KindLinks, self, l)
			if err != nil {
				return err
			}
			want[self] = b
		}
		if err := links.write(ctx, want); err != nil && ctx.Err() == nil {
			log.Warn("reporting links", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// relayOf is the Relay a parent reports for its child c at now.
func relayOf(c session.ChildStatus, now time.Time) v1alpha1.Relay {
	r := v1alpha1.Relay{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.KindRelay},
		ObjectMeta: metav1.ObjectMeta{Name: c.Identity.Name},
		Status:     v1alpha1.RelayStatus{Path: c.Identity.String(), Role: c.Identity.Role.String(), Connected: c.Connected},
	}
	switch {
	case !c.Connected:
		if !c.LastSeen.IsZero() {
			r.Status.LastSeen = &metav1.Time{Time: c.LastSeen.Truncate(time.Second)}
		}
	case !c.Down.BehindSince.IsZero() && now.Sub(c.Down.BehindSince) >= v1alpha1.RelayLagThreshold:
		r.Status.Lag = &v1alpha1.RelayLag{Revisions: int64(c.Down.LagRevisions), Since: metav1.Time{Time: c.Down.BehindSince.Truncate(time.Second)}}
	}
	return r
}

// reportSpace is the objects of one resource in one space of a store that
// it alone writes: it remembers what it wrote, so that a sample that
// changed nothing costs no read and no write.
type reportSpace struct {
	st       *store.Store
	space    string
	resource store.Resource
	written  map[string][]byte // by name
}

// write makes the objects exactly want (by name), in one Txn of those
// that differ from what it wrote last.
func (s *reportSpace) write(ctx context.Context, want map[string][]byte) error {
	if s.written == nil { // what an earlier writer left, to be replaced
		have, err := s.st.List(store.ListOptions{Space: s.space, Resource: s.resource})
		if err != nil {
			return err
		}
		s.written = make(map[string][]byte, len(have.Items))
		for _, o := range have.Items {
			s.written[o.Key.Name] = o.Data
		}
	}
	var ops []store.Op
	for name, data := range want {
		k := store.Key{Space: s.space, Resource: s.resource, Name: name}
		switch old, ok := s.written[name]; {
		case !ok:
			ops = append(ops, store.Op{Type: store.OpCreate, Key: k, Data: data})
		case !bytes.Equal(old, data):
			ops = append(ops, store.Op{Type: store.OpUpdate, Key: k, Data: data})
		}
	}
	for name := range s.written {
		if _, ok := want[name]; !ok {
			ops = append(ops, store.Op{Type: store.OpDelete, Key: store.Key{Space: s.space, Resource: s.resource, Name: name}})
		}
	}
	if len(ops) > 0 {
		if _, err := s.st.Txn(ctx, ops...); err != nil {
			return err
		}
	}
	s.written = want
	return nil
}

// relayView is the root's store of Relays, in memory: its kube API serves
// its inventory space's relays from it, read-only (rootSpaces). Every
// linkSample it reads, for each child of the root (each reports-<child>
// space the replicated store names), the reports of links in the store of
// reports that holds the child's (reportSet.Store: on the leader, every
// replica's): the replica's own (layout.LinksSpace) and those the child
// forwarded; and it serves each link as a Relay.
type relayView struct {
	relays  reportSpace
	hard    *store.Store
	reports *reportSet
	log     *slog.Logger
	// seen is each report of links read, decoded into its Relays, by the
	// store it was read from and its revision there: a sample decodes
	// only what changed.
	seen map[linksSource]linksVersion
}

type linksSource struct {
	st  *store.Store
	key store.Key
}

type linksVersion struct {
	rev    int64
	relays map[string]linkEntry // by name
}

// linkEntry is one Relay of a report of links: its stored form, and
// whether its parent has it connected.
type linkEntry struct {
	data      []byte
	connected bool
}

func newRelayView(hard *store.Store, rs *reportSet, log *slog.Logger) *relayView {
	return &relayView{relays: reportSpace{st: newReportStore(), space: layout.InventorySpace, resource: relaysResource},
		hard: hard, reports: rs, log: log}
}

// store is what the kube API serves the inventory's Relays from.
func (v *relayView) store() *store.Store { return v.relays.st }

// Start keeps the view until ctx is done.
func (v *relayView) Start(ctx context.Context) error {
	defer v.relays.st.Close()
	t := time.NewTicker(linkSample)
	defer t.Stop()
	for {
		if err := v.sync(ctx); err != nil && ctx.Err() == nil {
			v.log.Warn("gathering relays", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (v *relayView) sync(ctx context.Context) error {
	spaces, err := v.hard.List(store.ListOptions{Resource: layout.SpaceResource})
	if err != nil {
		return err
	}
	seen := make(map[linksSource]linksVersion, len(v.seen))
	var order []linksSource
	read := func(st *store.Store, space string) error {
		lr, err := st.List(store.ListOptions{Space: space, Resource: reports.LinksResource})
		if err != nil {
			return err
		}
		for _, o := range lr.Items {
			src := linksSource{st, o.Key}
			if _, ok := seen[src]; ok {
				continue // a replica's own links, read for another child
			}
			ver, ok := v.seen[src]
			if !ok || ver.rev != o.Revision {
				ver = linksVersion{rev: o.Revision, relays: relaysOf(o, v.log)}
			}
			seen[src] = ver
			order = append(order, src)
		}
		return nil
	}
	for _, sp := range spaces.Items {
		if _, ok := layout.ReportsChild(sp.Key.Name); !ok {
			continue
		}
		rs := v.reports.Store(sp.Key.Name)
		if rs == nil {
			continue
		}
		// The links of the replica the child is linked to (the root's
		// to each of its children), then those the child forwarded.
		for _, space := range []string{layout.LinksSpace, sp.Key.Name} {
			if err := read(rs, space); err != nil {
				return err
			}
		}
	}
	// A relay two parents report (it moved, and the old one has not yet
	// let go of it) counts as the parent it is connected to says.
	entries := map[string]linkEntry{}
	for _, src := range order {
		for name, e := range seen[src].relays {
			if old, ok := entries[name]; !ok || e.connected && !old.connected {
				entries[name] = e
			}
		}
	}
	want := make(map[string][]byte, len(entries))
	for name, e := range entries {
		want[name] = e.data
	}
	v.seen = seen
	return v.relays.write(ctx, want)
}

// relaysOf decodes a report of links into its Relays' stored forms.
func relaysOf(o *store.Object, log *slog.Logger) map[string]linkEntry {
	l, err := reports.Decode[reports.Links](o.Data)
	if err != nil {
		log.Warn("a malformed report of links", "key", o.Key.String(), "error", err)
		return nil
	}
	out := make(map[string]linkEntry, len(l.Relays))
	for _, r := range l.Relays {
		if b, err := json.Marshal(r); err == nil {
			out[r.Name] = linkEntry{b, r.Status.Connected}
		}
	}
	return out
}
