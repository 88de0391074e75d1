package summary

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/reports"
)

// Child is one child of a tier, as the tier lists it for its Summarizer.
type Child struct {
	// Space is the child's reports space (layout.ReportsSpace): its
	// reports are the objects of that space.
	Space string
	// Reports is the store that holds Space, nil when the child's reports
	// are not at hand here (yet): it is not merged, and a Hold waits for
	// it.
	Reports *store.Store
	// Out leaves the child out of the merge while a Hold still waits for
	// it: it claims a destination that now reaches this tier through
	// another child, whose reports count it, or (a region) its link has
	// been down for longer than the grace.
	Out bool
	// Own marks the tier's own reports (a region's links to its children,
	// layout.LinksSpace), merged like a child's: a Hold never waits for
	// them, since the tier writes them itself.
	Own bool
}

// Sink writes a tier's merged reports.
type Sink interface {
	// Write brings what the tier holds of its children's reports in line
	// with m. m shares decoded reports with the Summarizer: read it, do not
	// change it.
	Write(ctx context.Context, m reports.Merged) error
}

// Config configures a Summarizer.
type Config struct {
	// Children lists the tier's children, sorted by their names (the
	// order of their merge, which decides which of two children's
	// versions of a forwarded object travels on). written, when
	// not nil, is called once a merge of exactly these children has been
	// written to Sink (a region then announces what the merge left out:
	// session.Downlink.Summarized).
	Children func() (children []Child, written func(), err error)
	// Placed is where the tier's placed objects are, in PlacedSpace (a
	// region's inbox, the root's downsync space): which forwarded reports
	// travel on (reports.ForwardFilter).
	Placed      store.Reader
	PlacedSpace string
	Sink        Sink
	// Hold, when set, holds the merge back until the children have
	// reported again.
	Hold *Hold
	// Relays forwards the links of the relays below
	// (reports.LinksResource) to Sink: a region reports them up; the root
	// gathers them on its own.
	Relays bool

	// The rest is for Run.

	// Reports is the store Run follows: each of its events is a report,
	// or a Collector's cursor.
	Reports *store.Store
	// Changed, when set, returns a channel closed when who counts may have
	// changed (a child connected, left or was superseded).
	Changed func() <-chan struct{}
	// Window is how long reports must stay quiet before Run merges them
	// (reports.Window).
	Window time.Duration
	// Recheck, when positive, is how often Run merges with nothing
	// reported: a child whose grace ends leaves the merge, and no report
	// says so.
	Recheck time.Duration
	Logger  *slog.Logger
}

// Summarizer merges a tier's children's reports; see the package doc.
type Summarizer struct {
	cfg Config
	log *slog.Logger
	dec reports.Decoded // the children's reports, decoded once per version
}

// listed is what Run keeps of each child's reports in Config.Reports, by
// space, as last listed: its watch drops a space at each event of it, so
// a merge lists again only the children that reported since the last.
type listed map[string][]*store.Object

// New returns a Summarizer for cfg.
func New(cfg Config) *Summarizer {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Summarizer{cfg: cfg, log: log, dec: reports.Decoded{Relays: cfg.Relays}}
}

// ErrReportsMoved: a store of reports (Child.Reports) was closed while it
// was read, replaced by another; the merge is done again later.
var ErrReportsMoved = errors.New("summary: a store of reports was replaced")

// Flush merges the children's reports and writes the result to the Sink,
// unless the Hold holds it back; it reports whether it wrote.
func (s *Summarizer) Flush(ctx context.Context) (bool, error) {
	return s.flush(ctx, nil)
}

// flush is Flush, reading the children's reports in Config.Reports from
// l where it has them (and keeping there what it lists); l nil: from the
// stores.
func (s *Summarizer) flush(ctx context.Context, l listed) (bool, error) {
	children, written, err := s.cfg.Children()
	if err != nil {
		return false, err
	}
	if !s.cfg.Hold.Ready(children) {
		return false, nil
	}
	var lists [][]*store.Object
	for _, c := range children {
		if c.Out || c.Reports == nil {
			continue
		}
		cached := l != nil && c.Reports == s.cfg.Reports
		items, ok := l[c.Space]
		if !cached || !ok {
			lr, err := c.Reports.List(store.ListOptions{Space: c.Space})
			if errors.Is(err, store.ErrClosed) {
				return false, ErrReportsMoved
			}
			if err != nil {
				return false, err
			}
			items = lr.Items
			if cached {
				l[c.Space] = items
			}
		}
		lists = append(lists, items)
	}
	m := s.dec.Merge(lists, reports.ForwardFilter(s.cfg.Placed, s.cfg.PlacedSpace))
	if err := s.cfg.Sink.Write(ctx, m); err != nil {
		return false, err
	}
	if written != nil {
		written()
	}
	return true, nil
}

// Run merges after each burst of reports (Config.Reports), and whenever
// who counts changes, until ctx is done.
func (s *Summarizer) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		err := s.follow(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if !errors.Is(err, store.ErrTooSlow) && !errors.Is(err, store.ErrExpired) {
			return err
		}
		s.log.Debug("summaries: watch restarted", "reason", err)
	}
	return nil
}

func (s *Summarizer) follow(ctx context.Context) error {
	rs := s.cfg.Reports
	w, err := rs.Watch(ctx, store.WatchOptions{}) // from the current revision
	if err != nil {
		return err
	}
	defer w.Stop()
	l := listed{}
	flush := func() error {
		_, err := s.flush(ctx, l) // held: the window looks again (below)
		return err
	}
	if err := flush(); err != nil {
		return err
	}
	// Reports wait until they are quiet for the burst's gap, at most
	// reports.MaxWaits gaps (reports.Window).
	win := reports.NewWindow(s.cfg.Window)
	defer win.Stop()
	if s.cfg.Hold.Holding() {
		win.Note()
	}
	var tick <-chan time.Time
	if s.cfg.Recheck > 0 {
		t := time.NewTicker(s.cfg.Recheck)
		defer t.Stop()
		tick = t.C
	}
	var changed <-chan struct{}
	if s.cfg.Changed != nil {
		changed = s.cfg.Changed()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
			if err := flush(); err != nil {
				return err
			}
		case <-changed:
			changed = s.cfg.Changed()
			win.Note()
		case ev, ok := <-w.Events():
			if !ok {
				return w.Err()
			}
			if ev.Object == nil {
				continue
			}
			delete(l, ev.Object.Key.Space)
			win.Note()
		case <-win.C():
			win.Fired()
			if err := flush(); err != nil {
				return err
			}
		}
		if s.cfg.Hold.Holding() && !win.Pending() {
			win.Note() // still waiting for the children's reports
		}
	}
}
