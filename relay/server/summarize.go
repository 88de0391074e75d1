package server

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/session"
	"github.com/canopy-dev/canopy/topology/reports"
)

// DefaultStatusWindow is how long a region waits for its children's
// reports to fall quiet before merging them into its own (DESIGN.md
// section 5: a short window; an isolated report waits this long), and how
// long the root waits for them to fall quiet before rewriting reported
// state. reports.MaxWaits windows bound either wait under a stream of
// reports: a wave of status from many children spreads over seconds on a
// busy machine, and each tier merges it about once per reports.MaxWaits
// windows instead of once per window.
const DefaultStatusWindow = 200 * time.Millisecond

// Bounds of --status-window.
const (
	MinStatusWindow = 10 * time.Millisecond
	MaxStatusWindow = time.Minute
)

// summaryGrace is how long the reports of a disconnected child still count
// in its parent's summaries, so that a short outage does not empty them. A
// child that stays away longer is left out; one that comes back counts
// again at once. (A child that re-homed is left out at once: Superseded.)
// A variable for tests.
var summaryGrace = time.Minute

// summarize keeps a region's outbox (in st) equal to the merge of its
// children's reports (in rs, in memory: DESIGN.md section 2) per
// topology/reports: partials and placement syncs merged per key, upsynced
// objects and the live state of objects with a single destination
// forwarded. It recomputes after each burst of changes to the reports and
// writes only what differs, until ctx is done. After the region opens, the
// outbox waits until the children it knew of have reported again
// (reportsWait).
func summarize(ctx context.Context, st, rs *store.Store, down *session.Downlink, window time.Duration, log *slog.Logger) error {
	wait := &reportsWait{since: time.Now()}
	for ctx.Err() == nil {
		err := followReports(ctx, st, rs, down, window, wait)
		if ctx.Err() != nil {
			return nil
		}
		if !errors.Is(err, store.ErrTooSlow) && !errors.Is(err, store.ErrExpired) {
			return err
		}
		log.Debug("summaries: watch restarted", "reason", err)
	}
	return nil
}

// reportsWait holds a region's summary back after it opened, until every
// child it knows of (those it knew before, from their route records, come
// back disconnected) has reported again, or summaryGrace has passed: its
// reports are in memory and were lost, while its outbox is on disk. A
// region with no child to wait for writes at once.
type reportsWait struct {
	since time.Time
	done  bool
}

func (w *reportsWait) ready(rs *store.Store, down *session.Downlink) bool {
	if w.done {
		return true
	}
	if time.Since(w.since) < summaryGrace {
		var spaces []string
		for _, c := range down.Children() {
			if !c.Superseded {
				spaces = append(spaces, layout.ReportsSpace(c.Identity.Name))
			}
		}
		if !reportedAgain(spaces, func(string) *store.Store { return rs }) {
			return false
		}
	}
	w.done = true
	return true
}

func followReports(ctx context.Context, st, rs *store.Store, down *session.Downlink, window time.Duration, wait *reportsWait) error {
	// Every event of rs is a report, or a Collector's cursor.
	w, err := rs.Watch(ctx, store.WatchOptions{Since: rs.Revision()})
	if err != nil {
		return err
	}
	defer w.Stop()
	var dec reports.Decoded // the children's reports, decoded once per version
	write := func() error {
		if !wait.ready(rs, down) {
			return nil // the window looks again (below)
		}
		return writeSummary(ctx, st, rs, down, &dec)
	}
	if err := write(); err != nil {
		return err
	}
	// Reports wait until window passes without another, or
	// reports.MaxWaits windows after the burst's first.
	win := reports.NewWindow(window)
	defer win.Stop()
	if !wait.done {
		win.Note()
	}
	// Children leave the summaries when their grace expires, which no
	// report announces: look again now and then.
	tick := time.NewTicker(max(summaryGrace/4, window))
	defer tick.Stop()
	changed := down.Changed()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if err := write(); err != nil {
				return err
			}
		case <-changed:
			// A child connected, left or was superseded: who counts may
			// have changed.
			changed = down.Changed()
			win.Note()
		case ev, ok := <-w.Events():
			if !ok {
				return w.Err()
			}
			if ev.Object == nil {
				continue
			}
			win.Note()
		case <-win.C():
			win.Fired()
			if err := write(); err != nil {
				return err
			}
		}
		if !wait.done && !win.Pending() {
			win.Note() // still waiting for the children's reports
		}
	}
}

// writeSummary merges the children's reports and brings the outbox in
// line with the result. A child counts while connected, or disconnected
// for less than summaryGrace; never while it claims a destination that
// has moved elsewhere (session.ChildStatus.Superseded), whose reports the
// destination's new path counts.
func writeSummary(ctx context.Context, st, rs *store.Store, down *session.Downlink, dec *reports.Decoded) error {
	var children [][]*store.Object
	names := make([]string, 0)
	gen := down.ClaimsGeneration()
	for _, c := range down.Children() {
		if !c.Superseded && (c.Connected || time.Since(c.LastSeen) < summaryGrace) {
			names = append(names, c.Identity.Name)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		lr, err := rs.List(store.ListOptions{Space: layout.ReportsSpace(n)})
		if err != nil {
			return err
		}
		children = append(children, lr.Items)
	}
	merged := dec.Merge(children, reports.ForwardFilter(st, layout.InboxSpace))
	want, err := merged.Encoded()
	if err != nil {
		return err
	}
	cur, err := st.List(store.ListOptions{Space: layout.OutboxSpace})
	if err != nil {
		return err
	}
	var ops []store.Op
	have := map[store.Key]*store.Object{}
	for _, o := range cur.Items {
		k := o.Key
		k.Space = ""
		have[k] = o
		if _, ok := want[k]; !ok {
			ops = append(ops, store.Op{Type: store.OpDelete, Key: o.Key, ExpectRevision: o.Revision})
		}
	}
	for _, k := range reports.SortedKeys(want) {
		data := want[k]
		ok := k
		ok.Space = layout.OutboxSpace
		switch o := have[k]; {
		case o == nil:
			ops = append(ops, store.Op{Type: store.OpCreate, Key: ok, Data: data})
		case !bytes.Equal(reports.Canonical(o.Data), reports.Canonical(data)):
			ops = append(ops, store.Op{Type: store.OpUpdate, Key: ok, Data: data, ExpectRevision: o.Revision})
		}
	}
	for len(ops) > 0 {
		n := min(len(ops), 256)
		if _, err := st.Txn(ctx, ops[:n]...); err != nil && !errors.Is(err, store.ErrConflict) {
			return err
		}
		ops = ops[n:]
	}
	down.Summarized(gen)
	return nil
}
