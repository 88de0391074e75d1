package reports

import "time"

// A Window merges reports in bursts: a burst is merged once the reports
// have been quiet for its gap, or MaxWaits gaps after its first report,
// whichever comes first.
//
// The gap follows the reports. A burst that begins a quarter of a window
// or more after the last report has the shortest, window/LeadDivisor:
// what an isolated change reports goes up at once, and so do changes made
// one after another, each reported before the next. A burst that begins
// sooner has four times the last gap, up to the window: the tail of a
// change's reports, arriving milliseconds apart, goes up a few
// milliseconds later, and a wave of status spread over seconds (a change
// converging below a busy child) is merged a few times early, then once
// per window of quiet and at most once per MaxWaits windows; the value it
// settles on waits at most a window after its last report.
const (
	MaxWaits    = 5
	LeadDivisor = 200
)

// Window times the merges of one reader of reports (a region's summary,
// the root's reported state): Note each report, merge when C fires, then
// call Fired. The zero value is not ready: use NewWindow. A Window serves
// one goroutine.
type Window struct {
	window  time.Duration
	timer   *time.Timer
	pending bool
	first   time.Time     // of the pending burst
	gap     time.Duration // the quiet that merges the pending burst
	noted   time.Time     // when the last report came
	now     func() time.Time
}

// NewWindow returns a Window with nothing pending.
func NewWindow(window time.Duration) *Window {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &Window{window: window, timer: t, now: time.Now}
}

// Note records a report: C fires once reports have been quiet for the
// burst's gap, or MaxWaits gaps after its first report if that is sooner.
func (w *Window) Note() {
	now := w.now()
	if !w.pending {
		w.pending, w.first = true, now
		w.gap = nextGap(w.window, w.gap, now.Sub(w.noted))
	}
	w.noted = now
	w.timer.Reset(w.wait(now))
}

// wait is how long after now, a report having come at now, the pending
// burst is merged.
func (w *Window) wait(now time.Time) time.Duration {
	return max(0, min(w.gap, w.first.Add(MaxWaits*w.gap).Sub(now)))
}

// nextGap is the gap of a burst that begins quiet after the last report,
// the last burst's gap being gap (above).
func nextGap(window, gap, quiet time.Duration) time.Duration {
	if quiet >= window/4 {
		return window / LeadDivisor
	}
	return min(4*gap, window)
}

// C fires when the pending burst is due.
func (w *Window) C() <-chan time.Time { return w.timer.C }

// Fired ends the burst C fired for; the next Note starts another.
func (w *Window) Fired() { w.pending = false }

// Pending says whether a burst waits for C.
func (w *Window) Pending() bool { return w.pending }

// Stop releases the timer.
func (w *Window) Stop() { w.timer.Stop() }

// Pacer spaces the rounds of one worker that evaluates whatever changed
// since its last round (an edge syncer's reporter): a round starts at
// least the gap after the last one ended, the gap following the rounds as
// a Window's follows the reports (the quiet counted from the end of the
// last round, as a wake that came during a round is only seen after it).
// An isolated change is evaluated at once;
// under a stream of changes, rounds are at most a window apart. The zero
// value is not ready: use NewPacer. A Pacer serves one goroutine.
type Pacer struct {
	window time.Duration
	gap    time.Duration
	last   time.Time // when the last round ended
	now    func() time.Time
}

// NewPacer returns a Pacer whose first round waits for nothing.
func NewPacer(window time.Duration) *Pacer {
	return &Pacer{window: window, now: time.Now}
}

// Wait is called when a round is wanted: it returns how long the round
// must wait.
func (p *Pacer) Wait() time.Duration {
	quiet := p.now().Sub(p.last)
	p.gap = nextGap(p.window, p.gap, quiet)
	return max(0, p.gap-quiet)
}

// Done records the end of a round.
func (p *Pacer) Done() { p.last = p.now() }
