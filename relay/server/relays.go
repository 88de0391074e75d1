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
			want[c.Identity.Name] = reports.Canonical(b)
		}
		if err := syncRelays(ctx, st, layout.LinksSpace, want); err != nil && ctx.Err() == nil {
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

// syncRelays makes the Relays in space of st exactly want (by name, each
// reports.Canonical), in one Txn, writing only those that differ.
func syncRelays(ctx context.Context, st *store.Store, space string, want map[string][]byte) error {
	have, err := st.List(store.ListOptions{Space: space, Resource: reports.RelayResource})
	if err != nil {
		return err
	}
	var ops []store.Op
	for _, o := range have.Items {
		data, ok := want[o.Key.Name]
		switch {
		case !ok:
			ops = append(ops, store.Op{Type: store.OpDelete, Key: o.Key})
		case !bytes.Equal(reports.Canonical(o.Data), data):
			ops = append(ops, store.Op{Type: store.OpUpdate, Key: o.Key, Data: data})
		}
		delete(want, o.Key.Name)
	}
	for name, data := range want {
		ops = append(ops, store.Op{Type: store.OpCreate, Key: store.Key{Space: space, Resource: reports.RelayResource, Name: name}, Data: data})
	}
	if len(ops) == 0 {
		return nil
	}
	_, err = st.Txn(ctx, ops...)
	return err
}

// relayView is the root's store of Relays, in memory: its kube API serves
// its inventory space's relays from it, read-only (rootSpaces). Every
// linkSample it gathers, for each child of the root (each reports-<child>
// space the replicated store names), the root's Relay of that child and
// the Relays the child forwarded, from the store of reports that holds
// the child's (reportSet.Store: on the leader, every replica's).
type relayView struct {
	st      *store.Store
	hard    *store.Store
	reports *reportSet
	log     *slog.Logger
}

func newRelayView(hard *store.Store, rs *reportSet, log *slog.Logger) *relayView {
	return &relayView{st: newReportStore(), hard: hard, reports: rs, log: log}
}

// Start keeps the view until ctx is done.
func (v *relayView) Start(ctx context.Context) error {
	defer v.st.Close()
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
			want[child] = reports.Canonical(o.Data)
		}
		below, err := rs.List(store.ListOptions{Space: sp.Key.Name, Resource: reports.RelayResource})
		if err != nil {
			return err
		}
		for _, o := range below.Items {
			if _, ok := want[o.Key.Name]; !ok {
				want[o.Key.Name] = reports.Canonical(o.Data)
			}
		}
	}
	return syncRelays(ctx, v.st, layout.InventorySpace, want)
}
