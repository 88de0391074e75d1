package reports

import "time"

// MaxWaits bounds how long a stream of reports is held back: a burst is
// merged once a window passes without another report, or MaxWaits windows
// after its first, whichever comes first. A wave of status spread over
// seconds (a change converging below a busy child) is merged about once
// per MaxWaits windows instead of once per window, and the value it
// settles on still waits one window after its last report.
//
// A burst that begins when nothing was merged for a whole window (an
// isolated change's reports) is merged LeadDivisor times sooner: one
// window/LeadDivisor after its first report, whatever comes meanwhile.
// What a change reports first thus goes up at once, and the rest of its
// wave, a new burst, coalesces as above: at most one merge more per wave.
const (
	MaxWaits    = 5
	LeadDivisor = 10
)

// Window times the merges of one reader of reports (a region's summary,
// the root's reported state): Note each report, merge when C fires, then
// call Fired. The zero value is not ready: use NewWindow. A Window serves
// one goroutine.
type Window struct {
	window  time.Duration
	timer   *time.Timer
	pending bool
	first   time.Time // of the pending burst
	lead    bool      // the pending burst began after a quiet window
	fired   time.Time // when the last burst was merged
	now     func() time.Time
}

// NewWindow returns a Window with nothing pending.
func NewWindow(window time.Duration) *Window {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &Window{window: window, timer: t, now: time.Now}
}

// Note records a report: C fires one window from now, or MaxWaits windows
// after the burst's first report if that is sooner; or, for a burst that
// began after a quiet window, window/LeadDivisor after its first report.
func (w *Window) Note() {
	now := w.now()
	if !w.pending {
		w.pending, w.first = true, now
		w.lead = now.Sub(w.fired) >= w.window
	}
	w.timer.Reset(w.wait(now))
}

// wait is how long after now the pending burst is merged.
func (w *Window) wait(now time.Time) time.Duration {
	if w.lead {
		return max(0, w.first.Add(w.window/LeadDivisor).Sub(now))
	}
	return max(0, min(w.window, w.first.Add(MaxWaits*w.window).Sub(now)))
}

// C fires when the pending burst is due.
func (w *Window) C() <-chan time.Time { return w.timer.C }

// Fired ends the burst C fired for; the next Note starts another.
func (w *Window) Fired() { w.pending, w.fired = false, w.now() }

// Pending says whether a burst waits for C.
func (w *Window) Pending() bool { return w.pending }

// Stop releases the timer.
func (w *Window) Stop() { w.timer.Stop() }
