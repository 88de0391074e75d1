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
// inventory space): every relay with children writes a Relay per child
// into layout.LinksSpace of its store of reports (reportLinks); a region's
// summarizer forwards them with its own reports (summary.Child.Own), so
// they reach the root in its reports-<child> spaces; the root copies its
// own and those into a store in memory that its kube API serves
// (relayView). Nothing of them is written to a log.

// linkSample is how often a relay looks at its links to report them.
const linkSample = time.Second

// reportLinks keeps a Relay per child of down in layout.LinksSpace of st,
// sampled every linkSample, until ctx is done. A Relay changes when its
// link connects or drops, or while its child is behind by
// v1alpha1.RelayLagThreshold or more, so that a healthy tree sends none
// up.
func reportLinks(ctx context.Context, down *session.Downlink, st *store.Store, log *slog.Logger) error {
	links := relaySet{st: st, space: layout.LinksSpace}
	t := time.NewTicker(linkSample)
	defer t.Stop()
	for {
		want := map[string][]byte{}
		now := time.Now()
		for _, c := range down.Children() {
			b, err := json.Marshal(relayOf(c, now))
			if err != nil {
				return err
			}
			want[c.Identity.Name] = b
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

// relaySet is the Relays in one space of a store that it alone writes:
// it remembers what it wrote, so that a sample that changed nothing
// costs no read and no write.
type relaySet struct {
	st      *store.Store
	space   string
	written map[string][]byte // by name
}

// write makes the Relays of the space exactly want (by name), in one Txn
// of those that differ from what it wrote last.
func (s *relaySet) write(ctx context.Context, want map[string][]byte) error {
	if s.written == nil { // what an earlier writer left, to be replaced
		have, err := s.st.List(store.ListOptions{Space: s.space, Resource: reports.RelayResource})
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
		k := store.Key{Space: s.space, Resource: reports.RelayResource, Name: name}
		switch old, ok := s.written[name]; {
		case !ok:
			ops = append(ops, store.Op{Type: store.OpCreate, Key: k, Data: data})
		case !bytes.Equal(old, data):
			ops = append(ops, store.Op{Type: store.OpUpdate, Key: k, Data: data})
		}
	}
	for name := range s.written {
		if _, ok := want[name]; !ok {
			ops = append(ops, store.Op{Type: store.OpDelete, Key: store.Key{Space: s.space, Resource: reports.RelayResource, Name: name}})
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
// linkSample it gathers, for each child of the root (each reports-<child>
// space the replicated store names), the root's Relay of that child and
// the Relays the child forwarded, from the store of reports that holds
// the child's (reportSet.Store: on the leader, every replica's).
type relayView struct {
	relays  relaySet
	hard    *store.Store
	reports *reportSet
	log     *slog.Logger
	// seen is each gathered Relay's canonical form, by the store it
	// was read from and its revision there: a sample re-encodes only
	// what changed.
	seen map[relaySource]relayVersion
}

type relaySource struct {
	st  *store.Store
	key store.Key
}

type relayVersion struct {
	rev  int64
	data []byte
}

func newRelayView(hard *store.Store, rs *reportSet, log *slog.Logger) *relayView {
	return &relayView{relays: relaySet{st: newReportStore(), space: layout.InventorySpace}, hard: hard, reports: rs, log: log}
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
	want := map[string][]byte{}
	seen := make(map[relaySource]relayVersion, len(v.seen))
	canonical := func(st *store.Store, o *store.Object) []byte {
		src := relaySource{st, o.Key}
		ver, ok := v.seen[src]
		if !ok || ver.rev != o.Revision {
			ver = relayVersion{o.Revision, reports.Canonical(o.Data)}
		}
		seen[src] = ver
		return ver.data
	}
	for _, sp := range spaces.Items {
		child, ok := layout.ReportsChild(sp.Key.Name)
		if !ok {
			continue
		}
		rs := v.reports.Store(sp.Key.Name)
		if rs == nil {
			continue
		}
		if o, err := rs.Get(store.Key{Space: layout.LinksSpace, Resource: reports.RelayResource, Name: child}); err == nil {
			want[child] = canonical(rs, o)
		}
		below, err := rs.List(store.ListOptions{Space: sp.Key.Name, Resource: reports.RelayResource})
		if err != nil {
			return err
		}
		for _, o := range below.Items {
			if _, ok := want[o.Key.Name]; !ok {
				want[o.Key.Name] = canonical(rs, o)
			}
		}
	}
	v.seen = seen
	return v.relays.write(ctx, want)
}
