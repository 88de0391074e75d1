package server

import (
	"log/slog"
	"time"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/session"
	"github.com/canopy-dev/canopy/topology/summary"
)

// DefaultStatusWindow bounds how long a region waits for its children's
// reports to fall quiet before merging them into its own (DESIGN.md
// section 5: a short window), and how long the root waits for them to
// fall quiet before rewriting reported state. An isolated report waits a
// two-hundredth of it; a wave of status from many children, spread over
// seconds on a busy machine, waits longer and longer gaps up to the
// window, and at most reports.MaxWaits windows (reports.Window).
const DefaultStatusWindow = 200 * time.Millisecond

// Bounds of --status-window.
const (
	MinStatusWindow = 10 * time.Millisecond
	MaxStatusWindow = time.Minute
)

// summaryGrace is how long the reports of a disconnected child still count
// in its parent's summaries, so that a short outage does not empty them,
// and how long reported state waits at most for the children to report
// again (summary.Hold). A child that stays away longer is left out; one
// that comes back counts again at once. (A child that re-homed is left out
// at once: session.ChildStatus.Superseded.) A variable for tests.
var summaryGrace = summary.DefaultGrace

// regionSummarizer keeps a region's outbox (in st) equal to the merge of
// its children's reports (in rs, in memory: DESIGN.md section 2), after
// each burst of them (window) and whenever its children change (down).
// After the region opens, the outbox waits until the children it knew of
// have reported again (summary.Hold).
func regionSummarizer(st, rs *store.Store, down *session.Downlink, window time.Duration, log *slog.Logger) *summary.Summarizer {
	return summary.New(summary.Config{
		Children: regionChildren(down, rs),
		Placed:   st, PlacedSpace: layout.InboxSpace,
		Sink:    &summary.Outbox{Store: st, Space: layout.OutboxSpace},
		Hold:    summary.NewHold(summaryGrace),
		Relays:  true, // the root gathers what its children forward
		Reports: rs, Changed: down.Changed, Window: window,
		// Children leave the summaries when their grace expires, which no
		// report announces: look again now and then.
		Recheck: max(summaryGrace/4, window),
		Logger:  log,
	})
}

// regionChildren lists a region's children for its summarizer: those of
// its downlink, their reports in rs. A child that claims a destination
// which has moved elsewhere (session.ChildStatus.Superseded) is neither
// merged nor waited for: the destination's new path counts it. One whose
// link has been down for summaryGrace is left out. Once a merge of them is
// written, the downlink may announce what it left out
// (session.Downlink.Summarized). The region's own reports of its links
// (layout.LinksSpace, reportLinks) are merged with them.
func regionChildren(down *session.Downlink, rs *store.Store) func() ([]summary.Child, func(), error) {
	return func() ([]summary.Child, func(), error) {
		gen := down.ClaimsGeneration() // before the children: a later change waits for the next merge
		var children []summary.Child
		for _, c := range down.Children() { // sorted by name
			if c.Superseded {
				continue
			}
			away := !c.Connected && time.Since(c.LastSeen) >= summaryGrace
			children = append(children, summary.Child{Space: layout.ReportsSpace(c.Identity.Name), Reports: rs, Out: away})
		}
		children = append(children, summary.Child{Space: layout.LinksSpace, Reports: rs, Own: true})
		return children, func() { down.Summarized(gen) }, nil
	}
}
