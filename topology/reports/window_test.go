package reports

import (
	"testing"
	"time"
)

func TestWindowWait(t *testing.T) {
	const window = 200 * time.Millisecond
	const lead = window / LeadDivisor
	w := NewWindow(window)
	defer w.Stop()
	t0 := time.Unix(1000, 0)
	now := t0
	w.now = func() time.Time { return now }
	if w.Pending() {
		t.Fatal("a new Window is pending")
	}
	// The first burst begins after a quiet window: it is merged once
	// quiet for window/LeadDivisor, or MaxWaits of those after its first.
	w.Note()
	if !w.Pending() {
		t.Fatal("not pending after Note")
	}
	if got := w.wait(now); got != lead {
		t.Errorf("the first report after a quiet window: wait %v, want %v", got, lead)
	}
	now = t0.Add(MaxWaits*lead - lead/2)
	if got := w.wait(now); got != lead/2 {
		t.Errorf("a report %v into a burst after a quiet window: wait %v, want %v", now.Sub(t0), got, lead/2)
	}
	w.Fired()
	// Each burst that begins right after a merge has four times the last
	// gap, up to the window.
	for _, want := range growth(lead, window) {
		now = now.Add(time.Millisecond)
		w.Note()
		if got := w.wait(now); got != want {
			t.Errorf("the first report of a burst right after a merge: wait %v, want %v", got, want)
		}
		now = now.Add(time.Millisecond)
		w.Fired()
	}
	// A report every 100 ms keeps a burst of gap window open: each waits
	// one window, until MaxWaits windows after the first.
	t0 = now.Add(time.Millisecond)
	now = t0
	w.Note()
	for i, want := range []time.Duration{window, window, window, window, window, window, window, window, window, 100 * time.Millisecond, 0, 0} {
		now = t0.Add(time.Duration(i) * 100 * time.Millisecond)
		if got := w.wait(now); got != want {
			t.Errorf("%v after the first report: wait %v, want %v", now.Sub(t0), got, want)
		}
	}
	w.Fired()
	if w.Pending() {
		t.Fatal("pending after Fired")
	}
	// A burst a quarter of a window or more after the last report has the
	// shortest gap again.
	now = now.Add(window / 4)
	w.Note()
	if got := w.wait(now); got != lead {
		t.Errorf("first report of a burst after a quiet window: wait %v, want %v", got, lead)
	}
	w.Fired()
	now = now.Add(time.Millisecond)
	w.Note()
	if got := w.wait(now); got != 4*lead {
		t.Errorf("a burst right after a merge: wait %v, want %v", got, 4*lead)
	}
	// Less than a quarter of a window without reports: the gap grows
	// again.
	w.Fired()
	now = now.Add(window/4 - 2*time.Millisecond)
	w.Note()
	if got := w.wait(now); got != 16*lead {
		t.Errorf("a burst less than a quarter of a window after a report: wait %v, want %v", got, 16*lead)
	}
}

func TestWindowFires(t *testing.T) {
	w := NewWindow(10 * time.Millisecond)
	defer w.Stop()
	fires := func(what string, atLeast time.Duration) {
		t.Helper()
		start := time.Now()
		w.Note()
		select {
		case <-w.C():
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: C did not fire", what)
		}
		if d := time.Since(start); d < atLeast {
			t.Errorf("%s: fired after %v, before %v", what, d, atLeast)
		}
		w.Fired()
	}
	fires("a burst after a quiet window", 10*time.Millisecond/LeadDivisor)
	fires("a burst right after a merge", 4*10*time.Millisecond/LeadDivisor)
	select {
	case <-w.C():
		t.Error("fired again without a Note")
	case <-time.After(30 * time.Millisecond):
	}
}

func TestPacer(t *testing.T) {
	const window = 200 * time.Millisecond
	const lead = window / LeadDivisor
	p := NewPacer(window)
	now := time.Unix(1000, 0)
	p.now = func() time.Time { return now }
	if d := p.Wait(); d != 0 {
		t.Errorf("the first round waits %v", d)
	}
	p.Done()
	// Rounds wanted right after the last: each waits a gap four times the
	// last, up to the window.
	for _, want := range growth(lead, window) {
		now = now.Add(time.Millisecond)
		if d := p.Wait(); d != want-time.Millisecond {
			t.Errorf("a round wanted 1ms after the last: wait %v, want %v", d, want-time.Millisecond)
		}
		now = now.Add(want)
		p.Done()
	}
	// After a quarter of a window without rounds: at once, and the next
	// one soon.
	now = now.Add(window / 4)
	if d := p.Wait(); d != 0 {
		t.Errorf("a round after a quiet window waits %v", d)
	}
	p.Done()
	now = now.Add(time.Millisecond)
	if d := p.Wait(); d != 4*lead-time.Millisecond {
		t.Errorf("a round right after an isolated one: wait %v, want %v", d, 4*lead-time.Millisecond)
	}
}

// growth lists the gaps of bursts that each closely follow the last
// merge: four times lead, growing fourfold up to window, then window once
// more.
func growth(lead, window time.Duration) []time.Duration {
	var gaps []time.Duration
	for g := 4 * lead; g < window; g *= 4 {
		gaps = append(gaps, g)
	}
	return append(gaps, window, window)
}
